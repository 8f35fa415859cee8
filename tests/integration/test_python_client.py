"""
The official Python client against a real server: every built-in kind it
has a model for is created, read, listed and deleted through its typed API,
so that the models' checks (required fields, types) run on every answer;
and the scale subresources through their typed calls.
"""

import base64

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from twisted.internet import threads
from twisted.trial.unittest import SkipTest, TestCase

try:
    import kubernetes
except ImportError:      # the test extra is not installed
    kubernetes = None

from orchd.testing import start

NS = "default"
LABELS = {"app": "web"}
POD_SPEC = {"containers": [{"name": "c", "image": "nginx:1.27"}]}
TEMPLATE = {"metadata": {"labels": LABELS}, "spec": POD_SPEC}
JOB_TEMPLATE = {"spec": dict(POD_SPEC, restartPolicy="Never")}
SELECTOR = {"matchLabels": LABELS}


def _csr_pem():
    key = ec.generate_private_key(ec.SECP256R1())
    request = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([
        x509.NameAttribute(NameOID.COMMON_NAME, "client-test")])).sign(key, hashes.SHA256())
    return base64.b64encode(request.public_bytes(serialization.Encoding.PEM)).decode()


def _kinds():
    """
    C{(API class, snake name, namespaced, body)} of every built-in kind the
    client has a typed API for (ComponentStatus and Binding are not stored
    and have no create-read-list-delete cycle).
    """
    webhook = {"name": "hook.example.com", "clientConfig": {"url": "https://example.com/hook"},
               "admissionReviewVersions": ["v1"], "sideEffects": "None", "rules": []}
    return (
        ("CoreV1Api", "config_map", True, {"data": {"a": "b"}}),
        ("CoreV1Api", "endpoints", True, {"subsets": [{"addresses": [{"ip": "10.0.0.1"}],
                                                       "ports": [{"port": 80}]}]}),
        ("CoreV1Api", "event", True, {
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": NS},
            "reason": "Tested", "message": "a test", "type": "Normal",
            "source": {"component": "test"}}),
        ("CoreV1Api", "limit_range", True, {"spec": {"limits": [
            {"type": "Container", "default": {"cpu": "500m"}}]}}),
        ("CoreV1Api", "persistent_volume_claim", True, {"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        ("CoreV1Api", "pod", True, {"spec": POD_SPEC}),
        ("CoreV1Api", "pod_template", True, {"template": TEMPLATE}),
        ("CoreV1Api", "replication_controller", True, {"spec": {"selector": LABELS,
                                                                "template": TEMPLATE}}),
        ("CoreV1Api", "resource_quota", True, {"spec": {"hard": {"pods": "10"}}}),
        ("CoreV1Api", "secret", True, {"stringData": {"a": "b"}}),
        ("CoreV1Api", "service_account", True, {}),
        ("CoreV1Api", "service", True, {"spec": {"ports": [{"port": 80}]}}),
        ("CoreV1Api", "namespace", False, {}),
        ("CoreV1Api", "node", False, {}),
        ("CoreV1Api", "persistent_volume", False, {"spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/tmp/pv"}}}),
        ("AdmissionregistrationV1Api", "mutating_webhook_configuration", False,
         {"webhooks": [webhook]}),
        ("AdmissionregistrationV1Api", "validating_webhook_configuration", False,
         {"webhooks": [{k: v for k, v in webhook.items()}]}),
        # A definition's name is <plural>.<group>.
        ("ApiextensionsV1Api", "custom_resource_definition", False, {
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                          "listKind": "WidgetList"},
                "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                    "openAPIV3Schema": {"type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True}}}]}}),
        ("ApiregistrationV1Api", "api_service", False, {"spec": {
            "group": "example.com", "version": "v1alpha1", "groupPriorityMinimum": 100,
            "versionPriority": 10}}),
        ("AppsV1Api", "controller_revision", True, {"revision": 1, "data": {}}),
        ("AppsV1Api", "daemon_set", True, {"spec": {"selector": SELECTOR,
                                                    "template": TEMPLATE}}),
        ("AppsV1Api", "deployment", True, {"spec": {"selector": SELECTOR,
                                                    "template": TEMPLATE}}),
        ("AppsV1Api", "replica_set", True, {"spec": {"selector": SELECTOR,
                                                     "template": TEMPLATE}}),
        ("AppsV1Api", "stateful_set", True, {"spec": {"selector": SELECTOR,
                                                      "serviceName": "web",
                                                      "template": TEMPLATE}}),
        ("AutoscalingV2Api", "horizontal_pod_autoscaler", True, {"spec": {
            "maxReplicas": 3, "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                                 "name": "web"}}}),
        ("BatchV1Api", "cron_job", True, {"spec": {
            "schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": JOB_TEMPLATE}}}}),
        ("BatchV1Api", "job", True, {"spec": {"template": JOB_TEMPLATE}}),
        ("CertificatesV1Api", "certificate_signing_request", False, {"spec": {
            "request": _csr_pem(), "signerName": "example.com/test",
            "usages": ["client auth"]}}),
        ("CoordinationV1Api", "lease", True, {"spec": {"holderIdentity": "me",
                                                       "leaseDurationSeconds": 15}}),
        ("DiscoveryV1Api", "endpoint_slice", True, {
            "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}],
            "ports": [{"port": 80, "protocol": "TCP"}]}),
        ("EventsV1Api", "event", True, {
            "eventTime": "2024-01-01T00:00:00.000000Z", "reportingController": "example.com/t",
            "reportingInstance": "t-1", "action": "Testing", "reason": "Tested",
            "type": "Normal", "note": "a test",
            "regarding": {"kind": "Pod", "name": "p", "namespace": NS}}),
        ("NetworkingV1Api", "ingress", True, {"spec": {"defaultBackend": {"service": {
            "name": "web", "port": {"number": 80}}}}}),
        ("NetworkingV1Api", "network_policy", True, {"spec": {"podSelector": {}}}),
        ("NetworkingV1Api", "ingress_class", False, {"spec": {
            "controller": "example.com/ingress"}}),
        ("NodeV1Api", "runtime_class", False, {"handler": "runc"}),
        ("PolicyV1Api", "pod_disruption_budget", True, {"spec": {"minAvailable": 1,
                                                                 "selector": SELECTOR}}),
        ("RbacAuthorizationV1Api", "role", True, {"rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
        ("RbacAuthorizationV1Api", "role_binding", True, {
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": "reader"},
            "subjects": [{"kind": "User", "name": "alice",
                          "apiGroup": "rbac.authorization.k8s.io"}]}),
        ("RbacAuthorizationV1Api", "cluster_role", False, {"rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
        ("RbacAuthorizationV1Api", "cluster_role_binding", False, {
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "view"},
            "subjects": [{"kind": "Group", "name": "readers",
                          "apiGroup": "rbac.authorization.k8s.io"}]}),
        ("SchedulingV1Api", "priority_class", False, {"value": 1000}),
        ("StorageV1Api", "csi_storage_capacity", True, {"storageClassName": "fast"}),
        ("StorageV1Api", "csi_driver", False, {"spec": {}}),
        ("StorageV1Api", "csi_node", False, {"spec": {"drivers": []}}),
        ("StorageV1Api", "storage_class", False, {"provisioner": "example.com/disk"}),
        ("StorageV1Api", "volume_attachment", False, {"spec": {
            "attacher": "example.com/disk", "nodeName": "n1",
            "source": {"persistentVolumeName": "pv-1"}}}),
    )


class PythonClientKindsTests(TestCase):
    """Every kind, through the official client's typed calls."""

    timeout = 240

    async def setUp(self):
        if kubernetes is None:
            raise SkipTest("the kubernetes package (the test extra) is not installed")
        # Every controller, as a plain server runs them (the scale test's
        # replica set controller writes status); the spec's group names.
        self.cp = await start(self, controllers=("*",), upstream_group_names=False)
        self.client = self.cp.api_client()
        self.addCleanup(self.client.close)

    def api(self, name):
        return getattr(kubernetes.client, name)(self.client)

    def cycle(self, api_name, snake, namespaced, body):
        """Create, read, list and delete one object; returns what went wrong, or None."""
        api = self.api(api_name)
        name = (body.get("metadata") or {}).get("name") or f"client-{snake.replace('_', '-')}"
        body = dict(body, metadata={"name": name, "labels": {"test": "client"}})
        scope = "namespaced_" if namespaced else ""
        where = {"namespace": NS} if namespaced else {}
        step = "create"
        try:
            created = getattr(api, f"create_{scope}{snake}")(body=body, **where)
            step = "read"
            read = getattr(api, f"read_{scope}{snake}")(name, **where)
            step = "list"
            listed = getattr(api, f"list_{scope}{snake}")(**where)
            step = "delete"
            deleted = getattr(api, f"delete_{scope}{snake}")(name, **where)
        except Exception as e:     # a model's check, or the server's answer
            return f"{step}: {type(e).__name__}: {e}"[:600]
        if read.metadata.uid != created.metadata.uid:
            return "read: another object"
        if name not in [item.metadata.name for item in listed.items]:
            return "list: the object is missing"
        if deleted is None:
            return "delete: no answer"
        return None

    async def test_every_kind(self):
        """Each kind's create, read, list and delete answers pass the client's model checks."""
        def run():
            return {f"{api}.{snake}": failure for api, snake, namespaced, body in _kinds()
                    if (failure := self.cycle(api, snake, namespaced, body)) is not None}

        self.assertEqual(await threads.deferToThread(run), {})

    async def test_delete_answers_the_object(self):
        """Deleting a pod or a service answers the typed object, as upstream's OpenAPI says."""
        def run():
            core = self.api("CoreV1Api")
            core.create_namespaced_pod(NS, {"metadata": {"name": "gone"}, "spec": POD_SPEC})
            pod = core.delete_namespaced_pod("gone", NS)
            core.create_namespaced_service(NS, {"metadata": {"name": "gone"},
                                                "spec": {"ports": [{"port": 80}]}})
            service = core.delete_namespaced_service("gone", NS)
            return pod, service

        pod, service = await threads.deferToThread(run)
        self.assertEqual((type(pod).__name__, pod.metadata.name), ("V1Pod", "gone"))
        self.assertEqual(pod.status.phase, "Pending")
        self.assertEqual(type(service).__name__, "V1Service")
        self.assertIsNotNone(service.status.load_balancer)

    async def test_scale_subresources(self):
        """The typed scale calls read and change a workload's replicas."""
        def run():
            apps = self.api("AppsV1Api")
            workload = {"spec": {"selector": SELECTOR, "template": TEMPLATE}}
            apps.create_namespaced_deployment(NS, dict(workload, metadata={"name": "web"}))
            # Labels of its own: a Deployment adopts (and then scales) an
            # orphaned ReplicaSet its selector matches.
            alone = {"matchLabels": {"app": "web-alone"}}
            apps.create_namespaced_replica_set(NS, {
                "metadata": {"name": "web"},
                "spec": {"selector": alone,
                         "template": dict(TEMPLATE, metadata={"labels": alone["matchLabels"]})}})
            patched = apps.patch_namespaced_deployment_scale("web", NS, {"spec": {"replicas": 3}})
            # The Scale carries the replica set's resourceVersion, and the replica set
            # controller may write its status between the read and the replace: a 409
            # there is optimistic concurrency, which clients meet by reading again.
            for attempt in range(5):
                scale = apps.read_namespaced_replica_set_scale("web", NS)
                scale.spec.replicas = 4
                try:
                    replaced = apps.replace_namespaced_replica_set_scale("web", NS, scale)
                    break
                except kubernetes.client.ApiException as e:
                    if e.status != 409 or attempt == 4:
                        raise
            deployment = apps.read_namespaced_deployment("web", NS)
            replica_set = apps.read_namespaced_replica_set("web", NS)
            return patched, replaced, deployment, replica_set

        patched, replaced, deployment, replica_set = await threads.deferToThread(run)
        self.assertEqual((type(patched).__name__, patched.spec.replicas), ("V1Scale", 3))
        self.assertEqual(patched.status.selector, "app=web")
        self.assertEqual(replaced.spec.replicas, 4)
        self.assertEqual((deployment.spec.replicas, replica_set.spec.replicas), (3, 4))
        self.assertIsNotNone(replica_set.status.replicas)   # a field the model requires
