"""Unmodified kubectl on the scale subresources and the workload defaults."""

import yaml
from twisted.trial.unittest import TestCase

from tests.integration.test_kubectl import KubectlMixin


class KubectlScaleTests(KubectlMixin, TestCase):
    async def test_scale_deployment(self):
        """kubectl scale finds deployments/scale in discovery and sets the replicas."""
        await self.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=1")
        _, out, _ = await self.kubectl("scale", "deployment/web", "--replicas=3")
        self.assertIn("deployment.apps/web scaled", out)
        deployment = await self.get_json("deployment", "web")
        self.assertEqual(deployment["spec"]["replicas"], 3)
        self.assertEqual(deployment["spec"]["strategy"], {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
        self.assertEqual(deployment["spec"]["progressDeadlineSeconds"], 600)

    async def test_scale_with_preconditions(self):
        """--current-replicas and --resource-version go through a GET and a PUT of the Scale."""
        await self.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=2")
        code, _, err = await self.kubectl("scale", "deployment/web", "--current-replicas=5",
                                          "--replicas=1", ok=False)
        self.assertNotEqual(code, 0)
        self.assertIn("Expected replicas to be 5, was 2", err)
        await self.kubectl("scale", "deployment/web", "--current-replicas=2", "--replicas=4")
        code, _, err = await self.kubectl("scale", "deployment/web", "--resource-version=1",
                                          "--replicas=5", ok=False)
        self.assertNotEqual(code, 0)
        self.assertIn("Expected resource version to be 1, was ", err)
        for _ in range(10):
            # The deployment controller writes status meanwhile: a version read
            # before one of its writes is stale, as it would be for a user.
            version = (await self.get_json("deployment", "web"))["metadata"]["resourceVersion"]
            code, _, err = await self.kubectl("scale", "deployment/web",
                                              f"--resource-version={version}", "--replicas=5",
                                              ok=False)
            if code == 0:
                break
            self.assertIn(f"Expected resource version to be {version}, was ", err)
        self.assertEqual((await self.get_json("deployment", "web"))["spec"]["replicas"], 5)

    async def test_scale_other_kinds(self):
        """ReplicaSets, StatefulSets and ReplicationControllers scale the same way."""
        template = {"metadata": {"labels": {"app": "db"}},
                    "spec": {"containers": [{"name": "c", "image": "postgres"}]}}
        await self.kubectl("create", "-f", "-", stdin=[
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "db"},
             "spec": {"selector": {"matchLabels": {"app": "db"}}, "template": template}},
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
             "spec": {"serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                      "template": template}},
            {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "db"},
             "spec": {"template": template}}])
        for kind in ("replicaset", "statefulset", "replicationcontroller"):
            await self.kubectl("scale", f"{kind}/db", "--replicas=2")
            self.assertEqual((await self.get_json(kind, "db"))["spec"]["replicas"], 2, kind)
        _, out, _ = await self.kubectl("get", "replicaset", "db", "--subresource=scale",
                                       "-o", "yaml")
        scale = yaml.safe_load(out)
        self.assertEqual((scale["kind"], scale["spec"]["replicas"]), ("Scale", 2))

    async def test_create_job_gets_a_selector(self):
        """kubectl create job makes a Job whose selector and labels the server generated."""
        await self.kubectl("create", "job", "once", "--image=busybox")
        job = await self.get_json("job", "once")
        uid = job["metadata"]["uid"]
        self.assertEqual(job["spec"]["selector"],
                         {"matchLabels": {"batch.orch.io/controller-uid": uid}})
        self.assertEqual(job["spec"]["template"]["metadata"]["labels"]["job-name"], "once")
        self.assertEqual(job["spec"]["backoffLimit"], 6)

    async def test_run_pod_is_pending(self):
        """kubectl run makes a Pending pod with its QoS class and the pod defaults."""
        await self.kubectl("run", "solo", "--image=busybox")
        pod = await self.get_json("pod", "solo")
        # With no node to run it, the scheduler may already have said so in a condition.
        self.assertEqual((pod["status"]["phase"], pod["status"]["qosClass"]),
                         ("Pending", "BestEffort"))
        self.assertEqual(pod["spec"]["schedulerName"], "default-scheduler")
        _, out, _ = await self.kubectl("get", "pod", "solo")
        self.assertIn("Pending", out)
