"""HorizontalPodAutoscaler: upstream's defaults and the 422s of a spec it cannot act on."""

from twisted.trial.unittest import SynchronousTestCase

from tests.support import APIHarness

HPAS = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


class AutoscalerTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def create(self, spec, name="h"):
        return self.api.call("POST", HPAS, {"metadata": {"name": name}, "spec": spec})[:2]

    def test_defaults(self):
        """minReplicas is 1 and the metric CPU at 80% when left out."""
        code, hpa = self.create({"maxReplicas": 3, "scaleTargetRef": REF})
        self.assertEqual(code, 201, hpa)
        self.assertEqual(hpa["spec"]["minReplicas"], 1)
        self.assertEqual(hpa["spec"]["metrics"], [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}])

    def test_behavior_defaults(self):
        """A behavior given gets every rule it leaves out; scale-down keeps no window."""
        code, hpa = self.create({"maxReplicas": 3, "scaleTargetRef": REF, "behavior": {
            "scaleDown": {"stabilizationWindowSeconds": 60}}})
        self.assertEqual(code, 201, hpa)
        behavior = hpa["spec"]["behavior"]
        self.assertEqual(behavior["scaleUp"], {
            "stabilizationWindowSeconds": 0, "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                         {"type": "Percent", "value": 100, "periodSeconds": 15}]})
        self.assertEqual(behavior["scaleDown"], {
            "stabilizationWindowSeconds": 60, "selectPolicy": "Max",
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]})

    def test_refused(self):
        """Specs the controller cannot act on are 422s naming the field."""
        cases = [
            ({"maxReplicas": 0, "scaleTargetRef": REF}, "spec.maxReplicas"),
            ({"minReplicas": 5, "maxReplicas": 3, "scaleTargetRef": REF}, "spec.maxReplicas"),
            ({"minReplicas": 0, "maxReplicas": 3, "scaleTargetRef": REF}, "spec.minReplicas"),
            ({"maxReplicas": 3}, "spec.scaleTargetRef.kind"),
            ({"maxReplicas": 3, "scaleTargetRef": dict(REF, name="a/b")},
             "spec.scaleTargetRef.name"),
            ({"maxReplicas": 3, "scaleTargetRef": REF, "metrics": [{"type": "Bogus"}]},
             "spec.metrics[0].type"),
            ({"maxReplicas": 3, "scaleTargetRef": REF, "metrics": [{"type": "Resource"}]},
             "spec.metrics[0].resource"),
            ({"maxReplicas": 3, "scaleTargetRef": REF, "metrics": [{
                "type": "Resource", "resource": {"name": "cpu", "target": {
                    "type": "Utilization", "averageUtilization": 0}}}]},
             "spec.metrics[0].resource.target.averageUtilization"),
            ({"maxReplicas": 3, "scaleTargetRef": REF, "metrics": [{
                "type": "Resource", "resource": {"name": "memory", "target": {
                    "type": "AverageValue", "averageValue": "lots"}}}]},
             "spec.metrics[0].resource.target.averageValue"),
            ({"maxReplicas": 3, "scaleTargetRef": REF, "behavior": {"scaleUp": {
                "policies": [{"type": "Pods", "value": 0, "periodSeconds": 15}]}}},
             "spec.behavior.scaleUp.policies[0].value"),
            ({"maxReplicas": 3, "scaleTargetRef": REF, "behavior": {"scaleDown": {
                "policies": [{"type": "Pods", "value": 1, "periodSeconds": 1801}]}}},
             "spec.behavior.scaleDown.policies[0].periodSeconds"),
            ({"maxReplicas": 3, "scaleTargetRef": REF, "behavior": {"scaleDown": {
                "stabilizationWindowSeconds": 3601}}},
             "spec.behavior.scaleDown.stabilizationWindowSeconds"),
            ({"maxReplicas": 3, "scaleTargetRef": REF, "behavior": {"scaleUp": {
                "selectPolicy": "Most"}}}, "spec.behavior.scaleUp.selectPolicy"),
            ({"maxReplicas": "3", "scaleTargetRef": REF}, "spec.maxReplicas"),
        ]
        for spec, field in cases:
            code, body = self.create(spec)
            self.assertEqual(code, 422, (spec, body))
            fields = [cause["field"] for cause in body["details"]["causes"]]
            self.assertIn(field, fields, (spec, body))

    def test_update_validated(self):
        """An update is held to the same rules."""
        code, hpa = self.create({"maxReplicas": 3, "scaleTargetRef": REF})
        hpa["spec"]["maxReplicas"] = -1
        code, body, _ = self.api.call("PUT", HPAS + "/h", hpa)
        self.assertEqual(code, 422, body)
