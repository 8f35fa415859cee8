"""
Tests for L{orchd.api.patch} and L{orchd.api.patchschema}.
"""

import copy
import json

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.api.patch import (
    MAX_JSON_PATCH_OPERATIONS, apply_json_patch, apply_merge_patch, apply_strategic_merge_patch,
)
from orchd.api.patchschema import merge_list
from tests.builtinkinds import patch_schema_for


def pod():
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web", "tier": "fe"},
                     "finalizers": ["a.orch.io/x", "b.orch.io/y"]},
        "spec": {
            "containers": [
                {"name": "app", "image": "app:1", "args": ["--a"],
                 "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                 "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                {"name": "sidecar", "image": "side:1"},
            ],
            "tolerations": [{"key": "k1", "operator": "Exists"}],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
    }


POD = patch_schema_for("", "Pod")


def smp(obj, patch, schema=POD):
    return apply_strategic_merge_patch(obj, patch, schema)


def create_merge_patch(old, new):
    """The RFC 7386 patch that turns C{old} into C{new} (test helper)."""
    patch = {}
    for key in old:
        if key not in new:
            patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif isinstance(value, dict) and isinstance(old[key], dict):
            child = create_merge_patch(old[key], value)
            if child:
                patch[key] = child
        elif value != old[key] or type(value) is not type(old[key]):
            patch[key] = value
    return patch


_present = st.booleans() | st.integers(-10, 10) | st.text("ab", max_size=3)
_scalars = st.none() | _present
_keys = st.sampled_from(["a", "b", "c", "d"])
# Values where null never sits directly under an object key: there it means "delete".
_values = st.recursive(
    _present | st.lists(_scalars, max_size=3),
    lambda inner: st.dictionaries(_keys, inner, max_size=4) | st.lists(inner, max_size=3),
    max_leaves=12,
)
_documents = st.dictionaries(_keys, _values, max_size=4)
_patches = st.dictionaries(_keys, _values | st.none(), max_size=4)


class JSONPatchTests(SynchronousTestCase):

    def test_operations(self):
        """Every RFC 6902 operation applies in order to a copy of the object."""
        obj = pod()
        result = apply_json_patch(obj, [
            {"op": "test", "path": "/metadata/name", "value": "web"},
            {"op": "add", "path": "/metadata/labels/new", "value": "x"},
            {"op": "replace", "path": "/spec/containers/0/image", "value": "app:2"},
            {"op": "remove", "path": "/metadata/labels/tier"},
            {"op": "copy", "from": "/metadata/labels/app", "path": "/metadata/labels/copy"},
            {"op": "move", "from": "/metadata/labels/new", "path": "/metadata/labels/moved"},
        ])
        self.assertEqual(result["metadata"]["labels"], {"app": "web", "copy": "web", "moved": "x"})
        self.assertEqual(result["spec"]["containers"][0]["image"], "app:2")
        self.assertEqual(obj, pod())

    def test_bytes(self):
        """The patch may be given as the request body's bytes."""
        result = apply_json_patch({"a": 1}, b'[{"op": "replace", "path": "/a", "value": 2}]')
        self.assertEqual(result, {"a": 2})

    def test_failed_test(self):
        """A failed test operation is 422 with upstream's wording."""
        with self.assertRaises(StatusError) as raised:
            apply_json_patch(pod(), [{"op": "test", "path": "/metadata/name", "value": "db"}])
        self.assertEqual(raised.exception.code, 422)
        self.assertEqual(raised.exception.reason, "Invalid")
        self.assertEqual(raised.exception.message, "testing value /metadata/name failed: test failed")

    def test_replace_missing_key(self):
        """Replacing a key that does not exist is 422."""
        with self.assertRaises(StatusError) as raised:
            apply_json_patch(pod(), [{"op": "replace", "path": "/spec/nodeName", "value": "n"}])
        self.assertEqual(raised.exception.code, 422)
        self.assertEqual(
            raised.exception.message,
            "replace operation does not apply: doc is missing key: /spec/nodeName: missing value")

    def test_add_missing_parent(self):
        """Adding under a parent that does not exist is 422."""
        with self.assertRaises(StatusError) as raised:
            apply_json_patch(pod(), [{"op": "add", "path": "/status/phase", "value": "Running"}])
        self.assertEqual(raised.exception.code, 422)
        self.assertEqual(
            raised.exception.message,
            'add operation does not apply: doc is missing path: "/status/phase": missing value')

    def test_remove_missing(self):
        """Removing a missing key is 422."""
        with self.assertRaises(StatusError) as raised:
            apply_json_patch(pod(), [{"op": "remove", "path": "/metadata/labels/nope"}])
        self.assertEqual(raised.exception.code, 422)
        self.assertIn("Unable to remove nonexistent key: nope", raised.exception.message)

    def test_unknown_operation(self):
        """An unknown op fails to apply, as upstream: 422."""
        with self.assertRaises(StatusError) as raised:
            apply_json_patch({}, [{"op": "frob", "path": "/a"}])
        self.assertEqual((raised.exception.code, raised.exception.message),
                         (422, "Unexpected kind: frob"))

    def test_not_a_list(self):
        """A document that is not a list of operations is 400."""
        for document in ({"op": "add"}, [1], b"{nope"):
            with self.assertRaises(StatusError) as raised:
                apply_json_patch({}, document)
            self.assertEqual(raised.exception.code, 400)
            self.assertEqual(raised.exception.reason, "BadRequest")

    def test_too_many_operations(self):
        """More than 10000 operations are refused with 413."""
        operations = [{"op": "test", "path": "", "value": {}}] * (MAX_JSON_PATCH_OPERATIONS + 1)
        with self.assertRaises(StatusError) as raised:
            apply_json_patch({}, operations)
        self.assertEqual(raised.exception.code, 413)


class MergePatchTests(SynchronousTestCase):

    def test_merge(self):
        """Maps merge, null deletes, lists and scalars replace."""
        obj = pod()
        result = apply_merge_patch(obj, {
            "metadata": {"labels": {"tier": None, "new": "x"}},
            "spec": {"containers": [{"name": "only"}]},
        })
        self.assertEqual(result["metadata"]["labels"], {"app": "web", "new": "x"})
        self.assertEqual(result["spec"]["containers"], [{"name": "only"}])
        self.assertEqual(result["spec"]["tolerations"], pod()["spec"]["tolerations"])
        self.assertEqual(obj, pod())

    def test_result_is_independent(self):
        """Changing the result does not change the original object."""
        obj = pod()
        result = apply_merge_patch(obj, {})
        result["metadata"]["labels"]["x"] = "y"
        self.assertEqual(obj, pod())

    def test_map_over_scalar(self):
        """A map patched over a scalar starts from an empty map, dropping nulls."""
        self.assertEqual(apply_merge_patch({"a": 1}, {"a": {"b": 1, "c": None}}), {"a": {"b": 1}})

    def test_bytes(self):
        """The patch may be bytes."""
        self.assertEqual(apply_merge_patch({"a": 1}, b'{"a": null}'), {})

    def test_not_an_object(self):
        """A merge patch that is not a JSON object is 400."""
        for document in ([1], "text", None, b"[]", b"{nope"):
            with self.assertRaises(StatusError) as raised:
                apply_merge_patch({}, document)
            self.assertEqual(raised.exception.code, 400)

    @settings(max_examples=200, deadline=None)
    @given(_documents, _documents)
    def test_round_trip(self, old, new):
        """Applying the merge-patch diff of two documents to the first yields the second."""
        self.assertEqual(apply_merge_patch(old, create_merge_patch(old, new)), new)

    @settings(max_examples=200, deadline=None)
    @given(_documents, _patches)
    def test_strategic_without_metadata_is_merge_patch(self, obj, patch):
        """With no list metadata, a strategic patch without directives is a merge patch."""
        self.assertEqual(apply_strategic_merge_patch(obj, patch, {}), apply_merge_patch(obj, patch))


class StrategicMergeTests(SynchronousTestCase):

    def test_maps_merge(self):
        """Maps merge recursively and null deletes a key."""
        result = smp(pod(), {"metadata": {"labels": {"tier": None, "new": "x"}}})
        self.assertEqual(result["metadata"]["labels"], {"app": "web", "new": "x"})

    def test_unlisted_lists_replaced(self):
        """Lists without a strategy (tolerations, args) are replaced whole."""
        result = smp(pod(), {"spec": {"tolerations": [{"key": "k2"}],
                                      "containers": [{"name": "app", "args": ["--b"]}]}})
        self.assertEqual(result["spec"]["tolerations"], [{"key": "k2"}])
        self.assertEqual(result["spec"]["containers"][0]["args"], ["--b"])

    def test_merge_by_key(self):
        """Elements merge by their key; new keys are appended in patch order."""
        result = smp(pod(), {"spec": {"containers": [
            {"name": "new", "image": "new:1"}, {"name": "app", "image": "app:2"}]}})
        containers = result["spec"]["containers"]
        self.assertEqual([c["name"] for c in containers], ["app", "sidecar", "new"])
        self.assertEqual(containers[0]["image"], "app:2")
        self.assertEqual(containers[0]["env"], pod()["spec"]["containers"][0]["env"])

    def test_nested_merge_lists(self):
        """Container env merges by name and ports by containerPort."""
        result = smp(pod(), {"spec": {"containers": [{"name": "app",
            "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
            "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}]}]}})
        app = result["spec"]["containers"][0]
        self.assertEqual(app["env"], [{"name": "A", "value": "1"}, {"name": "B", "value": "3"},
                                      {"name": "C", "value": "4"}])
        self.assertEqual(app["ports"], [{"containerPort": 80, "protocol": "TCP", "name": "http"},
                                        {"containerPort": 443}])

    def test_primitive_union(self):
        """A merging list of scalars is a union: original order, then new values."""
        result = smp(pod(), {"metadata": {"finalizers": ["c.orch.io/z", "a.orch.io/x"]}})
        self.assertEqual(result["metadata"]["finalizers"],
                         ["a.orch.io/x", "b.orch.io/y", "c.orch.io/z"])

    def test_owner_references_by_uid(self):
        """Owner references merge by uid."""
        obj = {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}}
        result = smp(obj, {"metadata": {"ownerReferences": [{"uid": "1", "controller": True},
                                                            {"uid": "2", "name": "b"}]}})
        self.assertEqual(result["metadata"]["ownerReferences"],
                         [{"uid": "1", "name": "a", "controller": True}, {"uid": "2", "name": "b"}])

    def test_replace_map(self):
        """C{$patch: replace} in a map replaces the map."""
        result = smp(pod(), {"metadata": {"labels": {"$patch": "replace", "only": "x"}}})
        self.assertEqual(result["metadata"]["labels"], {"only": "x"})

    def test_delete_map(self):
        """C{$patch: delete} in a map deletes it; at the root, everything."""
        result = smp(pod(), {"metadata": {"labels": {"$patch": "delete"}}})
        self.assertNotIn("labels", result["metadata"])
        self.assertEqual(smp(pod(), {"$patch": "delete"}), {})

    def test_merge_directive(self):
        """C{$patch: merge} is the default and leaves no trace."""
        result = smp(pod(), {"metadata": {"labels": {"$patch": "merge", "x": "y"}}})
        self.assertEqual(result["metadata"]["labels"], {"app": "web", "tier": "fe", "x": "y"})

    def test_replace_list(self):
        """A C{$patch: replace} element replaces the whole list with the others."""
        result = smp(pod(), {"spec": {"containers": [{"name": "solo"}, {"$patch": "replace"}]}})
        self.assertEqual(result["spec"]["containers"], [{"name": "solo"}])

    def test_delete_element(self):
        """A C{$patch: delete} element removes the element with that key."""
        result = smp(pod(), {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}})
        self.assertEqual([c["name"] for c in result["spec"]["containers"]], ["app"])

    def test_unknown_directive(self):
        """An unknown C{$patch} value is a 400, in a map or a list."""
        for patch in ({"metadata": {"labels": {"$patch": "frob"}}},
                      {"spec": {"containers": [{"name": "app", "$patch": "frob"}]}}):
            with self.assertRaises(StatusError) as raised:
                smp(pod(), patch)
            self.assertEqual(raised.exception.code, 400)
            self.assertTrue(raised.exception.message.startswith("unknown patch type: frob in map: "))

    def test_retain_keys(self):
        """C{$retainKeys} drops the fields it does not name (Deployment strategy)."""
        deployment = {"spec": {"strategy": {"type": "RollingUpdate",
                                            "rollingUpdate": {"maxSurge": 1}}}}
        result = smp(deployment, {"spec": {"strategy": {"$retainKeys": ["type"],
                                                        "type": "Recreate"}}},
                     patch_schema_for("apps", "Deployment"))
        self.assertEqual(result["spec"]["strategy"], {"type": "Recreate"})

    def test_retain_keys_errors(self):
        """A C{$retainKeys} that is not a list, or omits a patched key, is 400."""
        for patch in ({"spec": {"$retainKeys": "type"}},
                      {"spec": {"$retainKeys": ["type"], "replicas": 2}}):
            with self.assertRaises(StatusError) as raised:
                smp({"spec": {}}, patch, {})
            self.assertEqual((raised.exception.code, raised.exception.message),
                             (400, "invalid patch format of retainKeys"))

    def test_set_element_order(self):
        """C{$setElementOrder} orders the merged list."""
        result = smp(pod(), {"spec": {
            "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "new"}, {"name": "app"}],
            "containers": [{"name": "new", "image": "n"}]}})
        self.assertEqual([c["name"] for c in result["spec"]["containers"]],
                         ["sidecar", "new", "app"])

    def test_set_element_order_primitives(self):
        """C{$setElementOrder} also orders a list of scalars."""
        result = smp(pod(), {"metadata": {
            "$setElementOrder/finalizers": ["b.orch.io/y", "a.orch.io/x"]}})
        self.assertEqual(result["metadata"]["finalizers"], ["b.orch.io/y", "a.orch.io/x"])

    def test_set_element_order_mismatch(self):
        """Patch items out of the C{$setElementOrder} order are a 400."""
        with self.assertRaises(StatusError) as raised:
            smp(pod(), {"spec": {"$setElementOrder/containers": [{"name": "app"}],
                                 "containers": [{"name": "other"}]}})
        self.assertEqual(raised.exception.code, 400)

    def test_delete_from_primitive_list(self):
        """C{$deleteFromPrimitiveList} removes values from a list of scalars."""
        result = smp(pod(), {"metadata": {
            "$deleteFromPrimitiveList/finalizers": ["a.orch.io/x", "gone"],
            "finalizers": ["c.orch.io/z"]}})
        self.assertEqual(result["metadata"]["finalizers"], ["b.orch.io/y", "c.orch.io/z"])

    def test_delete_from_primitive_list_errors(self):
        """A malformed deletion list is a 400."""
        for patch in ({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}},
                      {"metadata": {"$deleteFromPrimitiveListfinalizers": ["a"]}}):
            with self.assertRaises(StatusError) as raised:
                smp(pod(), patch)
            self.assertEqual((raised.exception.code, raised.exception.message),
                             (400, "invalid patch format of primitive list"))

    def test_missing_merge_key(self):
        """A merging element without its merge key is a 400."""
        with self.assertRaises(StatusError) as raised:
            smp(pod(), {"spec": {"volumes": [{"hostPath": {"path": "/x"}}]}})
        self.assertEqual(raised.exception.code, 400)
        self.assertEqual(raised.exception.message,
                         "map: map[hostPath:map[path:/x]] does not contain declared merge key: name")

    def test_list_of_lists(self):
        """A list of lists in a merging list is a 422."""
        with self.assertRaises(StatusError) as raised:
            smp(pod(), {"metadata": {"finalizers": [["a"]]}})
        self.assertEqual((raised.exception.code, raised.exception.message),
                         (422, "lists of lists are not supported"))

    def test_not_an_object(self):
        """A patch that is not an object is 400."""
        for document in ([], b"[1]", b"{"):
            with self.assertRaises(StatusError) as raised:
                smp(pod(), document)
            self.assertEqual(raised.exception.code, 400)

    def test_no_directives_in_result(self):
        """Directives inside new values are applied, never stored."""
        result = smp({"spec": {}}, {"spec": {
            "containers": [{"name": "a", "env": [{"name": "X", "$patch": "delete"}]},
                           {"name": "b", "resources": {"$patch": "replace", "limits": {}}}],
            "tolerations": [{"key": "k", "$retainKeys": ["key"]}, {"$patch": "replace"}],
        }})
        self.assertNotIn("$", json.dumps(result))
        self.assertEqual(result["spec"]["containers"],
                         [{"name": "a", "env": []}, {"name": "b", "resources": {"limits": {}}}])

    def test_inputs_untouched(self):
        """Neither the object nor the patch is modified."""
        obj = pod()
        patch = {"spec": {"containers": [{"name": "app", "image": "x"}]},
                 "metadata": {"$deleteFromPrimitiveList/finalizers": ["a.orch.io/x"]}}
        before = copy.deepcopy(patch)
        smp(obj, patch)
        self.assertEqual((obj, patch), (pod(), before))


class SchemaTests(SynchronousTestCase):

    def lookup(self, group, kind, path):
        field = None
        schema = patch_schema_for(group, kind)
        for name in path.split("."):
            field = schema[name]
            schema = field.fields
        return field

    def test_pod_template_paths(self):
        """Every workload merges its pod template's containers by name."""
        for group, kind, path in [
            ("", "Pod", "spec.containers"),
            ("", "PodTemplate", "template.spec.containers"),
            ("", "ReplicationController", "spec.template.spec.containers"),
            ("apps", "Deployment", "spec.template.spec.initContainers"),
            ("apps", "ReplicaSet", "spec.template.spec.containers"),
            ("apps", "StatefulSet", "spec.template.spec.ephemeralContainers"),
            ("apps", "DaemonSet", "spec.template.spec.containers"),
            ("batch", "Job", "spec.template.spec.containers"),
            ("batch", "CronJob", "spec.jobTemplate.spec.template.spec.containers"),
        ]:
            field = self.lookup(group, kind, path)
            self.assertEqual((field.merge, field.key), (True, "name"), (kind, path))
            self.assertEqual(field.fields["volumeMounts"].key, "mountPath")
            self.assertEqual(field.fields["volumeDevices"].key, "devicePath")

    def test_keys(self):
        """The merge keys named by upstream's tags."""
        for group, kind, path, key in [
            ("", "Pod", "spec.volumes", "name"),
            ("", "Pod", "spec.imagePullSecrets", "name"),
            ("", "Pod", "spec.hostAliases", "ip"),
            ("", "Pod", "status.conditions", "type"),
            ("", "Node", "status.conditions", "type"),
            ("", "Node", "status.addresses", "type"),
            ("", "Service", "spec.ports", "port"),
            ("", "Namespace", "status.conditions", "type"),
            ("apps", "Deployment", "status.conditions", "type"),
            ("batch", "Job", "status.conditions", "type"),
            ("rbac.authorization.orch.io", "ClusterRole", "metadata.ownerReferences", "uid"),
        ]:
            self.assertEqual(self.lookup(group, kind, path).key, key, (kind, path))
        self.assertTrue(self.lookup("", "ConfigMap", "metadata.finalizers").merge)

    def test_replaced_lists(self):
        """Tolerations, args and command have no strategy."""
        spec = patch_schema_for("", "Pod")["spec"].fields
        self.assertNotIn("tolerations", spec)
        self.assertNotIn("args", spec["containers"].fields)
        self.assertNotIn("command", spec["containers"].fields)

    def test_other_kinds(self):
        """Unlisted kinds get ObjectMeta rules and nothing else."""
        self.assertEqual(set(patch_schema_for("rbac.authorization.orch.io", "Role")), {"metadata"})

    def test_custom_schema(self):
        """Callers may pass their own declarative schema."""
        result = apply_strategic_merge_patch(
            {"items": [{"id": 1, "v": "a"}]}, {"items": [{"id": 2}]}, {"items": merge_list("id")})
        self.assertEqual(result, {"items": [{"id": 1, "v": "a"}, {"id": 2}]})
