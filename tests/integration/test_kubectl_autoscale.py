"""Unmodified kubectl on autoscaling/v1: `kubectl autoscale` and `kubectl get hpa`."""

from twisted.trial.unittest import TestCase

from tests.integration.test_kubectl import KubectlMixin


class KubectlAutoscaleTests(KubectlMixin, TestCase):
    async def test_autoscale_then_get(self):
        """kubectl autoscale creates the HPA through autoscaling/v1; get hpa shows its targets."""
        await self.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=1")
        _, out, _ = await self.kubectl("autoscale", "deployment", "web", "--min=1", "--max=3",
                                       "--cpu-percent=50")
        self.assertIn("horizontalpodautoscaler.autoscaling/web autoscaled", out)
        _, out, _ = await self.kubectl("get", "hpa")
        header, row = [line.split() for line in out.splitlines()[:2]]
        self.assertEqual(header,
                         ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"])
        self.assertEqual(row[:3], ["web", "Deployment/web", "cpu:"])
        self.assertEqual(row[4:6], ["1", "3"])
        self.assertIn(row[6], ("0", "1"))   # the controller may have counted the one pod
        self.assertTrue(row[3].endswith("/50%"), row)
        v1 = await self.get_json("horizontalpodautoscalers.v1.autoscaling", "web")
        self.assertEqual((v1["apiVersion"], v1["spec"]["targetCPUUtilizationPercentage"]),
                         ("autoscaling/v1", 50))
        v2 = await self.get_json("horizontalpodautoscalers.v2.autoscaling", "web",
                                 "--show-managed-fields")
        self.assertEqual(v2["spec"]["metrics"], [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}])
        # kubectl 1.32 posts autoscaling/v1, as its managedFields entry says.
        created = [m for m in v2["metadata"]["managedFields"]
                   if m["manager"] == "kubectl-autoscale"]
        self.assertEqual([m["apiVersion"] for m in created], ["autoscaling/v1"])
        _, out, _ = await self.kubectl("delete", "hpa", "web")
        self.assertIn('horizontalpodautoscaler.autoscaling "web" deleted', out)
