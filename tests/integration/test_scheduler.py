"""The scheduler in a real control plane: pods placed on registered nodes, health ports, kubectl."""

import json
import os
import socket

import kubernetes
from treq.client import HTTPClient
from twisted.internet import reactor, threads, utils
from twisted.trial.unittest import SkipTest, TestCase
from twisted.web.client import Agent, HTTPConnectionPool

from orchd.client.orchconfig import load_orchconfig
from orchd.tls.client import ClientTLSPolicy
from tests.integration.support import RunningControlPlane, kubectl, sleep

PODS = "/api/v1/namespaces/default/pods"
#: A taint of the user's (the node lifecycle controller owns the not-ready one).
DEDICATED = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}


def free_port():
    """A port free now on the loopback address (the health ports take no 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node(name, cpu="4", taints=None):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"orch.io/hostname": name}},
            "spec": {"taints": taints} if taints else {},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                       "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}


class SchedulerTests(TestCase):
    timeout = 90

    async def setUp(self):
        self.scheduler_port, self.manager_port = free_port(), free_port()
        self.server = await RunningControlPlane(
            self, scheduler_port=self.scheduler_port,
            controller_manager_port=self.manager_port).start()

    async def add_node(self, *args, **kwargs):
        obj = node(*args, **kwargs)
        code, body = await self.server.call("POST", "/api/v1/nodes", obj)
        self.assertEqual(code, 201, body)
        code, body = await self.server.call(
            "PUT", f"/api/v1/nodes/{obj['metadata']['name']}/status", obj)
        self.assertEqual(code, 200, body)

    async def add_pod(self, name, cpu="100m", owner=None):
        meta = {"name": name}
        if owner is not None:
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                        "name": owner["metadata"]["name"],
                                        "uid": owner["metadata"]["uid"], "controller": True}]
        code, body = await self.server.call("POST", PODS, {
            "metadata": meta, "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {
                "requests": {"cpu": cpu}}}]}})
        self.assertEqual(code, 201, body)

    async def wait_for(self, name, test, seconds=20):
        """The pod C{name} once C{test(pod)} holds."""
        for _ in range(int(seconds / 0.05)):
            code, pod = await self.server.call("GET", f"{PODS}/{name}")
            if code == 200 and test(pod):
                return pod
            await sleep(0.05)
        self.fail(f"pod {name} never got there: {pod}")

    async def test_pods_placed_around_taints_and_waiting_for_room(self):
        """Pods spread over the open nodes, avoid the tainted one, and one too big waits for a node."""
        await self.add_node("open-1")
        await self.add_node("open-2")
        await self.add_node("tainted", taints=[DEDICATED])
        code, rs = await self.server.call("POST", "/apis/apps/v1/namespaces/default/replicasets", {
            "metadata": {"name": "web"}, "spec": {
                "replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                             "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
        self.assertEqual(code, 201, rs)
        for i in range(4):
            await self.add_pod(f"web-{i}", owner=rs)
        placed = []
        for i in range(4):
            pod = await self.wait_for(f"web-{i}", lambda p: p["spec"].get("nodeName"))
            placed.append(pod["spec"]["nodeName"])
        self.assertEqual(sorted(placed), ["open-1", "open-1", "open-2", "open-2"])

        await self.add_pod("huge", cpu="6")
        pod = await self.wait_for("huge", lambda p: (p.get("status") or {}).get("conditions"))
        [condition] = pod["status"]["conditions"]
        self.assertEqual((condition["type"], condition["status"], condition["reason"]),
                         ("PodScheduled", "False", "Unschedulable"))
        self.assertEqual(condition["message"], (
            "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: infra}, "
            "2 Insufficient cpu. preemption: 0/3 nodes are available: 1 Preemption is not "
            "helpful for scheduling, 2 No preemption victims found for incoming pod.."))
        await self.add_node("large", cpu="8")
        pod = await self.wait_for("huge", lambda p: p["spec"].get("nodeName"))
        self.assertEqual(pod["spec"]["nodeName"], "large")
        reasons = set()
        for _ in range(200):  # events are written after the binding, not with it
            code, events = await self.server.call(
                "GET", "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dhuge")
            self.assertEqual(code, 200)
            reasons = {e["reason"] for e in events["items"]}
            if "Scheduled" in reasons:
                break
            await sleep(0.05)
        self.assertEqual(reasons, {"FailedScheduling", "Scheduled"})

    def anonymous(self):
        pool = HTTPConnectionPool(reactor, persistent=False)
        ca = load_orchconfig(self.server.plane.pki.admin_orchconfig_path).ca_pem
        return HTTPClient(Agent(reactor, contextFactory=ClientTLSPolicy(ca), pool=pool))

    async def get(self, port, path):
        response = await self.anonymous().get(f"https://127.0.0.1:{port}{path}")
        return response.code, (await response.content()).decode()

    async def test_health_ports(self):
        """Both components' health ports answer anyone over TLS, /metrics too; other paths
        are 404."""
        from prometheus_client.parser import text_string_to_metric_families
        own = {self.scheduler_port: "scheduler_schedule_attempts",
               self.manager_port: "workqueue_adds"}
        for port in (self.scheduler_port, self.manager_port):
            for path in ("/healthz", "/livez", "/readyz"):
                self.assertEqual(await self.get(port, path), (200, "ok"), (port, path))
            code, text = await self.get(port, "/metrics")
            self.assertEqual(code, 200)
            names = {f.name for f in text_string_to_metric_families(text)}
            self.assertIn("leader_election_master_status", names)
            self.assertIn(own[port], names)
            self.assertEqual(await self.get(port, "/nothing"), (404, "404 page not found\n"))
        code, body = await self.get(self.scheduler_port, "/readyz?verbose")
        self.assertIn("[+]sched-handler-sync ok", body)
        self.assertIn("[+]leaderElection ok", body)
        self.assertEqual(await self.get(self.manager_port, "/healthz/namespace"), (200, "ok"))
        code, body = await self.get(self.manager_port, "/healthz?verbose")
        self.assertIn("[+]garbagecollector ok", body)
        code, statuses = await self.server.call("GET", "/api/v1/componentstatuses")
        self.assertEqual(code, 200)
        self.assertEqual({i["metadata"]["name"]: i["conditions"][0]["status"]
                          for i in statuses["items"]},
                         {"scheduler": "True", "controller-manager": "True", "etcd-0": "True"})

    async def test_kubectl_get_componentstatuses(self):
        """kubectl get componentstatuses prints each component Healthy, and upstream's warning."""
        binary = kubectl()
        if binary is None:
            raise SkipTest("kubectl is not installed")
        home = os.path.abspath(self.mktemp())
        os.makedirs(home)
        out, err, code = await utils.getProcessOutputAndValue(
            binary, ["--kubeconfig", self.server.plane.pki.admin_orchconfig_path, "get",
                     "componentstatuses"], env={"HOME": home})
        self.assertEqual(code, 0, err)
        lines = out.decode().splitlines()
        self.assertEqual(lines[0].split(), ["NAME", "STATUS", "MESSAGE", "ERROR"])
        self.assertEqual(sorted(line.split()[:3] for line in lines[1:]), [
            ["controller-manager", "Healthy", "ok"], ["etcd-0", "Healthy",
                                                       '{"health":"true","reason":""}'],
            ["scheduler", "Healthy", "ok"]])
        self.assertIn(b"v1 ComponentStatus is deprecated in v1.19+", err)

    async def test_python_client_binds(self):
        """The official client's binding calls bind a pod another scheduler left, 201 Success."""
        for name in ("by-subresource", "by-collection"):
            code, body = await self.server.call("POST", PODS, {
                "metadata": {"name": name}, "spec": {"schedulerName": "elsewhere", "containers": [
                    {"name": "c", "image": "nginx"}]}})
            self.assertEqual(code, 201, body)
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(
            config_file=self.server.plane.pki.admin_orchconfig_path,
            client_configuration=configuration)
        v1 = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))

        def bind():
            answers = []
            for name, call in (("by-subresource", lambda body: v1.create_namespaced_pod_binding(
                    "by-subresource", "default", body, _preload_content=False)),
                               ("by-collection", lambda body: v1.create_namespaced_binding(
                                   "default", body, _preload_content=False))):
                body = kubernetes.client.V1Binding(
                    metadata=kubernetes.client.V1ObjectMeta(name=name),
                    target=kubernetes.client.V1ObjectReference(kind="Node", name="chosen"))
                response = call(body)
                answers.append((response.status, json.loads(response.data)))
            return answers

        for status, answer in await threads.deferToThread(bind):
            self.assertEqual((status, answer["kind"], answer["status"]), (201, "Status", "Success"))
        for name in ("by-subresource", "by-collection"):
            code, pod = await self.server.call("GET", f"{PODS}/{name}")
            self.assertEqual(pod["spec"]["nodeName"], "chosen")
