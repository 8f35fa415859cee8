"""Server-side apply, managedFields and field validation through the API."""

import yaml
from twisted.trial.unittest import SynchronousTestCase

from tests.support import APIHarness

CM = "/api/v1/namespaces/default/configmaps"
APPLY = b"application/apply-patch+yaml"
MERGE = b"application/merge-patch+json"


def applied(name, data, labels=None):
    meta = {"name": name}
    if labels:
        meta["labels"] = labels
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                           "data": data}).encode()


class ApplyTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def apply(self, name, data, manager="alice", force=False, labels=None):
        query = f"?fieldManager={manager}" + ("&force=true" if force else "")
        return self.api.call("PATCH", f"{CM}/{name}{query}", applied(name, data, labels),
                             content_type=APPLY)

    def managers(self, name):
        obj = self.api.call("GET", f"{CM}/{name}")[1]
        return [(e["manager"], e["operation"]) for e in obj["metadata"].get("managedFields", [])]

    def test_apply_creates_then_updates(self):
        """The first apply creates (201) and records an Apply entry; the next updates (200)."""
        code, obj, _ = self.apply("a", {"k": "1"})
        self.assertEqual(code, 201)
        self.assertEqual(obj["data"], {"k": "1"})
        entry = obj["metadata"]["managedFields"][0]
        self.assertEqual((entry["manager"], entry["operation"], entry["fieldsType"]),
                         ("alice", "Apply", "FieldsV1"))
        self.assertEqual(entry["fieldsV1"], {"f:data": {"f:k": {}}})
        code, obj, _ = self.apply("a", {"k": "2"})
        self.assertEqual((code, obj["data"]), (200, {"k": "2"}))

    def test_dropped_fields_are_removed(self):
        """Fields a manager stops applying are removed."""
        self.apply("a", {"k": "1", "gone": "x"})
        _, obj, _ = self.apply("a", {"k": "1"})
        self.assertEqual(obj["data"], {"k": "1"})

    def test_conflict_names_the_other_manager(self):
        """Applying a field another manager owns with another value is 409 naming it."""
        self.apply("a", {"k": "1"}, manager="alice")
        code, status, _ = self.apply("a", {"k": "2"}, manager="bob")
        self.assertEqual((code, status["reason"]), (409, "Conflict"))
        self.assertEqual(status["message"],
                         'Apply failed with 1 conflict: conflict with "alice": .data.k')
        self.assertEqual(status["details"]["causes"][0]["reason"], "FieldManagerConflict")

    def test_force_takes_ownership(self):
        """force=true takes the field over."""
        self.apply("a", {"k": "1"}, manager="alice")
        code, obj, _ = self.apply("a", {"k": "2"}, manager="bob", force=True)
        self.assertEqual((code, obj["data"]["k"]), (200, "2"))
        self.assertIn(("bob", "Apply"), self.managers("a"))

    def test_apply_needs_field_manager(self):
        """An apply without fieldManager is 422."""
        code, status, _ = self.api.call("PATCH", CM + "/a", applied("a", {}), content_type=APPLY)
        self.assertEqual(code, 422)
        self.assertEqual(status["message"], 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: '
                                            "Required value: is required for apply patch")

    def test_update_managers_recorded(self):
        """Create, update and patch record Update entries by fieldManager or User-Agent."""
        self.api.call("POST", CM + "?fieldManager=creator", {"metadata": {"name": "a"},
                                                             "data": {"x": "1"}})
        self.api.call("PATCH", CM + "/a", {"data": {"y": "2"}}, content_type=MERGE,
                      headers={b"user-agent": b"kubectl/v1.32.4 (linux/amd64) kubernetes/x"})
        self.assertEqual(self.managers("a"), [("creator", "Update"), ("kubectl", "Update")])

    def test_update_then_apply_conflict(self):
        """A field written by an update conflicts with a later apply of another value."""
        self.api.call("POST", CM + "?fieldManager=editor", {"metadata": {"name": "a"},
                                                            "data": {"k": "1"}})
        code, status, _ = self.apply("a", {"k": "2"})
        self.assertEqual(code, 409)
        self.assertIn('conflict with "editor" using v1', status["message"])

    def test_status_apply_records_its_manager(self):
        """An apply to /status is credited to its manager, for the status subresource."""
        rs = "/apis/apps/v1/namespaces/default/replicasets"
        template = {"metadata": {"labels": {"a": "b"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]}}
        self.api.call("POST", rs, {"metadata": {"name": "r"}, "spec": {
            "replicas": 0, "selector": {"matchLabels": {"a": "b"}}, "template": template}})
        body = yaml.safe_dump({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                               "metadata": {"name": "r"},
                               "status": {"replicas": 0, "conditions": [{
                                   "type": "Custom", "status": "True", "reason": "R"}]}})
        code, obj, _ = self.api.call("PATCH", f"{rs}/r/status?fieldManager=tester",
                                     body.encode(), content_type=APPLY)
        self.assertEqual(code, 200, obj)
        self.assertEqual(obj["status"]["conditions"][0]["type"], "Custom")
        [entry] = [e for e in obj["metadata"]["managedFields"] if e["manager"] == "tester"]
        self.assertEqual((entry["operation"], entry["subresource"]), ("Apply", "status"))
        self.assertIn("f:conditions", entry["fieldsV1"]["f:status"])
        stored = self.api.call("GET", f"{rs}/r")[1]
        self.assertIn("tester", [e["manager"] for e in stored["metadata"]["managedFields"]])


class FieldValidationTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def test_strict_unknown_field_is_400(self):
        """Strict refuses unknown fields with upstream's message."""
        code, status, _ = self.api.call("POST", CM + "?fieldValidation=Strict",
                                        {"metadata": {"name": "a"}, "bogus": 1})
        self.assertEqual(code, 400)
        self.assertEqual(status["message"], 'ConfigMap in version "v1" cannot be handled as a '
                                            'ConfigMap: strict decoding error: unknown field "bogus"')

    def test_warn_is_default_and_drops(self):
        """By default unknown fields are dropped with a Warning header."""
        code, obj, headers = self.api.call("POST", CM, {"metadata": {"name": "a"}, "bogus": 1})
        self.assertEqual(code, 201)
        self.assertNotIn("bogus", obj)
        self.assertEqual(headers.getRawHeaders(b"warning"), [b'299 - "unknown field \\"bogus\\""'])

    def test_ignore_drops_silently(self):
        """Ignore drops unknown fields without a warning."""
        code, obj, headers = self.api.call("POST", CM + "?fieldValidation=Ignore",
                                           {"metadata": {"name": "a"}, "bogus": 1})
        self.assertEqual(code, 201)
        self.assertNotIn("bogus", obj)
        self.assertIsNone(headers.getRawHeaders(b"warning"))

    def test_duplicate_field(self):
        """A repeated key is a warning by default and a 400 under Strict."""
        body = b'{"metadata": {"name": "a"}, "data": {"k": "1", "k": "2"}}'
        code, status, _ = self.api.call("POST", CM + "?fieldValidation=Strict", body)
        self.assertEqual(code, 400)
        self.assertIn('duplicate field "data.k"', status["message"])
        code, obj, headers = self.api.call("POST", CM, body)
        self.assertEqual((code, obj["data"]), (201, {"k": "2"}))
        self.assertIn(b"duplicate field", headers.getRawHeaders(b"warning")[0])

    def test_loose_kind_keeps_everything(self):
        """Kinds with a loose schema keep fields it does not describe."""
        code, obj, _ = self.api.call("POST", "/apis/policy/v1/namespaces/default/"
                                     "poddisruptionbudgets?fieldValidation=Strict",
                                     {"metadata": {"name": "d"}, "spec": {"anything": 1}})
        self.assertEqual((code, obj["spec"]), (201, {"anything": 1}))

    def test_patch_result_is_validated(self):
        """A patch that adds an unknown field is refused under Strict."""
        self.api.call("POST", CM, {"metadata": {"name": "a"}})
        code, _, _ = self.api.call("PATCH", CM + "/a?fieldValidation=Strict", {"bogus": 1},
                                   content_type=MERGE)
        self.assertEqual(code, 400)

    def test_bad_field_validation_value(self):
        """fieldValidation accepts only Ignore, Warn and Strict."""
        code, _, _ = self.api.call("POST", CM + "?fieldValidation=Loud",
                                   {"metadata": {"name": "a"}})
        self.assertEqual(code, 422)
