"""
Custom resources served from their definitions: every verb, the schema's
validation, pruning and defaults, the status and scale subresources,
printer columns, several versions, patches and the garbage collector.
"""

import copy

import orjson
from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.garbagecollector import GarbageCollector
from tests.crdfixtures import CRDS, WIDGETS, WIDGET_SCHEMA, widget, widget_crd
from tests.server.test_watch import Stream
from tests.support import APIHarness

TABLE = b"application/json;as=Table;v=v1;g=meta.k8s.io"
MERGE = b"application/merge-patch+json"
JSON_PATCH = b"application/json-patch+json"
STRATEGIC = b"application/strategic-merge-patch+json"
APPLY = b"application/apply-patch+yaml"
AGGREGATED = (b"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
              b"application/json")


class CustomResourceTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.define(widget_crd())

    def define(self, crd):
        code, body, _ = self.api.call("POST", CRDS, crd)
        self.assertEqual(code, 201, body)
        return body

    def create(self, obj, path=WIDGETS, code=201, query=""):
        status, body, headers = self.api.call("POST", path + query, obj)
        self.assertEqual(status, code, body)
        return body, headers

    def get(self, name, path=WIDGETS):
        code, body, _ = self.api.call("GET", f"{path}/{name}")
        self.assertEqual(code, 200, body)
        return body

    # -- schema -------------------------------------------------------------------------

    def test_schema_validation_422(self):
        """A value against the schema is 422 with upstream's field path."""
        body, _ = self.create(widget("w", replicas="many"), code=422)
        self.assertEqual([c["field"] for c in body["details"]["causes"]], ["spec.replicas"])
        body, _ = self.create(widget("w", color="green"), code=422)
        self.assertEqual(body["details"]["causes"][0]["message"],
                         'Unsupported value: "green": supported values: "blue", "red"')

    def test_unknown_fields_pruned_with_warning(self):
        """Unknown fields are dropped with a Warning by default."""
        body, headers = self.create(widget("w", replicas=1, foo=2))
        self.assertNotIn("foo", body["spec"])
        self.assertEqual(headers.getRawHeaders(b"warning"), [b'299 - "unknown field \\"spec.foo\\""'])
        self.assertNotIn("foo", self.get("w")["spec"])

    def test_strict_field_validation(self):
        """fieldValidation=Strict refuses an unknown field with a 400 naming it."""
        body, _ = self.create(widget("w", foo=2), code=400, query="?fieldValidation=Strict")
        self.assertIn('strict decoding error: unknown field "spec.foo"', body["message"])

    def test_defaults_on_write(self):
        """The schema's defaults are filled on create."""
        body, _ = self.create(widget("w", replicas=1))
        self.assertEqual(body["spec"]["color"], "blue")

    def test_defaults_on_read(self):
        """An object stored without a default gets it when read."""
        stored = widget("w", replicas=1)
        stored["metadata"].update(namespace="default", uid="u1",
                                  creationTimestamp="2023-01-01T00:00:00Z")
        self.successResultOf(self.api.store.create("/registry/example.com/widgets/default/w",
                                                   orjson.dumps(stored)))
        self.assertEqual(self.get("w")["spec"]["color"], "blue")

    # -- verbs --------------------------------------------------------------------------

    def test_list_selectors_and_chunking(self):
        """Label and field selectors (metadata and selectableFields) and chunked lists work."""
        for name, color in (("a", "blue"), ("b", "red"), ("c", "red")):
            obj = widget(name, color=color)
            obj["metadata"]["labels"] = {"color": color}
            self.create(obj)
        names = lambda listed: [i["metadata"]["name"] for i in listed["items"]]  # noqa: E731
        _, listed, _ = self.api.call("GET", WIDGETS + "?fieldSelector=spec.color%3Dred")
        self.assertEqual(names(listed), ["b", "c"])
        _, listed, _ = self.api.call("GET", WIDGETS + "?fieldSelector=metadata.name%3Da")
        self.assertEqual(names(listed), ["a"])
        _, listed, _ = self.api.call("GET", WIDGETS + "?labelSelector=color%3Dblue")
        self.assertEqual(names(listed), ["a"])
        _, page, _ = self.api.call("GET", WIDGETS + "?limit=2")
        self.assertEqual((names(page), page["metadata"]["remainingItemCount"]), (["a", "b"], 1))
        _, rest, _ = self.api.call("GET", WIDGETS + "?limit=2&continue="
                                   + page["metadata"]["continue"])
        self.assertEqual(names(rest), ["c"])
        code, _, _ = self.api.call("GET", WIDGETS + "?fieldSelector=spec.replicas%3D1")
        self.assertEqual(code, 400)

    def test_across_namespaces_and_deletecollection(self):
        """A list across namespaces, and deletecollection, cover every widget."""
        self.create(widget("a"))
        self.create(widget("b"))
        _, listed, _ = self.api.call("GET", "/apis/example.com/v1/widgets")
        self.assertEqual(len(listed["items"]), 2)
        code, _, _ = self.api.call("DELETE", WIDGETS)
        self.assertEqual(code, 200)
        _, listed, _ = self.api.call("GET", WIDGETS)
        self.assertEqual(listed["items"], [])

    def test_update_and_delete(self):
        """PUT replaces a widget and DELETE removes it."""
        obj, _ = self.create(widget("w", replicas=1))
        obj["spec"]["replicas"] = 2
        code, body, _ = self.api.call("PUT", f"{WIDGETS}/w", obj)
        self.assertEqual((code, body["spec"]["replicas"]), (200, 2))
        code, _, _ = self.api.call("DELETE", f"{WIDGETS}/w")
        self.assertEqual(code, 200)
        self.assertEqual(self.api.call("GET", f"{WIDGETS}/w")[0], 404)

    def test_yaml_output(self):
        """A widget is answered in YAML when asked."""
        self.create(widget("w", replicas=1))
        code, body, _ = self.api.call("GET", f"{WIDGETS}/w",
                                      headers={b"accept": b"application/yaml"})
        self.assertEqual(code, 200)
        self.assertIn(b"kind: Widget", body)

    # -- status and generation ------------------------------------------------------------

    def test_status_subresource(self):
        """The main endpoint ignores status; /status ignores everything else."""
        obj = widget("w", replicas=1)
        obj["status"] = {"phase": "Made"}
        created, _ = self.create(obj)
        self.assertNotIn("status", created)
        self.assertEqual(created["metadata"]["generation"], 1)
        code, body, _ = self.api.call("PATCH", f"{WIDGETS}/w/status",
                                      {"status": {"phase": "Ready"}, "spec": {"replicas": 5}},
                                      content_type=MERGE)
        self.assertEqual((code, body["status"], body["spec"]["replicas"]),
                         (200, {"phase": "Ready"}, 1))
        self.assertEqual(body["metadata"]["generation"], 1)
        code, body, _ = self.api.call("PATCH", f"{WIDGETS}/w",
                                      {"status": {"phase": "Gone"}, "spec": {"replicas": 3}},
                                      content_type=MERGE)
        self.assertEqual((body["status"]["phase"], body["spec"]["replicas"]), ("Ready", 3))
        self.assertEqual(body["metadata"]["generation"], 2)
        code, body, _ = self.api.call("PATCH", f"{WIDGETS}/w",
                                      {"metadata": {"labels": {"a": "b"}}}, content_type=MERGE)
        self.assertEqual(body["metadata"]["generation"], 2)

    def test_generation_without_status_subresource(self):
        """Without a status subresource a status change counts for generation too, as upstream."""
        self.define(widget_crd(names={"plural": "gizmos", "kind": "Gizmo"}, subresources={}))
        path = "/apis/example.com/v1/namespaces/default/gizmos"
        obj = {"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "g"},
               "status": {"phase": "New"}}
        created, _ = self.create(obj, path=path)
        self.assertEqual(created["status"], {"phase": "New"})
        _, body, _ = self.api.call("PATCH", f"{path}/g", {"status": {"phase": "Old"}},
                                   content_type=MERGE)
        self.assertEqual((body["status"]["phase"], body["metadata"]["generation"]), ("Old", 2))
        _, body, _ = self.api.call("PATCH", f"{path}/g", {"metadata": {"labels": {"a": "b"}}},
                                   content_type=MERGE)
        self.assertEqual(body["metadata"]["generation"], 2)
        self.assertEqual(self.api.call("GET", f"{path}/g/status")[0], 404)

    def test_status_schema_validated(self):
        """A status write against the schema is 422."""
        self.create(widget("w"))
        code, body, _ = self.api.call("PATCH", f"{WIDGETS}/w/status",
                                      {"status": {"replicas": "x"}}, content_type=MERGE)
        self.assertEqual(code, 422, body)

    # -- scale --------------------------------------------------------------------------

    def test_scale(self):
        """The scale subresource reads and writes the definition's replica paths."""
        obj = widget("w", replicas=2, selector="app=w")
        self.create(obj)
        self.api.call("PATCH", f"{WIDGETS}/w/status", {"status": {"replicas": 1}},
                      content_type=MERGE)
        code, scale, _ = self.api.call("GET", f"{WIDGETS}/w/scale")
        self.assertEqual((code, scale["kind"], scale["spec"], scale["status"]),
                         (200, "Scale", {"replicas": 2}, {"replicas": 1, "selector": "app=w"}))
        scale["spec"]["replicas"] = 4
        code, body, _ = self.api.call("PUT", f"{WIDGETS}/w/scale", scale)
        self.assertEqual((code, body["spec"]["replicas"]), (200, 4))
        self.assertEqual(self.get("w")["spec"]["replicas"], 4)
        code, body, _ = self.api.call("PATCH", f"{WIDGETS}/w/scale", {"spec": {"replicas": 6}},
                                      content_type=MERGE)
        self.assertEqual((code, self.get("w")["spec"]["replicas"]), (200, 6))
        code, body, _ = self.api.call("PATCH", f"{WIDGETS}/w/scale", {"spec": {"replicas": -1}},
                                      content_type=MERGE)
        self.assertEqual(code, 422, body)

    def test_scale_without_selector_path(self):
        """Without a labelSelectorPath the Scale has no selector, even with a spec.selector."""
        crd = widget_crd(names={"plural": "gizmos", "kind": "Gizmo"}, subresources={
            "scale": {"specReplicasPath": ".spec.replicas",
                      "statusReplicasPath": ".status.replicas"}})
        self.define(crd)
        path = "/apis/example.com/v1/namespaces/default/gizmos"
        self.create({"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "g"},
                     "spec": {"replicas": 1, "selector": "app=g"}}, path=path)
        code, scale, _ = self.api.call("GET", f"{path}/g/scale")
        self.assertEqual((code, scale["status"]), (200, {"replicas": 0}))

    # -- tables -------------------------------------------------------------------------

    def test_printer_columns(self):
        """Tables have Name and the printer columns, wide ones with their priority."""
        self.create(widget("w", replicas=3))
        _, table, _ = self.api.call("GET", WIDGETS, headers={b"accept": TABLE})
        self.assertEqual([(c["name"], c["priority"]) for c in table["columnDefinitions"]],
                         [("Name", 0), ("Replicas", 0), ("Color", 1)])
        self.assertEqual(table["rows"][0]["cells"], ["w", 3, "blue"])

    def test_default_columns(self):
        """A version without printer columns prints Name and Age."""
        crd = widget_crd(names={"plural": "gizmos", "kind": "Gizmo"},
                         additionalPrinterColumns=[])
        self.define(crd)
        path = "/apis/example.com/v1/namespaces/default/gizmos"
        self.create({"apiVersion": "example.com/v1", "kind": "Gizmo",
                     "metadata": {"name": "g"}}, path=path)
        _, table, _ = self.api.call("GET", path, headers={b"accept": TABLE})
        self.assertEqual([c["name"] for c in table["columnDefinitions"]], ["Name", "Age"])
        self.assertEqual(table["rows"][0]["cells"], ["g", "0s"])

    # -- patches ------------------------------------------------------------------------

    def test_strategic_merge_patch_415(self):
        """A strategic merge patch is 415 with the media types custom resources take."""
        self.create(widget("w"))
        code, body, _ = self.api.call("PATCH", f"{WIDGETS}/w", {"spec": {"replicas": 1}},
                                      content_type=STRATEGIC)
        self.assertEqual(code, 415)
        self.assertEqual(body["message"],
                         "the body of the request was in an unknown format - accepted media "
                         "types include: application/json-patch+json, "
                         "application/merge-patch+json, application/apply-patch+yaml")

    def test_json_patch(self):
        """A JSON patch applies, and is validated by the schema."""
        self.create(widget("w", replicas=1))
        code, body, _ = self.api.call(
            "PATCH", f"{WIDGETS}/w", [{"op": "replace", "path": "/spec/replicas", "value": 9}],
            content_type=JSON_PATCH)
        self.assertEqual((code, body["spec"]["replicas"]), (200, 9))
        code, _, _ = self.api.call(
            "PATCH", f"{WIDGETS}/w", [{"op": "replace", "path": "/spec/replicas", "value": -9}],
            content_type=JSON_PATCH)
        self.assertEqual(code, 422)

    def test_apply_merges_list_map_by_key(self):
        """Server-side apply by two managers merges a list-type map by its keys."""
        def apply(manager, ports):
            config = {"apiVersion": "example.com/v1", "kind": "Widget",
                      "metadata": {"name": "w"}, "spec": {"ports": ports}}
            return self.api.call("PATCH", f"{WIDGETS}/w?fieldManager={manager}",
                                 orjson.dumps(config), content_type=APPLY)

        code, body, _ = apply("one", [{"name": "http", "port": 80}])
        self.assertEqual(code, 201, body)
        code, body, _ = apply("two", [{"name": "https", "port": 443}])
        self.assertEqual(code, 200, body)
        self.assertEqual(sorted(p["name"] for p in body["spec"]["ports"]), ["http", "https"])

    # -- versions -----------------------------------------------------------------------

    def test_versions_with_conversion_none(self):
        """Each version answers in its own apiVersion; a deprecated one warns."""
        crd = self.get("widgets.example.com", CRDS)
        v1beta1 = copy.deepcopy(crd["spec"]["versions"][0])
        v1beta1.update(name="v1beta1", storage=False, deprecated=True,
                       deprecationWarning="example.com/v1beta1 Widget is old")
        crd["spec"]["versions"].append(v1beta1)
        code, body, _ = self.api.call("PUT", f"{CRDS}/widgets.example.com", crd)
        self.assertEqual(code, 200, body)
        beta = "/apis/example.com/v1beta1/namespaces/default/widgets"
        obj = widget("w", replicas=1)
        obj["apiVersion"] = "example.com/v1beta1"
        body, headers = self.create(obj, path=beta)
        self.assertEqual(body["apiVersion"], "example.com/v1beta1")
        self.assertEqual(headers.getRawHeaders(b"warning"),
                         [b'299 - "example.com/v1beta1 Widget is old"'])
        self.assertEqual(self.get("w")["apiVersion"], "example.com/v1")
        stored = self.successResultOf(
            self.api.store.get("/registry/example.com/widgets/default/w"))
        self.assertEqual(orjson.loads(stored.value)["apiVersion"], "example.com/v1")
        _, listed, _ = self.api.call("GET", beta)
        self.assertEqual(listed["items"][0]["apiVersion"], "example.com/v1beta1")

    def test_watch_per_version(self):
        """Watches of two versions each see events in their own apiVersion, with defaults."""
        crd = self.get("widgets.example.com", CRDS)
        v1beta1 = copy.deepcopy(crd["spec"]["versions"][0])
        v1beta1.update(name="v1beta1", storage=False)
        crd["spec"]["versions"].append(v1beta1)
        self.assertEqual(self.api.call("PUT", f"{CRDS}/widgets.example.com", crd)[0], 200)
        stored = widget("old", replicas=1)
        stored["metadata"].update(namespace="default", uid="u1",
                                  creationTimestamp="2023-01-01T00:00:00Z")
        self.successResultOf(self.api.store.create("/registry/example.com/widgets/default/old",
                                                   orjson.dumps(stored)))
        beta = Stream(self.api, "/apis/example.com/v1beta1/namespaces/default/widgets"
                                "?watch=true")
        ga = Stream(self.api, WIDGETS + "?watch=true")
        self.create(widget("new"))
        for stream, version in ((beta, "example.com/v1beta1"), (ga, "example.com/v1")):
            events = stream.events()
            self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in events],
                             [("ADDED", "old"), ("ADDED", "new")])
            self.assertEqual({e["object"]["apiVersion"] for e in events}, {version})
            self.assertEqual(events[0]["object"]["spec"]["color"], "blue")

    def test_cluster_scoped(self):
        """A cluster-scoped definition serves its resources without namespaces."""
        self.define(widget_crd(scope="Cluster", names={"plural": "globals", "kind": "Global"}))
        path = "/apis/example.com/v1/globals"
        body, _ = self.create({"apiVersion": "example.com/v1", "kind": "Global",
                               "metadata": {"name": "g"}}, path=path)
        self.assertNotIn("namespace", body["metadata"])

    # -- discovery and OpenAPI ------------------------------------------------------------

    def test_aggregated_discovery(self):
        """Aggregated discovery lists the kind with its names, categories and subresources."""
        code, body, _ = self.api.call("GET", "/apis", headers={b"accept": AGGREGATED})
        self.assertEqual(code, 200)
        group = [g for g in body["items"] if g["metadata"]["name"] == "example.com"][0]
        resource = group["versions"][0]["resources"][0]
        self.assertEqual((resource["resource"], resource["singularResource"],
                          resource["shortNames"], resource["categories"]),
                         ("widgets", "widget", ["wd"], ["all"]))
        self.assertEqual(sorted(s["subresource"] for s in resource["subresources"]),
                         ["scale", "status"])

    def test_openapi_v3_from_schema(self):
        """OpenAPI v3 describes the kind from its schema, for kubectl explain."""
        code, document, _ = self.api.call("GET", "/openapi/v3/apis/example.com/v1")
        self.assertEqual(code, 200)
        definition = document["components"]["schemas"]["com.example.v1.Widget"]
        self.assertEqual(definition["properties"]["spec"]["properties"]["replicas"]["type"],
                         "integer")
        self.assertEqual(definition["x-kubernetes-group-version-kind"],
                         [{"group": "example.com", "kind": "Widget", "version": "v1"}])

    def test_openapi_v2_lists_the_kind(self):
        """OpenAPI v2 has the kind's definition too."""
        code, document, _ = self.api.call("GET", "/openapi/v2")
        self.assertEqual(code, 200)
        self.assertIn("com.example.v1.Widget", document["definitions"])

    # -- garbage collection ---------------------------------------------------------------

    def test_garbage_collected(self):
        """A widget owned by a ConfigMap is collected once the ConfigMap goes."""
        gc = GarbageCollector(self.api.catalog, self.api.clock)
        gc.startService()
        self.addCleanup(gc.stopService)
        self.api.clock.advance(0)
        self.define(widget_crd(names={"plural": "things", "kind": "Thing"}))
        code, owner, _ = self.api.call("POST", "/api/v1/namespaces/default/configmaps",
                                       {"metadata": {"name": "owner"}})
        thing = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {
            "name": "t", "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                                              "name": "owner",
                                              "uid": owner["metadata"]["uid"]}]}}
        path = "/apis/example.com/v1/namespaces/default/things"
        self.create(thing, path=path)
        self.api.call("DELETE", "/api/v1/namespaces/default/configmaps/owner")
        for _ in range(5):
            self.api.clock.advance(1)
        self.assertEqual(self.api.call("GET", f"{path}/t")[0], 404)


class PrinterColumnPathTests(SynchronousTestCase):
    def test_filter_column(self):
        """A column may pick a condition's status by its type."""
        crd = widget_crd(additionalPrinterColumns=[{
            "name": "Ready", "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status'}])
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        schema["properties"]["status"]["properties"]["conditions"] = {
            "type": "array", "items": {"type": "object", "properties": {
                "type": {"type": "string"}, "status": {"type": "string"}}}}
        api = APIHarness()
        self.assertEqual(api.call("POST", CRDS, crd)[0], 201)
        api.call("POST", WIDGETS, widget("w"))
        api.call("PATCH", f"{WIDGETS}/w/status", {"status": {"conditions": [
            {"type": "Other", "status": "False"}, {"type": "Ready", "status": "True"}]}},
            content_type=MERGE)
        _, table, _ = api.call("GET", WIDGETS, headers={b"accept": TABLE})
        self.assertEqual(table["rows"][0]["cells"], ["w", "True"])


del WIDGET_SCHEMA
