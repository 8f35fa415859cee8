"""
A version served converted from another's storage (L{orchd.registry.converted}):
HorizontalPodAutoscaler autoscaling/v1 over the v2 objects, through every verb.
"""

import orjson
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.autoscalingv1 import (
    BEHAVIOR_ANNOTATION, CONDITIONS_ANNOTATION, CURRENT_METRICS_ANNOTATION, METRICS_ANNOTATION,
)
from orchd.api.kinds import KindInfo
from orchd.registry.converted import Conversion
from orchd.registry.definitions import KindDefinition
from orchd.registry.generic import ResourceStore
from tests.server.test_watch import Stream
from tests.support import APIHarness

V1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"
V2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
KEY = "/registry/autoscaling/horizontalpodautoscalers/default/web"
REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
CPU50 = {"type": "Resource", "resource": {
    "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}
MEMORY = {"type": "Resource", "resource": {
    "name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}}
TABLE = b"application/json;as=Table;v=v1;g=meta.k8s.io"
MERGE = b"application/merge-patch+json"
JSON_PATCH = b"application/json-patch+json"
STRATEGIC = b"application/strategic-merge-patch+json"
APPLY = b"application/apply-patch+yaml"


def v1_hpa(name="web", cpu=50, **spec):
    """The object `kubectl autoscale deployment web --min=1 --max=3 --cpu-percent=50` sends."""
    return {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "creationTimestamp": None},
            "spec": {"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 3,
                     "targetCPUUtilizationPercentage": cpu, **spec},
            "status": {"currentReplicas": 0, "desiredReplicas": 0}}


class ConvertedVersionTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def call(self, method, path, body=None, code=200, **kw):
        status, payload, _ = self.api.call(method, path, body, **kw)
        self.assertEqual(status, code, payload)
        return payload

    def stored(self):
        return orjson.loads(self.successResultOf(self.api.store.get(KEY)).value)

    def test_create_v1_read_v2(self):
        """A v1 create is stored as v2, its percentage a cpu Utilization metric, and reads back in each version."""
        created = self.call("POST", V1, v1_hpa(), code=201)
        self.assertEqual(created["apiVersion"], "autoscaling/v1")
        self.assertEqual(created["spec"]["targetCPUUtilizationPercentage"], 50)
        stored = self.stored()
        self.assertEqual(stored["apiVersion"], "autoscaling/v2")
        self.assertEqual(stored["spec"]["metrics"], [CPU50])
        self.assertNotIn("targetCPUUtilizationPercentage", stored["spec"])
        v2 = self.call("GET", V2 + "/web")
        self.assertEqual((v2["apiVersion"], v2["spec"]["metrics"]), ("autoscaling/v2", [CPU50]))
        v1 = self.call("GET", V1 + "/web")
        self.assertEqual(v1, created)
        listed = self.call("GET", V1)
        self.assertEqual((listed["apiVersion"], listed["kind"]),
                         ("autoscaling/v1", "HorizontalPodAutoscalerList"))
        self.assertEqual(listed["items"], [created])

    def test_v1_defaults_are_v2_defaults(self):
        """A v1 HPA without a percentage gets v2's default metric, 80% of cpu."""
        body = v1_hpa()
        del body["spec"]["targetCPUUtilizationPercentage"], body["spec"]["minReplicas"]
        created = self.call("POST", V1, body, code=201)
        self.assertEqual((created["spec"]["minReplicas"],
                          created["spec"]["targetCPUUtilizationPercentage"]), (1, 80))

    def test_v1_validation(self):
        """A v1 spec the controller cannot act on is the v2 strategy's 422."""
        body = self.call("POST", V1, v1_hpa(maxReplicas=0), code=422)
        self.assertEqual([c["field"] for c in body["details"]["causes"]], ["spec.maxReplicas"])

    def test_create_v2_update_v1_keeps_v2_content(self):
        """A v1 read-modify-write of a v2 HPA keeps other metrics, behavior and conditions."""
        self.call("POST", V2, {"metadata": {"name": "web"}, "spec": {
            "scaleTargetRef": REF, "maxReplicas": 3, "metrics": [CPU50, MEMORY],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}}, code=201)
        status = {"currentReplicas": 2, "desiredReplicas": 2, "currentMetrics": [
            {"type": "Resource", "resource": {"name": "cpu",
                                              "current": {"averageUtilization": 40}}}],
            "conditions": [{"type": "AbleToScale", "status": "True"}]}
        current = self.call("GET", V2 + "/web")
        current["status"] = status
        self.call("PUT", V2 + "/web/status", current)
        v1 = self.call("GET", V1 + "/web")
        annotations = v1["metadata"]["annotations"]
        self.assertEqual(sorted(annotations), sorted([
            METRICS_ANNOTATION, BEHAVIOR_ANNOTATION, CURRENT_METRICS_ANNOTATION,
            CONDITIONS_ANNOTATION]))
        self.assertEqual(v1["status"]["currentCPUUtilizationPercentage"], 40)
        v1["spec"]["maxReplicas"] = 5
        updated = self.call("PUT", V1 + "/web", v1)
        self.assertEqual(updated["metadata"]["annotations"], annotations)
        v2 = self.call("GET", V2 + "/web")
        self.assertEqual(v2["spec"]["maxReplicas"], 5)
        self.assertEqual(v2["spec"]["metrics"], [CPU50, MEMORY])
        self.assertEqual(v2["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"], 60)
        self.assertEqual(v2["status"], status)
        self.assertNotIn("annotations", v2["metadata"])
        self.assertEqual(v2["metadata"]["generation"], 2)

    def test_annotation_change_bumps_generation(self):
        """A spec change only the metrics annotation says is a new generation, as in v2."""
        self.call("POST", V1, v1_hpa(), code=201)
        patch = {"metadata": {"annotations": {METRICS_ANNOTATION: orjson.dumps([MEMORY]).decode()}}}
        patched = self.call("PATCH", V1 + "/web", patch, content_type=MERGE)
        self.assertEqual(patched["metadata"]["generation"], 2)
        self.assertEqual(self.stored()["spec"]["metrics"], [CPU50, MEMORY])
        self.assertNotIn("annotations", self.stored()["metadata"])

    def test_v2_drops_round_trip_annotations(self):
        """A v2 write's round-trip annotations are dropped, as upstream's v2 does; others stay."""
        created = self.call("POST", V2, {"metadata": {"name": "web", "annotations": {
            METRICS_ANNOTATION: "[]", CONDITIONS_ANNOTATION: "junk", "team": "a"}},
            "spec": {"scaleTargetRef": REF, "maxReplicas": 3}}, code=201)
        self.assertEqual(created["metadata"]["annotations"], {"team": "a"})
        patched = self.call("PATCH", V2 + "/web", {"metadata": {"annotations": {
            BEHAVIOR_ANNOTATION: "{}", "team": None}}}, content_type=MERGE)
        self.assertNotIn("annotations", patched["metadata"])
        self.assertNotIn("annotations", self.stored()["metadata"])

    def test_bad_annotation_400(self):
        """A round-trip annotation that is not JSON is a 400, not a 500."""
        body = v1_hpa()
        body["metadata"]["annotations"] = {METRICS_ANNOTATION: "{not json"}
        status = self.call("POST", V1, body, code=400)
        self.assertIn(METRICS_ANNOTATION, status["message"])

    def test_patch_types(self):
        """Merge, JSON, strategic merge patches and apply on v1 each change the stored v2 object."""
        self.call("POST", V1 + "?fieldManager=kubectl-autoscale", v1_hpa(), code=201)
        self.call("PATCH", V1 + "/web", {"spec": {"maxReplicas": 4}}, content_type=MERGE)
        self.assertEqual(self.stored()["spec"]["maxReplicas"], 4)
        self.call("PATCH", V1 + "/web", [{"op": "replace", "path": "/spec/minReplicas",
                                          "value": 2}], content_type=JSON_PATCH)
        self.assertEqual(self.stored()["spec"]["minReplicas"], 2)
        patched = self.call("PATCH", V1 + "/web", {"spec": {"targetCPUUtilizationPercentage": 70}},
                            content_type=STRATEGIC)
        self.assertEqual(patched["spec"]["targetCPUUtilizationPercentage"], 70)
        self.assertEqual(self.stored()["spec"]["metrics"][0]["resource"]["target"],
                         {"type": "Utilization", "averageUtilization": 70})
        applied = self.call("PATCH", V1 + "/web?fieldManager=ops&force=true", orjson.dumps({
            "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": REF, "maxReplicas": 6}}), content_type=APPLY)
        self.assertEqual(applied["spec"]["maxReplicas"], 6)
        managers = {(m["manager"], m["operation"]): m
                    for m in applied["metadata"]["managedFields"]}
        self.assertEqual(managers[("ops", "Apply")]["apiVersion"], "autoscaling/v1")
        self.assertIn("f:maxReplicas", managers[("ops", "Apply")]["fieldsV1"]["f:spec"])
        self.assertEqual(managers[("kubectl-autoscale", "Update")]["apiVersion"],
                         "autoscaling/v1")
        self.assertEqual(self.stored()["spec"]["maxReplicas"], 6)
        self.assertEqual(self.stored()["metadata"]["managedFields"],
                         applied["metadata"]["managedFields"])

    def test_apply_creates_in_v1(self):
        """Server-side apply of a missing v1 HPA creates it, managed in v1."""
        created = self.call("PATCH", V1 + "/web?fieldManager=ops", orjson.dumps(v1_hpa()),
                            content_type=APPLY, code=201)
        self.assertEqual(created["apiVersion"], "autoscaling/v1")
        self.assertEqual([(m["manager"], m["apiVersion"])
                          for m in created["metadata"]["managedFields"]],
                         [("ops", "autoscaling/v1")])
        self.assertEqual(self.stored()["spec"]["metrics"], [CPU50])

    def test_status_in_v1(self):
        """A v1 status write's current percentage is the stored current cpu metric."""
        self.call("POST", V1, v1_hpa(), code=201)
        hpa = self.call("GET", V1 + "/web")
        hpa["status"] = {"currentReplicas": 2, "desiredReplicas": 3,
                         "currentCPUUtilizationPercentage": 65}
        hpa["spec"]["maxReplicas"] = 9
        written = self.call("PUT", V1 + "/web/status", hpa)
        self.assertEqual(written["status"]["currentCPUUtilizationPercentage"], 65)
        stored = self.stored()
        self.assertEqual(stored["spec"]["maxReplicas"], 3)
        self.assertEqual(stored["status"]["currentMetrics"], [{"type": "Resource", "resource": {
            "name": "cpu", "current": {"averageUtilization": 65}}}])
        self.assertEqual(stored["status"]["desiredReplicas"], 3)

    def test_watch_v1(self):
        """A v1 watch gets v1 objects, a v2 watch of the same changes v2 objects."""
        self.call("POST", V2, {"metadata": {"name": "old"}, "spec": {
            "scaleTargetRef": REF, "maxReplicas": 3, "metrics": [CPU50, MEMORY]}}, code=201)
        v1 = Stream(self.api, V1 + "?watch=true")
        v2 = Stream(self.api, V2 + "?watch=true")
        self.call("POST", V1, v1_hpa(), code=201)
        self.call("DELETE", V1 + "/web")
        for stream, version in ((v1, "autoscaling/v1"), (v2, "autoscaling/v2")):
            events = stream.events()
            self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in events],
                             [("ADDED", "old"), ("ADDED", "web"), ("DELETED", "web")])
            self.assertEqual({e["object"]["apiVersion"] for e in events}, {version})
        old = v1.events()[0]["object"]
        self.assertEqual(old["spec"]["targetCPUUtilizationPercentage"], 50)
        self.assertEqual(orjson.loads(old["metadata"]["annotations"][METRICS_ANNOTATION]),
                         [MEMORY])
        self.assertEqual(v2.events()[0]["object"]["spec"]["metrics"], [CPU50, MEMORY])

    def test_table(self):
        """The v1 Table, listed or watched, has v2's columns and shows the targets as v2's does."""
        self.call("POST", V1, v1_hpa(), code=201)
        table = self.call("GET", V1, headers={b"accept": TABLE})
        self.assertEqual([c["name"] for c in table["columnDefinitions"]],
                         ["Name", "Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"])
        self.assertEqual(table["rows"][0]["cells"][:6],
                         ["web", "Deployment/web", "cpu: <unknown>/50%", "1", 3, 0])
        self.assertEqual(table, dict(self.call("GET", V2, headers={b"accept": TABLE})))
        watched = Stream(self.api, V1 + "?watch=true", headers={b"accept": [TABLE]}).events()
        self.assertEqual(watched[0]["object"]["rows"][0]["cells"][2], "cpu: <unknown>/50%")

    def test_delete_v1(self):
        """A v1 delete removes the stored object and answers it in v1."""
        self.call("POST", V1, v1_hpa(), code=201)
        self.call("DELETE", V1 + "/web")
        self.assertIsNone(self.successResultOf(self.api.store.get(KEY)))
        self.call("GET", V2 + "/web", code=404)

    def test_discovery_and_openapi(self):
        """autoscaling serves v2 (preferred) and v1, each with its OpenAPI document."""
        group = self.call("GET", "/apis/autoscaling")
        self.assertEqual([v["version"] for v in group["versions"]], ["v2", "v1"])
        self.assertEqual(group["preferredVersion"]["version"], "v2")
        resources = self.call("GET", "/apis/autoscaling/v1")["resources"]
        hpa = [r for r in resources if r["name"] == "horizontalpodautoscalers"][0]
        self.assertEqual((hpa["kind"], hpa["shortNames"]), ("HorizontalPodAutoscaler", ["hpa"]))
        self.assertIn("horizontalpodautoscalers/status", [r["name"] for r in resources])
        document = self.call("GET", "/openapi/v3/apis/autoscaling/v1")
        self.assertIn("/apis/autoscaling/v1/namespaces/{namespace}/horizontalpodautoscalers",
                       document["paths"])


class DefinitionTests(SynchronousTestCase):
    def test_converted_definition(self):
        """A definition with a conversion gets the converting store and the storage version."""
        conversion = Conversion("v2", dict, dict)
        info = KindInfo("autoscaling", "v1", "things", "Thing", True, storage_version="v2")
        self.assertEqual(KindDefinition(info, conversion=conversion).store, conversion.store)

    def test_inconsistent_definitions_refused(self):
        """A conversion with a store of its own, or to another version than stored, is refused."""
        conversion = Conversion("v2", dict, dict)
        info = KindInfo("autoscaling", "v1", "things", "Thing", True, storage_version="v2")
        self.assertRaises(ValueError, KindDefinition, info, store=ResourceStore,
                          conversion=conversion)
        other = KindInfo("autoscaling", "v1", "things", "Thing", True, storage_version="v3")
        self.assertRaises(ValueError, KindDefinition, other, conversion=conversion)
