"""
Tests for L{orchd.api.fieldmanager} and L{orchd.api.fieldpath}.
"""

import copy
import json

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.api.fieldmanager import (
    LAST_APPLIED, apply_manager_required, default_manager, reset_fields, validate_manager,
)
from orchd.api.fieldpath import (
    canonical, difference, element_order, intersection, parse_fields, path_string, paths, union,
    without,
)
from tests.builtinkinds import KindFieldManagers

T0 = 1714557600  # 2024-05-01T10:00:00Z


def at(seconds):
    return f"2024-05-01T10:{(seconds - T0) // 60:02d}:{(seconds - T0) % 60:02d}Z"


def configmap(data=None, labels=None, **meta):
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "test-cm", "namespace": "default", **meta}}
    if labels is not None:
        obj["metadata"]["labels"] = labels
    if data is not None:
        obj["data"] = data
    return obj


def deployment(replicas=3, image="nginx:latest", **extra):
    spec = {"replicas": replicas, "selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}},
                         "spec": {"containers": [{"name": "nginx", "image": image}]}}}
    spec.update(extra)
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "deployment", "namespace": "default"}, "spec": spec}


def stored(obj, uid="uid-1"):
    """What the registry keeps: a copy with server metadata."""
    obj = copy.deepcopy(obj)
    obj["metadata"].setdefault("uid", uid)
    obj["metadata"].setdefault("resourceVersion", "7")
    obj["metadata"].setdefault("creationTimestamp", "2024-05-01T09:00:00Z")
    return obj


def entries(obj):
    return obj["metadata"].get("managedFields")


def owners(obj):
    """manager/operation -> fieldsV1, for short assertions."""
    return {(e["manager"], e["operation"]): e["fieldsV1"] for e in entries(obj) or ()}


class Harness(SynchronousTestCase):

    def setUp(self):
        self.now = T0
        self.manager = KindFieldManagers(lambda: self.now)

    def tick(self, seconds=1):
        self.now += seconds

    def create(self, obj, manager="kubectl-create", version="v1", group="", kind=None):
        return stored(self.manager.update(None, obj, manager, version, group,
                                          kind or obj["kind"]))

    def update(self, old, new, manager, version="v1", group="", kind=None, subresource="",
               ignored=None):
        return self.manager.update(old, new, manager, version, group, kind or new["kind"],
                                   subresource, ignored)

    def apply(self, live, config, manager, force=False, version="v1", group="", kind=None):
        result = self.manager.apply(live, config, manager, force, version, group,
                                    kind or config["kind"])
        return stored(result) if live is None else result

    def conflict(self, live, config, manager, version="v1", group=""):
        error = self.assertRaises(StatusError, self.manager.apply, live, config, manager, False,
                                  version, group, config["kind"])
        self.assertEqual((error.code, error.reason), (409, "Conflict"))
        self.assertNotIn("name", error.details)
        return error


