"""
Unmodified kubectl driving Deployments against a real server: create,
rollout status, scale, set image, rollout history, undo, restart, pause and
resume.

The server runs its scheduler and, beside its own node agent, two simulated
nodes: pods are placed, started and made ready as they would be in a cluster.
"""

import json

from twisted.trial.unittest import SkipTest, TestCase

from tests.integration.test_kubectl import KubectlMixin

ROLLED_OUT = 'deployment "web" successfully rolled out'


class DeploymentKubectlTests(KubectlMixin, TestCase):
    timeout = 180
    server_settings = {"no_orchlet": False, "simulated_nodes": 2}

    async def rollout_status(self):
        _, out, _ = await self.kubectl("rollout", "status", "deployment/web", "--timeout=90s")
        self.assertIn(ROLLED_OUT, out)

    async def replica_sets(self):
        listing = await self.get_json("rs", "-l", "app=web")
        return sorted(listing["items"], key=lambda rs: int(
            rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]))

    async def has_scale_subresource(self):
        code, body = await self.server.call("GET", "/apis/apps/v1")
        return code == 200 and any(r["name"] == "deployments/scale" for r in body["resources"])

    async def test_create_and_rollout_status(self):
        """create deployment, then rollout status finishes and get shows 3/3."""
        _, out, _ = await self.kubectl("create", "deployment", "web", "--image=nginx",
                                       "--replicas=3")
        self.assertIn("deployment.apps/web created", out)
        await self.rollout_status()
        d = await self.get_json("deployment", "web")
        self.assertEqual((d["status"]["readyReplicas"], d["status"]["availableReplicas"]),
                         (3, 3))
        _, out, _ = await self.kubectl("get", "deployment", "web", "--no-headers")
        self.assertEqual(out.split()[:4], ["web", "3/3", "3", "3"])
        await self.kubectl("patch", "deployment", "web", "-p", '{"spec":{"replicas":4}}')
        await self.rollout_status()
        self.assertEqual(len((await self.get_json("pods", "-l", "app=web"))["items"]), 4)

    async def test_scale(self):
        """kubectl scale up and down, through deployments/scale."""
        if not await self.has_scale_subresource():
            raise SkipTest("deployments/scale is not served yet")
        await self.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=2")
        await self.rollout_status()
        await self.kubectl("scale", "deployment", "web", "--replicas=5")
        await self.rollout_status()
        self.assertEqual(len((await self.get_json("pods", "-l", "app=web"))["items"]), 5)
        await self.kubectl("scale", "deployment", "web", "--replicas=1")
        await self.rollout_status()
        pods = (await self.get_json("pods", "-l", "app=web"))["items"]
        self.assertEqual(len([p for p in pods if not p["metadata"].get("deletionTimestamp")]),
                         1)

    async def test_set_image_history_undo_restart(self):
        """set image, rollout history, undo (to the last and to a given revision), restart."""
        await self.kubectl("create", "deployment", "web", "--image=nginx:1.24", "--replicas=2")
        await self.rollout_status()
        await self.kubectl("set", "image", "deployment/web", "nginx=nginx:1.25")
        await self.rollout_status()
        _, out, _ = await self.kubectl("rollout", "history", "deployment/web")
        revisions = [line.split()[0] for line in out.splitlines()[2:] if line.strip()]
        self.assertEqual(revisions, ["1", "2"])
        _, out, _ = await self.kubectl("rollout", "history", "deployment/web", "--revision=1",
                                       "-o", "json")
        shown = json.loads(out)
        template = shown["spec"].get("template", shown)   # the ReplicaSet, or its template
        self.assertEqual(template["spec"]["containers"][0]["image"], "nginx:1.24")
        _, out, _ = await self.kubectl("rollout", "undo", "deployment/web")
        self.assertIn("rolled back", out)
        await self.rollout_status()
        d = await self.get_json("deployment", "web")
        self.assertEqual(d["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.24")
        self.assertEqual(d["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "3")
        rss = await self.replica_sets()
        self.assertEqual([rs["spec"]["replicas"] for rs in rss], [0, 2])
        self.assertEqual(rss[-1]["metadata"]["annotations"][
            "deployment.kubernetes.io/revision-history"], "1")
        await self.kubectl("rollout", "undo", "deployment/web", "--to-revision=2")
        await self.rollout_status()
        d = await self.get_json("deployment", "web")
        self.assertEqual(d["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.25")
        _, out, _ = await self.kubectl("rollout", "restart", "deployment/web")
        self.assertIn("restarted", out)
        await self.rollout_status()
        rss = await self.replica_sets()
        self.assertEqual(len(rss), 3)
        self.assertIn("kubectl.kubernetes.io/restartedAt",
                      rss[-1]["spec"]["template"]["metadata"]["annotations"])
        _, out, _ = await self.kubectl("get", "events", "--field-selector",
                                       "involvedObject.kind=Deployment", "-o", "json")
        messages = [e["message"] for e in json.loads(out)["items"]]
        self.assertTrue(any(m.startswith("Scaled up replica set web-") and m.endswith(
            "from 0 to 2") for m in messages), messages)

    async def test_pause_and_resume(self):
        """A paused Deployment keeps its replica set through set image; resume rolls it out."""
        await self.kubectl("create", "deployment", "web", "--image=nginx:1.24", "--replicas=2")
        await self.rollout_status()
        await self.kubectl("rollout", "pause", "deployment/web")
        await self.kubectl("set", "image", "deployment/web", "nginx=nginx:1.25")
        d = await self.get_json("deployment", "web")
        progressing = [c for c in d["status"]["conditions"] if c["type"] == "Progressing"][0]
        self.assertEqual(progressing["reason"], "DeploymentPaused")
        self.assertEqual(len(await self.replica_sets()), 1)
        await self.kubectl("rollout", "resume", "deployment/web")
        await self.rollout_status()
        rss = await self.replica_sets()
        self.assertEqual([rs["spec"]["replicas"] for rs in rss], [0, 2])
