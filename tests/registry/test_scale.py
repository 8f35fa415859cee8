"""The scale subresources: an autoscaling/v1 Scale view of a workload's replicas."""

import orjson
from twisted.trial.unittest import SynchronousTestCase

from orchd.api import openapi
from orchd.registry.kinds.builtin import KINDS
from tests.support import APIHarness

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
SCALE = DEPLOYMENTS + "/web/scale"
JSON_PATCH = b"application/json-patch+json"
MERGE_PATCH = b"application/merge-patch+json"
STRATEGIC = b"application/strategic-merge-patch+json"
APPLY = b"application/apply-patch+yaml"


def workload(name="web", **spec):
    spec.setdefault("selector", {"matchLabels": {"app": "web", "tier": "front"}})
    spec.setdefault("template", {"metadata": {"labels": {"app": "web", "tier": "front"}},
                                 "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    return {"metadata": {"name": name}, "spec": spec}


class ScaleTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        code, self.deployment, _ = self.api.call(
            "POST", DEPLOYMENTS + "?fieldManager=kubectl-create", workload(replicas=2))
        self.assertEqual(code, 201)

    def parent(self):
        return self.api.call("GET", DEPLOYMENTS + "/web")[1]

    def test_get(self):
        """A Scale shows its parent's identity, desired and observed replicas, and selector."""
        self.api.call("PATCH", DEPLOYMENTS + "/web/status", {"status": {"replicas": 1}},
                      content_type=MERGE_PATCH)
        code, scale, _ = self.api.call("GET", SCALE)
        meta = self.parent()["metadata"]
        self.assertEqual((code, scale), (200, {
            "kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": "web", "namespace": "default", "uid": meta["uid"],
                         "resourceVersion": meta["resourceVersion"],
                         "creationTimestamp": meta["creationTimestamp"]},
            "spec": {"replicas": 2}, "status": {"replicas": 1, "selector": "app=web,tier=front"}}))

    def test_zero_replicas(self):
        """Zero desired replicas are left out of the spec, as upstream writes them."""
        code, scale, _ = self.api.call("PATCH", SCALE, {"spec": {"replicas": 0}},
                                       content_type=MERGE_PATCH)
        self.assertEqual((code, scale["spec"]), (200, {}))
        self.assertEqual(self.parent()["spec"]["replicas"], 0)

    def test_every_patch_type(self):
        """JSON, merge and strategic merge patches of the Scale set the parent's replicas."""
        for replicas, media, body in (
                (3, MERGE_PATCH, {"spec": {"replicas": 3}}),
                (4, STRATEGIC, {"spec": {"replicas": 4}}),
                (5, JSON_PATCH, [{"op": "replace", "path": "/spec/replicas", "value": 5}])):
            code, scale, _ = self.api.call("PATCH", SCALE, body, content_type=media)
            self.assertEqual((code, scale["spec"]["replicas"]), (200, replicas), media)
            self.assertEqual(self.parent()["spec"]["replicas"], replicas)

    def test_only_replicas_change(self):
        """A Scale write changes spec.replicas and nothing else; the generation moves on."""
        before = self.parent()
        code, _, _ = self.api.call("PUT", SCALE, {
            "apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web",
                                                                      "labels": {"x": "y"}},
            "spec": {"replicas": 6}, "status": {"replicas": 9, "selector": "a=b"}})
        self.assertEqual(code, 200)
        after = self.parent()
        self.assertEqual(after["spec"]["replicas"], 6)
        self.assertEqual(after["metadata"]["generation"], before["metadata"]["generation"] + 1)
        self.assertNotIn("labels", after["metadata"])
        self.assertEqual(after["status"], before["status"])
        self.assertEqual({k: v for k, v in after["spec"].items() if k != "replicas"},
                         {k: v for k, v in before["spec"].items() if k != "replicas"})

    def test_resource_version_precondition(self):
        """A Scale's resourceVersion must be the parent's: 409 once it moved on."""
        _, scale, _ = self.api.call("GET", SCALE)
        scale["spec"]["replicas"] = 4
        self.assertEqual(self.api.call("PUT", SCALE, scale)[0], 200)
        scale["spec"]["replicas"] = 5
        code, status, _ = self.api.call("PUT", SCALE, scale)
        self.assertEqual(code, 409)
        self.assertEqual(status["message"], 'Operation cannot be fulfilled on deployments.apps '
                         '"web": the object has been modified; please apply your changes to the '
                         'latest version and try again')
        self.assertEqual(self.parent()["spec"]["replicas"], 4)
        code, _, _ = self.api.call("PATCH", SCALE, {"metadata": {"resourceVersion": "1"},
                                                    "spec": {"replicas": 1}},
                                   content_type=MERGE_PATCH)
        self.assertEqual(code, 409)

    def test_negative_replicas(self):
        """Negative replicas are refused for the Scale, as upstream refuses them."""
        code, status, _ = self.api.call("PATCH", SCALE, {"spec": {"replicas": -1}},
                                        content_type=MERGE_PATCH)
        self.assertEqual((code, status["message"]), (422, 'Scale.autoscaling "web" is invalid: '
                                                          "spec.replicas: Invalid value: -1: "
                                                          "must be greater than or equal to 0"))
        self.assertEqual(status["details"]["group"], "autoscaling")

    def test_body_names_the_object(self):
        """A Scale that names another object, or is of another kind, is a 400."""
        code, status, _ = self.api.call("PUT", SCALE, {"metadata": {"name": "other"},
                                                       "spec": {"replicas": 1}})
        self.assertEqual((code, status["message"]), (400, "the name of the object (other) does "
                                                          "not match the name on the URL (web)"))
        code, _, _ = self.api.call("PUT", SCALE, {"kind": "Deployment", "metadata": {
            "name": "web"}, "spec": {"replicas": 1}})
        self.assertEqual(code, 400)

    def test_missing_parent(self):
        """The Scale of a workload that does not exist is 404, named as the parent."""
        code, status, _ = self.api.call("GET", DEPLOYMENTS + "/nope/scale")
        self.assertEqual((code, status["message"]), (404, 'deployments.apps "nope" not found'))
        code, _, _ = self.api.call("PATCH", DEPLOYMENTS + "/nope/scale", {"spec": {"replicas": 1}},
                                   content_type=MERGE_PATCH)
        self.assertEqual(code, 404)

    def test_dry_run(self):
        """A dry-run Scale write answers the new Scale and stores nothing."""
        code, scale, _ = self.api.call("PATCH", SCALE + "?dryRun=All", {"spec": {"replicas": 9}},
                                       content_type=MERGE_PATCH)
        self.assertEqual((code, scale["spec"]["replicas"]), (200, 9))
        self.assertEqual(self.parent()["spec"]["replicas"], 2)

    def test_apply(self):
        """A forced server-side apply of a Scale owns spec.replicas under the scale subresource."""
        body = orjson.dumps({"apiVersion": "autoscaling/v1", "kind": "Scale",
                             "metadata": {"name": "web"}, "spec": {"replicas": 7}})
        code, scale, _ = self.api.call("PATCH", SCALE + "?fieldManager=autoscaler&force=true", body,
                                       content_type=APPLY)
        self.assertEqual((code, scale["spec"]["replicas"]), (200, 7), scale)
        entries = {e["manager"]: e for e in self.parent()["metadata"]["managedFields"]}
        self.assertEqual(entries["autoscaler"]["subresource"], "scale")
        self.assertEqual(entries["autoscaler"]["operation"], "Apply")
        self.assertEqual(entries["autoscaler"]["fieldsV1"], {"f:spec": {"f:replicas": {}}})

    def test_apply_conflicts_with_the_owner(self):
        """Applying replicas another manager set is a conflict unless forced."""
        self.api.call("PATCH", SCALE + "?fieldManager=kubectl", {"spec": {"replicas": 3}},
                      content_type=MERGE_PATCH)
        body = orjson.dumps({"apiVersion": "autoscaling/v1", "kind": "Scale",
                             "metadata": {"name": "web"}, "spec": {"replicas": 8}})
        code, status, _ = self.api.call("PATCH", SCALE + "?fieldManager=hpa", body,
                                        content_type=APPLY)
        self.assertEqual(code, 409, status)
        self.assertIn('conflict with "kubectl" with subresource "scale"', status["message"])
        code, scale, _ = self.api.call("PATCH", SCALE + "?fieldManager=hpa&force=true", body,
                                       content_type=APPLY)
        self.assertEqual((code, scale["spec"]["replicas"]), (200, 8))

    def test_update_records_the_manager(self):
        """A Scale patch is recorded as an update through the scale subresource."""
        self.api.call("PATCH", SCALE + "?fieldManager=kubectl", {"spec": {"replicas": 3}},
                      content_type=MERGE_PATCH)
        entries = [e for e in self.parent()["metadata"]["managedFields"]
                   if e["manager"] == "kubectl"]
        self.assertEqual([(e["operation"], e.get("subresource")) for e in entries],
                         [("Update", "scale")])


class OtherKindsTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def test_replica_sets_and_stateful_sets(self):
        """ReplicaSets and StatefulSets scale the same way."""
        for resource in ("replicasets", "statefulsets"):
            base = f"/apis/apps/v1/namespaces/default/{resource}"
            self.assertEqual(self.api.call("POST", base, workload())[0], 201)
            code, scale, _ = self.api.call("PUT", base + "/web/scale",
                                           {"metadata": {"name": "web"}, "spec": {"replicas": 3}})
            self.assertEqual((code, scale["spec"]["replicas"]), (200, 3), resource)
            self.assertEqual(scale["status"], {"replicas": 0, "selector": "app=web,tier=front"})

    def test_replication_controller_selector(self):
        """A ReplicationController's selector map is given as selector text."""
        rcs = "/api/v1/namespaces/default/replicationcontrollers"
        self.api.call("POST", rcs, {"metadata": {"name": "rc"}, "spec": {"selector": {
            "b": "2", "a": "1"}, "template": {"metadata": {"labels": {"a": "1", "b": "2"}},
                                              "spec": {"containers": [{"name": "c",
                                                                       "image": "i"}]}}}})
        code, scale, _ = self.api.call("GET", rcs + "/rc/scale")
        self.assertEqual((code, scale["status"]), (200, {"replicas": 0, "selector": "a=1,b=2"}))

    def test_no_scale_for_other_kinds(self):
        """DaemonSets have no scale subresource."""
        base = "/apis/apps/v1/namespaces/default/daemonsets"
        self.api.call("POST", base, workload())
        self.assertEqual(self.api.call("GET", base + "/web/scale")[0], 404)

    def test_discovery(self):
        """Discovery lists each scale subresource as an autoscaling/v1 Scale, as kubectl needs."""
        _, apps, _ = self.api.call("GET", "/apis/apps/v1")
        entries = {r["name"]: r for r in apps["resources"]}
        for name in ("deployments/scale", "replicasets/scale", "statefulsets/scale"):
            self.assertEqual(entries[name], {
                "name": name, "singularName": "", "namespaced": True, "group": "autoscaling",
                "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]})
        _, core, _ = self.api.call("GET", "/api/v1")
        self.assertIn("replicationcontrollers/scale", [r["name"] for r in core["resources"]])

    def test_openapi_describes_the_scale(self):
        """The OpenAPI operations of a scale subresource take and answer a Scale."""
        document = openapi.openapi_v3_group_version(KINDS, "apps", "v1")
        item = document["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]
        self.assertEqual(item["get"]["x-kubernetes-group-version-kind"],
                         {"group": "autoscaling", "version": "v1", "kind": "Scale"})
        self.assertEqual(item["patch"]["operationId"], "patchAppsV1NamespacedDeploymentScale")
        schema = item["put"]["responses"]["200"]["content"]["application/json"]["schema"]
        self.assertEqual(schema, {"$ref": "#/components/schemas/io.orch.api.autoscaling.v1.Scale"})
        self.assertIn("io.orch.api.autoscaling.v1.Scale", document["components"]["schemas"])

    def test_table(self):
        """kubectl get --subresource=scale gets a Scale table: name, desired, available."""
        self.api.call("POST", DEPLOYMENTS, workload(replicas=2))
        code, table, _ = self.api.call("GET", SCALE, headers={
            b"accept": [b"application/json;as=Table;v=v1;g=meta.k8s.io"]})
        self.assertEqual(code, 200)
        self.assertEqual([c["name"] for c in table["columnDefinitions"]],
                         ["Name", "Desired", "Available"])
        self.assertEqual(table["rows"][0]["cells"], ["web", 2, 0])