class UpdateTests(Harness):

    def test_create_records_full_field_set(self):
        """A create gives its manager one Update entry holding every field it set."""
        obj = self.create(configmap({"a": "1", "b": "2"}, labels={"app": "web"}))
        self.assertEqual(entries(obj), [{
            "manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
            "time": "2024-05-01T10:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {".": {}, "f:a": {}, "f:b": {}},
                         "f:metadata": {"f:labels": {".": {}, "f:app": {}}}},
        }])

    def test_create_of_struct_fields_marks_only_new_maps(self):
        """Maps a zero object has (spec, template, metadata) get no "." of their own."""
        obj = self.create(deployment(strategy={"rollingUpdate": {"maxSurge": 1}}),
                          version="apps/v1", group="apps")
        self.assertEqual(owners(obj)[("kubectl-create", "Update")], {
            "f:spec": {
                "f:replicas": {},
                "f:selector": {".": {}, "f:matchLabels": {".": {}, "f:app": {}}},
                "f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}}},
                "f:template": {
                    "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                    "f:spec": {"f:containers": {'k:{"name":"nginx"}': {
                        ".": {}, "f:image": {}, "f:name": {}}}}}}})

    def test_update_moves_changed_fields(self):
        """Another manager takes the fields it changes; the rest stay with their owner."""
        old = self.create(configmap({"a": "1", "b": "2"}))
        self.tick()
        new = copy.deepcopy(old)
        new["data"]["a"] = "changed"
        result = self.update(old, new, "kubectl-edit")
        self.assertEqual(owners(result), {
            ("kubectl-create", "Update"): {"f:data": {".": {}, "f:b": {}}},
            ("kubectl-edit", "Update"): {"f:data": {"f:a": {}}},
        })
        self.assertEqual(entries(result)[1]["time"], "2024-05-01T10:00:01Z")
        self.assertEqual(old["metadata"]["managedFields"][0]["fieldsV1"]["f:data"],
                         {".": {}, "f:a": {}, "f:b": {}})

    def test_removed_fields_leave_every_manager(self):
        """A field the update removes is dropped from all managers, and empty entries go."""
        old = self.create(configmap({"a": "1"}, labels={"x": "y"}))
        new = copy.deepcopy(old)
        del new["data"]
        result = self.update(old, new, "kubectl-edit")
        self.assertEqual(owners(result), {
            ("kubectl-create", "Update"): {"f:metadata": {"f:labels": {".": {}, "f:x": {}}}}})
        newer = copy.deepcopy(result)
        del newer["metadata"]["labels"]
        self.assertNotIn("managedFields", self.update(result, newer, "x")["metadata"])

    def test_unchanged_update_keeps_entries(self):
        """An update that changes nothing adds no entry and leaves times alone."""
        old = self.create(configmap({"a": "1"}))
        self.tick(30)
        result = self.update(old, copy.deepcopy(old), "other")
        self.assertEqual(entries(result), entries(old))

    def test_same_manager_accumulates(self):
        """A manager's later updates add to its entry and refresh its time."""
        old = self.create(configmap({"a": "1"}), manager="ctl")
        self.tick(5)
        new = copy.deepcopy(old)
        new["data"]["b"] = "2"
        result = self.update(old, new, "ctl")
        self.assertEqual(entries(result)[0]["fieldsV1"],
                         {"f:data": {".": {}, "f:a": {}, "f:b": {}}})
        self.assertEqual(entries(result)[0]["time"], "2024-05-01T10:00:05Z")

    def test_subresource_entry(self):
        """A status write gets its own entry, naming the subresource."""
        old = self.create({"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": "p", "namespace": "default"},
                           "spec": {"containers": [{"name": "c", "image": "i"}]}})
        new = copy.deepcopy(old)
        new["status"] = {"phase": "Running"}
        result = self.update(old, new, "orchlet", subresource="status")
        self.assertEqual(entries(result)[1], {
            "manager": "orchlet", "operation": "Update", "apiVersion": "v1",
            "time": "2024-05-01T10:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:phase": {}}}, "subresource": "status"})

    def test_empty_manager_is_unknown(self):
        """An update without a manager is recorded as "unknown", as upstream does."""
        obj = self.create(configmap({"a": "1"}), manager="")
        self.assertEqual(entries(obj)[0]["manager"], "unknown")

    def test_reset_clears_tracking(self):
        """managedFields: [] (or [{}]) clears the entries, and updates stay untracked."""
        old = self.create(configmap({"a": "1"}))
        for reset in ([], [{}]):
            new = copy.deepcopy(old)
            new["metadata"]["managedFields"] = reset
            new["data"]["a"] = "2"
            cleared = stored(self.update(old, new, "kubectl-edit"))
            self.assertNotIn("managedFields", cleared["metadata"])
            again = copy.deepcopy(cleared)
            again["data"]["b"] = "3"
            self.assertNotIn("managedFields", self.update(cleared, again, "x")["metadata"])

    def test_first_apply_after_reset(self):
        """The first apply on an untracked object gives what exists to before-first-apply."""
        live = stored(configmap({"a": "1", "b": "2"}))
        result = self.apply(live, configmap({"a": "1"}), "ssa")
        self.assertEqual(owners(result), {
            ("ssa", "Apply"): {"f:data": {"f:a": {}}},
            ("before-first-apply", "Update"): {"f:data": {".": {}, "f:a": {}, "f:b": {}}},
        })

    def test_client_edited_entries_are_accepted(self):
        """Well-formed managedFields sent by a client replace the stored ones."""
        old = self.create(configmap({"a": "1"}))
        new = copy.deepcopy(old)
        new["metadata"]["managedFields"] = [{
            "manager": "someone", "operation": "Apply", "apiVersion": "v1",
            "time": "2024-05-01T12:00:00+02:00", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {".": {}}, "x:unknown": {}}}}]
        result = self.update(old, new, "kubectl-edit")
        self.assertEqual(entries(result), [{
            "manager": "someone", "operation": "Apply", "apiVersion": "v1",
            "time": "2024-05-01T10:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {}}}}])

    def test_malformed_client_entries_are_ignored(self):
        """managedFields a client garbled are ignored; the stored ones carry on."""
        old = self.create(configmap({"a": "1"}))
        for bad in ([{"manager": "m", "operation": "Delete", "apiVersion": "v1",
                      "fieldsType": "FieldsV1", "fieldsV1": {}}],
                    [{"manager": "m", "operation": "Update", "apiVersion": "v1"}],
                    [{"manager": "m", "operation": "Update", "apiVersion": "v1",
                      "fieldsType": "FieldsV1", "fieldsV1": {"bad": {}}}],
                    "nonsense"):
            new = copy.deepcopy(old)
            new["metadata"]["managedFields"] = bad
            self.assertEqual(entries(self.update(old, new, "x")), entries(old))

    def test_subresource_ignores_sent_entries(self):
        """Through a subresource, managedFields in the request are ignored."""
        old = self.create(configmap({"a": "1"}))
        new = copy.deepcopy(old)
        new["metadata"]["managedFields"] = []
        self.assertEqual(entries(self.update(old, new, "x", subresource="status")), entries(old))

    def test_update_managers_are_capped(self):
        """Past ten Update entries the oldest merge into ancient-changes."""
        obj = self.create(configmap({"k0": "v"}), manager="m0")
        for i in range(1, 12):
            self.tick()
            new = copy.deepcopy(obj)
            new["data"][f"k{i}"] = "v"
            obj = self.update(obj, new, f"m{i}")
        managers = [e["manager"] for e in entries(obj)]
        self.assertEqual(len(managers), 10)
        self.assertEqual(managers[0], "ancient-changes")
        self.assertEqual(entries(obj)[0]["fieldsV1"],
                         {"f:data": {".": {}, "f:k0": {}, "f:k1": {}, "f:k2": {}}})
        self.assertEqual(entries(obj)[0]["time"], at(T0 + 2))

    def test_inputs_not_modified(self):
        """update leaves both objects as they were."""
        old = self.create(configmap({"a": "1"}))
        new = copy.deepcopy(old)
        new["data"]["a"] = "2"
        old_copy, new_copy = copy.deepcopy(old), copy.deepcopy(new)
        self.update(old, new, "x")
        self.assertEqual((old, new), (old_copy, new_copy))


class ApplyTests(Harness):

    def test_apply_creates(self):
        """Apply on a missing object creates it with one Apply entry of the applied fields."""
        obj = self.apply(None, configmap({"key": "value"}, labels={"test-label": "test"}),
                         "apply_test")
        self.assertEqual(obj["data"], {"key": "value"})
        self.assertEqual(entries(obj), [{
            "manager": "apply_test", "operation": "Apply", "apiVersion": "v1",
            "time": "2024-05-01T10:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:key": {}},
                         "f:metadata": {"f:labels": {"f:test-label": {}}}}}])

    def test_upstream_sample_apply_then_updates(self):
        """Upstream's TestApplyManagedFields: an apply and two merge patches by "updater"."""
        obj = self.apply(None, configmap({"key": "value"}, labels={"test-label": "test"}),
                         "apply_test")
        for change in ({"new-key": "value"}, {"key": "new value"}):
            self.tick()
            new = copy.deepcopy(obj)
            new["data"].update(change)
            obj = self.update(obj, new, "updater")
        self.assertEqual(json.dumps(entries(obj), indent="\t"), json.dumps([
            {"manager": "apply_test", "operation": "Apply", "apiVersion": "v1",
             "time": "2024-05-01T10:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:labels": {"f:test-label": {}}}}},
            {"manager": "updater", "operation": "Update", "apiVersion": "v1",
             "time": "2024-05-01T10:00:02Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {"f:key": {}, "f:new-key": {}}}},
        ], indent="\t"))

    def test_upstream_sample_sidecar(self):
        """Upstream's TestApplyConvertsManagedFieldsVersion: the exact FieldsV1 bytes."""
        created = deployment()
        created["metadata"]["managedFields"] = [{
            "manager": "sidecar_controller", "operation": "Apply",
            "apiVersion": "extensions/v1beta1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:sidecar_version": {}}}}}]
        live = self.create(created, version="apps/v1", group="apps")
        config = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "deployment", "labels": {"sidecar_version": "release"}},
                  "spec": {"template": {"spec": {"containers": [
                      {"name": "sidecar", "image": "sidecar:latest"}]}}}}
        result = self.apply(live, config, "sidecar_controller", version="apps/v1", group="apps")
        entry = next(e for e in entries(result) if e["manager"] == "sidecar_controller")
        self.assertEqual(entry["apiVersion"], "apps/v1")
        self.assertEqual(
            json.dumps(entry["fieldsV1"], separators=(",", ":")),
            '{"f:metadata":{"f:labels":{"f:sidecar_version":{}}},"f:spec":{"f:template":'
            '{"f:spec":{"f:containers":{"k:{\\"name\\":\\"sidecar\\"}":{".":{},"f:image":{},'
            '"f:name":{}}}}}}}')
        self.assertEqual([c["name"] for c in
                          result["spec"]["template"]["spec"]["containers"]],
                         ["nginx", "sidecar"])

    def test_reapply_removes_dropped_fields(self):
        """Fields an applier no longer applies are removed, unless another manager owns them."""
        live = self.apply(None, configmap({"a": "1", "b": "2", "c": "3"},
                                          labels={"x": "1", "y": "2"}), "ssa")
        self.tick()
        other = self.apply(live, configmap({"b": "2"}), "other")
        self.tick()
        result = self.apply(other, configmap({"a": "1"}, labels={"y": "2"}), "ssa")
        self.assertEqual(result["data"], {"a": "1", "b": "2"})
        self.assertEqual(result["metadata"]["labels"], {"y": "2"})
        self.assertEqual(owners(result), {
            ("ssa", "Apply"): {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:y": {}}}},
            ("other", "Apply"): {"f:data": {"f:b": {}}}})

    def test_reapply_dropping_a_whole_map(self):
        """A map left empty by pruning goes away entirely."""
        live = self.apply(None, configmap({"a": "1"}, labels={"x": "1"}), "ssa")
        result = self.apply(live, configmap(), "ssa")
        self.assertNotIn("data", result)
        self.assertNotIn("labels", result["metadata"])
        self.assertNotIn("managedFields", result["metadata"])

    def test_prune_keeps_fields_owned_by_updaters(self):
        """A field an Update manager also holds survives the applier dropping it."""
        live = self.apply(None, configmap({"a": "1"}), "ssa")
        new = copy.deepcopy(live)
        new["data"]["a"] = "edited"
        edited = self.update(live, new, "kubectl-edit")
        result = self.apply(edited, configmap({"z": "1"}), "ssa")
        self.assertEqual(result["data"], {"a": "edited", "z": "1"})

    def test_disjoint_appliers_coexist(self):
        """Two appliers of different fields both keep their entries and values."""
        live = self.apply(None, configmap({"a": "1"}), "one")
        self.tick()
        result = self.apply(live, configmap({"b": "2"}), "two")
        self.assertEqual(result["data"], {"a": "1", "b": "2"})
        self.assertEqual([(e["manager"], e["fieldsV1"]) for e in entries(result)], [
            ("one", {"f:data": {"f:a": {}}}), ("two", {"f:data": {"f:b": {}}})])

    def test_same_value_is_shared(self):
        """Applying a value another manager already set is no conflict; both own it."""
        live = self.apply(None, configmap({"a": "1"}), "one")
        result = self.apply(live, configmap({"a": "1"}), "two")
        self.assertEqual(owners(result), {("one", "Apply"): {"f:data": {"f:a": {}}},
                                          ("two", "Apply"): {"f:data": {"f:a": {}}}})

    def test_conflict_with_updater(self):
        """Changing a field an Update manager owns is a 409 naming it and its version."""
        live = self.create(deployment(), manager="kubectl-client-side-apply",
                           version="apps/v1", group="apps")
        error = self.conflict(live, deployment(replicas=5), "kubectl", version="apps/v1",
                              group="apps")
        self.assertEqual(error.message, 'Apply failed with 1 conflict: conflict with '
                                        '"kubectl-client-side-apply" using apps/v1: .spec.replicas')
        self.assertEqual(error.details, {"causes": [{
            "reason": "FieldManagerConflict",
            "message": 'conflict with "kubectl-client-side-apply" using apps/v1',
            "field": ".spec.replicas"}]})
        self.assertEqual(error.to_status()["code"], 409)

    def test_several_conflicts(self):
        """Several conflicts are grouped by manager, managers sorted, as upstream prints them."""
        live = self.apply(None, configmap(labels={"app": "a"}), "bar")
        new = copy.deepcopy(live)
        new["data"] = {"x": "1", "y": "2"}
        live = self.update(live, new, "foo")
        error = self.conflict(live, configmap({"x": "9", "y": "9"}, labels={"app": "b"}), "me")
        self.assertEqual(error.message, (
            'Apply failed with 3 conflicts: conflicts with "bar":\n'
            '- .metadata.labels.app\n'
            'conflicts with "foo" using v1:\n'
            '- .data.x\n'
            '- .data.y'))
        self.assertEqual([(c["message"], c["field"]) for c in error.details["causes"]], [
            ('conflict with "bar"', ".metadata.labels.app"),
            ('conflict with "foo" using v1', ".data.x"),
            ('conflict with "foo" using v1', ".data.y")])

    def test_conflict_keyed_path(self):
        """Conflicts inside associative lists print the key form."""
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": "one"}]}}
        live = self.create(pod)
        changed = copy.deepcopy(pod)
        changed["spec"]["containers"][0]["image"] = "two"
        error = self.conflict(live, changed, "ssa")
        self.assertEqual(error.details["causes"][0]["field"], '.spec.containers[name="c"].image')

    def test_force_takes_ownership(self):
        """With force the applier wins: the value changes and the field moves to it."""
        live = self.create(deployment(), version="apps/v1", group="apps")
        result = self.apply(live, deployment(replicas=5), "ssa", force=True,
                            version="apps/v1", group="apps")
        self.assertEqual(result["spec"]["replicas"], 5)
        fields = owners(result)
        self.assertNotIn("f:replicas", fields[("kubectl-create", "Update")]["f:spec"])
        self.assertIn("f:replicas", fields[("ssa", "Apply")]["f:spec"])
        self.assertIn("f:selector", fields[("kubectl-create", "Update")]["f:spec"])

    def test_apply_conflicts_with_own_update_entry(self):
        """A manager's Update entry is a different manager to its Apply entry."""
        live = self.create(configmap({"a": "1"}), manager="tool")
        error = self.conflict(live, configmap({"a": "2"}), "tool")
        self.assertEqual(error.message,
                         'Apply failed with 1 conflict: conflict with "tool" using v1: .data.a')

    def test_associative_list_merges_by_key(self):
        """Containers merge by name; each applier owns its k:{"name":...} item."""
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": [{"name": "app", "image": "app:1"}]}}
        live = self.apply(None, pod, "one")
        sidecar = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                   "spec": {"containers": [{"name": "side", "image": "side:1"}]}}
        result = self.apply(live, sidecar, "two")
        self.assertEqual(result["spec"]["containers"], [
            {"name": "app", "image": "app:1"}, {"name": "side", "image": "side:1"}])
        self.assertEqual(owners(result)[("two", "Apply")], {"f:spec": {"f:containers": {
            'k:{"name":"side"}': {".": {}, "f:image": {}, "f:name": {}}}}})
        again = self.apply(result, {"apiVersion": "v1", "kind": "Pod",
                                    "metadata": {"name": "p"}}, "two")
        self.assertEqual(again["spec"]["containers"], [{"name": "app", "image": "app:1"}])

    def test_service_ports_merge_by_port(self):
        """Service ports merge by port number and print as [port=80]."""
        svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
               "spec": {"ports": [{"port": 80, "targetPort": 8080}]}}
        live = self.apply(None, svc, "one")
        other = copy.deepcopy(svc)
        other["spec"]["ports"] = [{"port": 443}, {"port": 80, "targetPort": 9090}]
        error = self.conflict(live, other, "two")
        self.assertEqual(error.details["causes"][0]["field"], ".spec.ports[port=80].targetPort")
        other["spec"]["ports"][1]["targetPort"] = 8080
        result = self.apply(live, other, "two")
        self.assertEqual(result["spec"]["ports"], [{"port": 443}, {"port": 80, "targetPort": 8080}])
        self.assertEqual(list(owners(result)[("two", "Apply")]["f:spec"]["f:ports"]),
                         ['k:{"port":80}', 'k:{"port":443}'])

    def test_atomic_list_owned_whole(self):
        """A list without merge metadata is one field: replaced whole, owned whole."""
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"tolerations": [{"key": "a"}, {"key": "b"}]}}
        live = self.apply(None, pod, "one")
        self.assertEqual(owners(live)[("one", "Apply")], {"f:spec": {"f:tolerations": {}}})
        other = copy.deepcopy(pod)
        other["spec"]["tolerations"] = [{"key": "c"}]
        error = self.conflict(live, other, "two")
        self.assertEqual(error.details["causes"][0]["field"], ".spec.tolerations")
        result = self.apply(live, other, "two", force=True)
        self.assertEqual(result["spec"]["tolerations"], [{"key": "c"}])
        self.assertEqual(list(owners(result)), [("two", "Apply")])

    def test_set_list_unions(self):
        """Finalizers are a set: applied values join the live ones, owned as v: items."""
        live = self.create(configmap(finalizers=["a.orch.io/x"]))
        result = self.apply(live, configmap(finalizers=["b.orch.io/y"]), "ssa")
        self.assertEqual(result["metadata"]["finalizers"], ["a.orch.io/x", "b.orch.io/y"])
        self.assertEqual(owners(result)[("ssa", "Apply")],
                         {"f:metadata": {"f:finalizers": {'v:"b.orch.io/y"': {}}}})

    def test_labels_and_annotations(self):
        """Labels and annotations are owned key by key."""
        live = self.apply(None, configmap(labels={"a": "1"}, annotations={"n": "x"}), "one")
        result = self.apply(live, configmap(labels={"b": "2"}, annotations={"n": "x"}), "two")
        self.assertEqual(result["metadata"]["labels"], {"a": "1", "b": "2"})
        self.assertEqual(owners(result)[("two", "Apply")], {"f:metadata": {
            "f:annotations": {"f:n": {}}, "f:labels": {"f:b": {}}}})
        error = self.conflict(result, configmap(annotations={"n": "y"}), "three")
        self.assertEqual(error.message, 'Apply failed with 2 conflicts: conflicts with "one":\n'
                                        '- .metadata.annotations.n\nconflicts with "two":\n'
                                        '- .metadata.annotations.n')

    def test_no_op_apply_keeps_time(self):
        """Re-applying the same configuration leaves the entry's time alone."""
        live = self.apply(None, configmap({"a": "1"}), "ssa")
        self.tick(60)
        result = self.apply(live, configmap({"a": "1"}), "ssa")
        self.assertEqual(entries(result), entries(live))
        self.tick(60)
        changed = self.apply(result, configmap({"a": "2"}), "ssa")
        self.assertEqual(entries(changed)[0]["time"], "2024-05-01T10:02:00Z")

    def test_apply_refuses_managed_fields(self):
        """An applied configuration may not carry managedFields: 400."""
        config = configmap({"a": "1"}, managedFields=[])
        error = self.assertRaises(StatusError, self.manager.apply, None, config, "m", False,
                                  "v1", "", "ConfigMap")
        self.assertEqual((error.code, error.message), (400, "metadata.managedFields must be nil"))

    def test_keyed_item_without_key(self):
        """A container without a name cannot be applied: 422 (not upstream's 500), its text."""
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
               "spec": {"containers": [{"image": "x"}]}}
        error = self.assertRaises(StatusError, self.manager.apply, None, pod, "m", False,
                                  "v1", "", "Pod")
        self.assertEqual((error.code, error.reason), (422, "Invalid"))
        self.assertEqual(error.message, (
            "failed to create typed patch object (ns/p; /v1, Kind=Pod): .spec.containers: "
            "element 0: associative list with keys has an element that omits key field "
            '"name" (and doesn\'t have default value)'))

    def test_keyed_items_repeated_or_not_maps(self):
        """Finalizers twice, or an ownerReference that is not a map, are a 422, not a 500."""
        for meta, problem in (({"finalizers": ["a", "a"]},
                               '.metadata.finalizers: duplicate entries for key [="a"]'),
                              ({"ownerReferences": [None]},
                               ".metadata.ownerReferences: element 0: associative list with "
                               "keys may not have non-map elements")):
            config = {"apiVersion": "apps/v1", "kind": "Deployment",
                      "metadata": {"name": "d", **meta}}
            error = self.assertRaises(StatusError, self.manager.apply, None, config, "m", False,
                                      "apps/v1", "apps", "Deployment")
            self.assertEqual(error.code, 422)
            self.assertTrue(error.message.endswith(problem), error.message)

    def test_null_in_new_map_removes_the_field(self):
        """A null inside a map the object lacks is dropped, so a second apply changes nothing."""
        config = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"replicas": None, "template": {"spec": {"nodeName": None}}},
                  "status": {"metadata": None}}
        first = self.manager.apply(None, config, "m", False, "apps/v1", "apps", "Deployment")
        self.assertEqual(first["spec"], {"template": {"spec": {}}})
        self.assertEqual(first["status"], {})
        again = self.manager.apply(first, config, "m", False, "apps/v1", "apps", "Deployment")
        self.assertEqual(again, first)

    def test_result_is_independent(self):
        """The applied object shares nothing with live or the configuration."""
        config = configmap({"a": "1"}, labels={"x": "1"})
        live = self.apply(None, copy.deepcopy(config), "ssa")
        live_copy = copy.deepcopy(live)
        result = self.apply(live, config, "other")
        result["metadata"]["labels"]["x"] = "changed"
        self.assertEqual((live, config["metadata"]["labels"]), (live_copy, {"x": "1"}))

    def test_reset_fields_are_not_owned(self):
        """Status applied through the main resource is neither owned nor a conflict."""
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": "i"}]}}
        live = self.create(pod)
        new = copy.deepcopy(live)
        new["status"] = {"phase": "Running"}
        live = self.update(live, new, "orchlet", subresource="status",
                           ignored=reset_fields(True, "status"))
        config = copy.deepcopy(pod)
        config["status"] = {"phase": "Pending"}
        result = self.manager.apply(live, config, "ssa", False, "v1", "", "Pod",
                                    ignored=reset_fields(True))
        self.assertEqual(owners(result)[("ssa", "Apply")], {"f:spec": {"f:containers": {
            'k:{"name":"c"}': {".": {}, "f:image": {}, "f:name": {}}}}})
        self.assertEqual(owners(result)[("orchlet", "Update")], {"f:status": {"f:phase": {}}})
        self.assertIsNone(reset_fields(False))

    def test_list_order_after_merge(self):
        """Shared items follow the configuration's order; live-only items keep their place."""
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": [{"name": n, "image": "i"} for n in "abc"]}}
        live = self.create(pod)
        config = copy.deepcopy(pod)
        config["spec"]["containers"] = [{"name": "c", "image": "i"}, {"name": "a", "image": "i"}]
        result = self.apply(live, config, "ssa")
        self.assertEqual([c["name"] for c in result["spec"]["containers"]], ["b", "c", "a"])

    def test_kubectl_upgrade_from_client_side_apply(self):
        """kubectl's apply takes fields its last client-side apply set, and keeps the annotation."""
        csa = configmap({"a": "1"})
        csa["metadata"]["annotations"] = {LAST_APPLIED: json.dumps(configmap({"a": "1"}))}
        live = self.create(csa, manager="kubectl-client-side-apply")
        result = self.apply(live, configmap({"a": "2"}), "kubectl")
        self.assertEqual(result["data"], {"a": "2"})
        self.assertEqual(json.loads(result["metadata"]["annotations"][LAST_APPLIED]),
                         configmap({"a": "2"}))
        self.assertTrue(result["metadata"]["annotations"][LAST_APPLIED].endswith("\n"))
        error = self.conflict(live, configmap({"a": "2"}), "not-kubectl")
        self.assertIn("kubectl-client-side-apply", error.message)


