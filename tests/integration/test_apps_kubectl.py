"""
Unmodified kubectl driving DaemonSets and StatefulSets against a real server:
create, rollout status, history and undo, scale.

The server runs its scheduler, its own node agent and three simulated nodes,
so daemon pods are placed on every node and stateful pods become ready.
"""

import json

from twisted.trial.unittest import TestCase

from tests.integration.test_kubectl import KubectlMixin


def daemon_set(image):
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"metadata": {"labels": {"app": "agent"}},
                                  "spec": {"containers": [{"name": "agent", "image": image}]}}}}


def stateful_set(image, replicas=3):
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "serviceName": "web",
                     "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "nginx", "image": image}]}}}}


def history_rows(out):
    return [line.split()[0] for line in out.splitlines()[2:] if line.strip()]


class AppsKubectlTests(KubectlMixin, TestCase):
    timeout = 240
    server_settings = {"no_orchlet": False, "simulated_nodes": 3}

    async def rollout_status(self, what):
        """kubectl rollout status; on a time-out the failure shows the object and its pods."""
        code, out, err = await self.kubectl("rollout", "status", what, "--timeout=120s",
                                            ok=False)
        if code != 0:
            kind, name = what.split("/")
            state = {"object": await self.get_json(kind, name),
                     "pods": (await self.get_json("pods"))["items"],
                     "events": (await self.get_json("events"))["items"]}
            self.fail(f"rollout status {what}: {err}\n{json.dumps(state, indent=1)}")
        return out

    async def active_pods(self, app):
        pods = (await self.get_json("pods", "-l", f"app={app}"))["items"]
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    async def test_daemonset_rollout(self):
        """A DaemonSet runs one pod per node, cordoned too; rollout status, history, undo work."""
        for _ in range(200):    # the node agent and three simulated nodes register
            nodes = (await self.get_json("nodes"))["items"]
            if len(nodes) == 4:
                break
        self.assertEqual(len(nodes), 4)
        await self.kubectl("cordon", nodes[-1]["metadata"]["name"])
        await self.kubectl("apply", "-f", "-", stdin=[daemon_set("agent:1")])
        out = await self.rollout_status("daemonset/agent")
        self.assertIn('daemon set "agent" successfully rolled out', out)
        pods = await self.active_pods("agent")
        self.assertEqual(sorted(p["spec"]["nodeName"] for p in pods),
                         sorted(n["metadata"]["name"] for n in nodes))
        await self.kubectl("set", "image", "daemonset/agent", "agent=agent:2")
        out = await self.rollout_status("daemonset/agent")
        self.assertIn("successfully rolled out", out)
        _, out, _ = await self.kubectl("rollout", "history", "daemonset/agent")
        self.assertEqual(history_rows(out), ["1", "2"])
        _, out, _ = await self.kubectl("rollout", "history", "daemonset/agent", "--revision=1")
        self.assertIn("agent:1", out)
        _, out, _ = await self.kubectl("rollout", "undo", "daemonset/agent")
        self.assertIn("rolled back", out)
        await self.rollout_status("daemonset/agent")
        ds = await self.get_json("daemonset", "agent")
        self.assertEqual(ds["spec"]["template"]["spec"]["containers"][0]["image"], "agent:1")
        pods = await self.active_pods("agent")
        self.assertEqual({p["spec"]["containers"][0]["image"] for p in pods}, {"agent:1"})
        _, out, _ = await self.kubectl("rollout", "history", "daemonset/agent")
        self.assertEqual(history_rows(out), ["2", "3"])
        _, out, _ = await self.kubectl("get", "daemonset", "agent", "--no-headers")
        count = str(len(nodes))
        self.assertEqual(out.split()[1:6], [count] * 5)
        _, out, _ = await self.kubectl("rollout", "restart", "daemonset/agent")
        self.assertIn("restarted", out)
        await self.rollout_status("daemonset/agent")
        _, out, _ = await self.kubectl("rollout", "history", "daemonset/agent")
        self.assertEqual(history_rows(out), ["2", "3", "4"])

    async def test_statefulset_rollout_and_scale(self):
        """A StatefulSet comes up in order; scale, rollout status, history and undo work."""
        await self.kubectl("apply", "-f", "-", stdin=[stateful_set("nginx:1.24")])
        out = await self.rollout_status("statefulset/web")
        # The defaulted partition 0 makes kubectl report a partitioned roll-out, as upstream.
        self.assertIn("partitioned roll out complete: 3 new pods have been updated", out)
        pods = await self.active_pods("web")
        self.assertEqual(sorted(p["metadata"]["name"] for p in pods), ["web-0", "web-1", "web-2"])
        self.assertEqual(pods[0]["spec"]["hostname"], pods[0]["metadata"]["name"])
        await self.kubectl("scale", "statefulset", "web", "--replicas=1")
        await self.rollout_status("statefulset/web")
        for _ in range(100):
            if len(await self.active_pods("web")) == 1:
                break
        self.assertEqual([p["metadata"]["name"] for p in await self.active_pods("web")],
                         ["web-0"])
        await self.kubectl("scale", "statefulset", "web", "--replicas=2")
        await self.kubectl("set", "image", "statefulset/web", "nginx=nginx:1.25")
        out = await self.rollout_status("statefulset/web")
        self.assertIn("partitioned roll out complete: 2 new pods have been updated", out)
        _, out, _ = await self.kubectl("rollout", "history", "statefulset/web")
        self.assertEqual(history_rows(out), ["1", "2"])
        _, out, _ = await self.kubectl("rollout", "undo", "statefulset/web", "--to-revision=1")
        self.assertIn("rolled back", out)
        await self.rollout_status("statefulset/web")
        sts = await self.get_json("statefulset", "web")
        self.assertEqual(sts["spec"]["template"]["spec"]["containers"][0]["image"],
                         "nginx:1.24")
        self.assertEqual(sts["status"]["currentRevision"], sts["status"]["updateRevision"])
        _, out, _ = await self.kubectl("get", "controllerrevisions", "-o", "json")
        revisions = json.loads(out)["items"]
        self.assertEqual(sorted(r["revision"] for r in revisions
                                if r["metadata"]["name"].startswith("web-")), [2, 3])

    async def test_statefulset_claims(self):
        """Each pod of a StatefulSet with a claim template gets its claim, kept on scale-down."""
        body = stateful_set("nginx:1.24", replicas=2)
        body["metadata"]["name"] = "db"
        body["spec"].update(podManagementPolicy="Parallel", selector={"matchLabels": {"app": "db"}},
                            volumeClaimTemplates=[{
                                "metadata": {"name": "data"},
                                "spec": {"accessModes": ["ReadWriteOnce"],
                                         "resources": {"requests": {"storage": "1Gi"}}}}])
        body["spec"]["template"]["metadata"]["labels"] = {"app": "db"}
        await self.kubectl("apply", "-f", "-", stdin=[body])
        await self.rollout_status("statefulset/db")
        claims = (await self.get_json("pvc"))["items"]
        self.assertEqual(sorted(c["metadata"]["name"] for c in claims), ["data-db-0", "data-db-1"])
        pod = await self.get_json("pod", "db-1")
        self.assertIn({"name": "data", "persistentVolumeClaim": {"claimName": "data-db-1"}},
                      pod["spec"]["volumes"])
        await self.kubectl("scale", "statefulset", "db", "--replicas=1")
        await self.rollout_status("statefulset/db")
        self.assertEqual(len((await self.get_json("pvc"))["items"]), 2)
