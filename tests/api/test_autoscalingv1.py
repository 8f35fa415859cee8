"""Tests for L{orchd.api.autoscalingv1}: HorizontalPodAutoscaler v1 <-> v2 conversion."""

import copy

import orjson
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.autoscalingv1 import (
    BEHAVIOR_ANNOTATION, CONDITIONS_ANNOTATION, CURRENT_METRICS_ANNOTATION, METRICS_ANNOTATION,
    to_v1, to_v2,
)
from orchd.api.errors import StatusError

REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
CPU = {"type": "Resource", "resource": {
    "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}
MEMORY = {"type": "Resource", "resource": {
    "name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}}
PODS = {"type": "Pods", "pods": {"metric": {"name": "qps"},
                                 "target": {"type": "AverageValue", "averageValue": "10"}}}
CPU_NOW = {"type": "Resource", "resource": {
    "name": "cpu", "current": {"averageUtilization": 42, "averageValue": "210m"}}}
MEMORY_NOW = {"type": "Resource", "resource": {
    "name": "memory", "current": {"averageValue": "90Mi"}}}
BEHAVIOR = {"scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Max",
                          "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}
CONDITIONS = [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale",
               "lastTransitionTime": "2026-01-01T00:00:00Z"}]


def full_v2():
    """A v2 object with every part v1 cannot say by itself."""
    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7",
                     "annotations": {"team": "a"}, "labels": {"app": "web"},
                     "managedFields": [{"manager": "kubectl", "operation": "Update",
                                        "apiVersion": "autoscaling/v2",
                                        "fieldsType": "FieldsV1",
                                        "fieldsV1": {"f:spec": {}}}]},
        "spec": {"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 5,
                 "metrics": [CPU, MEMORY, PODS], "behavior": BEHAVIOR},
        "status": {"observedGeneration": 2, "lastScaleTime": "2026-01-01T00:00:00Z",
                   "currentReplicas": 2, "desiredReplicas": 3,
                   "currentMetrics": [CPU_NOW, MEMORY_NOW], "conditions": CONDITIONS},
    }


class ToV1Tests(SynchronousTestCase):
    def test_cpu_target_and_current(self):
        """The cpu Utilization metric is targetCPUUtilizationPercentage, its current value currentCPUUtilizationPercentage."""
        v1 = to_v1(full_v2())
        self.assertEqual(v1["apiVersion"], "autoscaling/v1")
        self.assertEqual(v1["spec"], {"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 5,
                                      "targetCPUUtilizationPercentage": 50})
        self.assertEqual(v1["status"], {
            "observedGeneration": 2, "lastScaleTime": "2026-01-01T00:00:00Z",
            "currentReplicas": 2, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 42})

    def test_annotations(self):
        """Other metrics, behavior, conditions and every current metric ride in the four annotations as v2 JSON."""
        annotations = to_v1(full_v2())["metadata"]["annotations"]
        self.assertEqual(annotations["team"], "a")
        self.assertEqual(orjson.loads(annotations[METRICS_ANNOTATION]), [MEMORY, PODS])
        self.assertEqual(orjson.loads(annotations[BEHAVIOR_ANNOTATION]), BEHAVIOR)
        self.assertEqual(orjson.loads(annotations[CURRENT_METRICS_ANNOTATION]),
                         [CPU_NOW, MEMORY_NOW])
        self.assertEqual(orjson.loads(annotations[CONDITIONS_ANNOTATION]), CONDITIONS)

    def test_plain_cpu_has_no_annotations(self):
        """An HPA on cpu alone, with no status, converts with no annotations at all."""
        v2 = full_v2()
        v2["metadata"].pop("annotations")
        v2["spec"] = {"scaleTargetRef": REF, "maxReplicas": 3, "metrics": [CPU]}
        del v2["status"]
        v1 = to_v1(v2)
        self.assertNotIn("annotations", v1["metadata"])
        self.assertNotIn("status", v1)

    def test_cpu_average_value_is_another_metric(self):
        """A cpu metric with an AverageValue target is no percentage: it goes in the metrics annotation."""
        cpu_value = {"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "AverageValue", "averageValue": "500m"}}}
        v2 = full_v2()
        v2["spec"]["metrics"] = [cpu_value]
        v1 = to_v1(v2)
        self.assertNotIn("targetCPUUtilizationPercentage", v1["spec"])
        self.assertEqual(orjson.loads(v1["metadata"]["annotations"][METRICS_ANNOTATION]),
                         [cpu_value])

    def test_input_unchanged(self):
        """Conversion leaves the stored object (shared by watchers) as it was."""
        v2 = full_v2()
        before = copy.deepcopy(v2)
        to_v1(v2)
        self.assertEqual(v2, before)
        v1 = to_v1(v2)
        before = copy.deepcopy(v1)
        to_v2(v1)
        self.assertEqual(v1, before)


class ToV2Tests(SynchronousTestCase):
    def test_round_trip_v2(self):
        """v2 -> v1 -> v2 gives the same object back, every annotation taken off again."""
        v2 = full_v2()
        self.assertEqual(to_v2(to_v1(v2)), v2)

    def test_round_trip_v1(self):
        """v1 -> v2 -> v1 gives the same object back."""
        v1 = to_v1(full_v2())
        self.assertEqual(to_v1(to_v2(v1)), v1)

    def test_round_trip_each_annotation(self):
        """Each v2-only part alone survives the round trip through v1."""
        base = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "web"},
                "spec": {"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 5,
                         "metrics": [CPU]},
                "status": {"currentReplicas": 1, "desiredReplicas": 1}}
        variants = {
            METRICS_ANNOTATION: lambda o: o["spec"]["metrics"].append(PODS),
            BEHAVIOR_ANNOTATION: lambda o: o["spec"].update(behavior=BEHAVIOR),
            CURRENT_METRICS_ANNOTATION: lambda o: o["status"].update(
                currentMetrics=[MEMORY_NOW]),
            CONDITIONS_ANNOTATION: lambda o: o["status"].update(conditions=CONDITIONS),
        }
        for annotation, change in variants.items():
            v2 = copy.deepcopy(base)
            change(v2)
            v1 = to_v1(v2)
            self.assertEqual(list(v1["metadata"]["annotations"]), [annotation])
            self.assertEqual(to_v2(v1), v2, annotation)

    def test_kubectl_autoscale_object(self):
        """The object `kubectl autoscale --cpu-percent=50` sends is a v2 cpu Utilization metric."""
        v2 = to_v2({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                    "metadata": {"name": "web", "creationTimestamp": None},
                    "spec": {"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 3,
                             "targetCPUUtilizationPercentage": 50},
                    "status": {"currentReplicas": 0, "desiredReplicas": 0}})
        self.assertEqual(v2["apiVersion"], "autoscaling/v2")
        self.assertEqual(v2["spec"], {"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 3,
                                      "metrics": [CPU]})
        self.assertEqual(v2["status"], {"currentReplicas": 0, "desiredReplicas": 0})

    def test_current_cpu_without_annotation(self):
        """currentCPUUtilizationPercentage alone is the current cpu metric."""
        v2 = to_v2({"metadata": {"name": "web"}, "spec": {"maxReplicas": 3},
                    "status": {"currentReplicas": 1, "desiredReplicas": 1,
                               "currentCPUUtilizationPercentage": 70}})
        self.assertEqual(v2["status"]["currentMetrics"], [{"type": "Resource", "resource": {
            "name": "cpu", "current": {"averageUtilization": 70}}}])
        self.assertNotIn("metrics", v2["spec"])

    def test_annotations_emptied(self):
        """Annotations that held only round-trip annotations go away; an empty map sent stays."""
        v1 = to_v1(full_v2())
        del v1["metadata"]["annotations"]["team"]
        self.assertNotIn("annotations", to_v2(v1)["metadata"])
        self.assertEqual(to_v2({"metadata": {"annotations": {}}, "spec": {}})["metadata"],
                         {"annotations": {}})

    def test_bad_annotation_is_400(self):
        """A round-trip annotation that is not the JSON it carries is a 400 naming it."""
        for value in ("{not json", '{"an": "object"}', "3"):
            with self.assertRaises(StatusError) as caught:
                to_v2({"metadata": {"annotations": {METRICS_ANNOTATION: value}}, "spec": {}})
            self.assertEqual(caught.exception.code, 400)
            self.assertIn(METRICS_ANNOTATION, caught.exception.message)
        with self.assertRaises(StatusError) as caught:
            to_v2({"metadata": {"annotations": {BEHAVIOR_ANNOTATION: "[]"}}, "spec": {}})
        self.assertEqual(caught.exception.code, 400)