class ManagerNameTests(SynchronousTestCase):

    def test_default_manager(self):
        """The default manager is the User-Agent before its first "/", printable, 128 bytes."""
        cases = [
            ("kubectl/v1.32.4 (linux/amd64) kubernetes/abc", "kubectl"),
            ("OpenAPI-Generator/31.0.0/python", "OpenAPI-Generator"),
            ("Go-http-client/2.0", "Go-http-client"),
            ("", ""),
            (None, ""),
            ("tab\there/1", "tabhere"),
            ("x" * 200, "x" * 128),
            ("é" * 100, "é" * 64),
        ]
        for agent, expected in cases:
            self.assertEqual(default_manager(agent), expected, agent)

    def test_apply_manager_required(self):
        """An apply without fieldManager is upstream's 422 on PatchOptions."""
        error = apply_manager_required()
        self.assertEqual((error.code, error.reason), (422, "Invalid"))
        self.assertEqual(error.message, 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: '
                                        'Required value: is required for apply patch')
        self.assertEqual(error.details, {"kind": "PatchOptions", "group": "meta.k8s.io",
                                         "causes": [{"reason": "FieldValueRequired",
                                                     "message": "Required value: is required "
                                                                "for apply patch",
                                                     "field": "fieldManager"}]})
        error = self.assertRaises(StatusError, validate_manager, "", apply=True)
        self.assertEqual(error.message, apply_manager_required().message)

    def test_validate_manager(self):
        """fieldManager must fit 128 bytes and hold printable characters only."""
        validate_manager("kubectl-edit")
        validate_manager("", options="CreateOptions")
        error = self.assertRaises(StatusError, validate_manager, "a" * 129, "UpdateOptions")
        self.assertEqual(error.message, 'UpdateOptions.meta.k8s.io "" is invalid: fieldManager: '
                                        'Too long: must have at most 128 bytes')
        error = self.assertRaises(StatusError, validate_manager, "a\x00b")
        self.assertIn("invalid character U+0000 (at position 1)", error.message)


