"""
The official Python client reading what the DaemonSet and StatefulSet
controllers write: the sets with their status, and their ControllerRevisions,
through the typed calls whose models check required fields.
"""

import time

from twisted.internet import threads
from twisted.trial.unittest import SkipTest, TestCase

try:
    import kubernetes
except ImportError:      # the test extra is not installed
    kubernetes = None

from tests.integration.support import RunningControlPlane

NS = "default"


def _workload(name):
    labels = {"app": name}
    return {"metadata": {"name": name}, "spec": {
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels},
                     "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}}


class AppsPythonClientTests(TestCase):
    timeout = 120

    async def setUp(self):
        if kubernetes is None:
            raise SkipTest("the kubernetes package (the test extra) is not installed")
        self.server = await RunningControlPlane(self, simulated_nodes=2).start()
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(
            config_file=self.server.plane.pki.admin_orchconfig_path,
            client_configuration=configuration)
        self.client = kubernetes.client.ApiClient(configuration)
        self.addCleanup(self.client.close)

    async def test_sets_and_revisions(self):
        """DaemonSets, StatefulSets and ControllerRevisions pass the client's model checks."""
        def run():
            apps = kubernetes.client.AppsV1Api(self.client)
            apps.create_namespaced_daemon_set(NS, _workload("agent"))
            stateful = _workload("web")
            stateful["spec"].update(replicas=2, serviceName="web")
            apps.create_namespaced_stateful_set(NS, stateful)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                ds = apps.read_namespaced_daemon_set("agent", NS)
                sts = apps.read_namespaced_stateful_set("web", NS)
                if ds.status.number_ready == ds.status.desired_number_scheduled > 0 and \
                        sts.status.ready_replicas == 2:
                    break
                time.sleep(0.2)
            revisions = apps.list_namespaced_controller_revision(NS)
            listed = apps.list_namespaced_daemon_set(NS), apps.list_namespaced_stateful_set(NS)
            return ds, sts, revisions, listed

        ds, sts, revisions, listed = await threads.deferToThread(run)
        self.assertEqual(ds.status.desired_number_scheduled, 2)
        self.assertEqual((ds.status.number_ready, ds.status.updated_number_scheduled), (2, 2))
        self.assertEqual((sts.status.ready_replicas, sts.status.replicas), (2, 2))
        self.assertEqual(sts.status.current_revision, sts.status.update_revision)
        owners = sorted((r.metadata.owner_references[0].kind, r.revision)
                        for r in revisions.items)
        self.assertEqual(owners, [("DaemonSet", 1), ("StatefulSet", 1)])
        self.assertEqual([len(items.items) for items in listed], [1, 1])