_ELEMENTS = st.sampled_from(["f:a", "f:b", "f:c", 'k:{"name":"x"}', 'k:{"port":80}',
                              'k:{"port":443}', 'v:"s"', "v:1", "v:true", "i:2"])
_PATH_SETS = st.frozensets(st.lists(_ELEMENTS, min_size=1, max_size=4).map(tuple), max_size=12)


def as_node(path_set):
    """Build a FieldsV1 set from a set of paths (the naive model)."""
    root = {}
    for path in path_set:
        node = root
        for element in path[:-1]:
            node = node.setdefault(element, {})
        node.setdefault(path[-1], {})
    members = set(path_set)

    def mark(node, prefix):
        for element, child in node.items():
            if child:
                mark(child, prefix + (element,))
                if prefix + (element,) in members:
                    child["."] = {}
    mark(root, ())
    return canonical(root)


class FieldSetTests(SynchronousTestCase):

    @settings(max_examples=150, deadline=None)
    @given(_PATH_SETS, _PATH_SETS)
    def test_algebra_matches_path_sets(self, a, b):
        """Set operations on FieldsV1 tries agree with plain sets of paths and stay canonical."""
        na, nb = as_node(a), as_node(b)
        below = {p for p in a if any(p[:len(q)] == q for q in b)}
        for node, expected in ((union(na, nb), a | b), (difference(na, nb), a - b),
                               (intersection(na, nb), a & b), (without(na, nb), a - below)):
            self.assertEqual(set(paths(node)), expected)
            self.assertEqual(json.dumps(node), json.dumps(canonical(node)))
            self.assertEqual(node, as_node(expected))

    def test_element_order(self):
        """Elements sort as upstream: fields, keys, values (numbers, strings, bools), indices."""
        golden = ('{"f:aaa":{},"f:aab":{},"k:{\\"name\\":\\"first\\"}":{},'
                  '"k:{\\"port\\":443,\\"protocol\\":\\"tcp\\"}":{},'
                  '"k:{\\"port\\":443,\\"protocol\\":\\"udp\\"}":{},"v:1":{},"v:2":{},'
                  '"v:\\"aa\\"":{},"v:true":{},"i:1":{},"i:4":{}}')
        parsed = json.loads(golden)
        shuffled = dict(reversed(list(parsed.items())))
        self.assertEqual(json.dumps(parse_fields(shuffled), separators=(",", ":")), golden)
        self.assertLess(element_order('k:{"port":80}'), element_order('k:{"port":443}'))

    def test_member_and_children(self):
        """A member with children writes "." first."""
        node = canonical({"f:b": {}, "f:a": {"f:y": {}, ".": {}}})
        self.assertEqual(json.dumps(node), '{"f:a": {".": {}, "f:y": {}}, "f:b": {}}')

    def test_algebra(self):
        """Union, difference and intersection treat "." and {} as membership."""
        a = {"f:a": {".": {}, "f:x": {}}, "f:b": {}}
        b = {"f:a": {}, "f:c": {}}
        self.assertEqual(union(a, b), {"f:a": {".": {}, "f:x": {}}, "f:b": {}, "f:c": {}})
        self.assertEqual(difference(a, b), {"f:a": {"f:x": {}}, "f:b": {}})
        self.assertEqual(intersection(a, b), {"f:a": {}})
        self.assertEqual(difference(a, {"f:z": {}}), a)
        self.assertIs(difference(a, {"f:z": {}}), a)

    def test_without(self):
        """without drops paths at or below members of the ignored set, keeping the rest."""
        a = {"f:spec": {"f:x": {}}, "f:status": {".": {}, "f:phase": {}},
             "f:metadata": {"f:labels": {".": {}, "f:a": {}}}}
        self.assertEqual(without(a, {"f:status": {}}), {"f:spec": {"f:x": {}},
                                                       "f:metadata": a["f:metadata"]})
        self.assertEqual(without(a, {"f:metadata": {"f:labels": {"f:a": {}}}}),
                         {"f:spec": {"f:x": {}}, "f:status": a["f:status"],
                          "f:metadata": {"f:labels": {}}})
        self.assertIs(without(a, {"f:other": {}}), a)

    def test_paths_print(self):
        """Paths iterate members before children and print in upstream's form."""
        node = {"f:spec": {"f:containers": {'k:{"name":"c"}': {".": {}, "f:image": {}}},
                           "f:replicas": {}},
                "f:metadata": {"f:finalizers": {'v:"x"': {}}}}
        self.assertEqual([path_string(p) for p in paths(node)], [
            '.spec.replicas', '.spec.containers[name="c"]', '.spec.containers[name="c"].image',
            '.metadata.finalizers[="x"]'])
