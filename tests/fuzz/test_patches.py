"""
The patch engines and server-side apply on generated objects and patches:
JSON patch, merge patch (against RFC 7386 itself), strategic merge patch
with directives, field sets, and the field manager's update and apply.
"""

import copy

from hypothesis import example, given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.fieldpath import (
    difference, intersection, parse_fields, path_string, paths, union,
)
from orchd.api.managedfields import _read_request
from orchd.api.patch import apply_json_patch, apply_merge_patch, apply_strategic_merge_patch
from tests.builtinkinds import KindFieldManagers, patch_schema_for
from tests.fuzz.support import as_decoded, bounded, fuzz, json_objects, json_values, scalars

T0 = 1714557600

# -- shaped objects ---------------------------------------------------------------
# Workload-shaped values reach the schema's merge keys and directives; junk
# (any JSON value) may stand anywhere instead.

_NAMES = st.sampled_from(["a", "b", "c", ""])


def _or_junk(strategy, leaves=4):
    return st.one_of(strategy, strategy, strategy, json_values(leaves))


_DIRECTIVES = st.fixed_dictionaries({}, optional={
    "$patch": st.sampled_from(["delete", "replace", "merge", "bogus", 1, None]),
    "$retainKeys": st.one_of(st.lists(st.sampled_from(["name", "image", "type", "x"]),
                                      max_size=3), scalars),
    "$setElementOrder/containers": st.one_of(
        st.lists(st.fixed_dictionaries({"name": _NAMES}), max_size=3), scalars),
    "$setElementOrder/finalizers": st.one_of(st.lists(_NAMES, max_size=3), scalars),
    "$deleteFromPrimitiveList/finalizers": st.one_of(st.lists(_NAMES, max_size=3), scalars),
    "$setElementOrder/": st.lists(_NAMES, max_size=2),
    "$deleteFromPrimitiveList": st.lists(_NAMES, max_size=2),
})


def _with_directives(strategy, directives):
    if not directives:
        return strategy
    return st.tuples(strategy, _DIRECTIVES).map(
        lambda pair: {**pair[0], **pair[1]} if isinstance(pair[0], dict) else pair[0])


def workloads(directives=False):
    """Deployment-shaped objects (or patches, with C{directives})."""
    d = directives

    def obj(fixed=None, optional=None):
        strategy = st.fixed_dictionaries(fixed or {}, optional=optional or {})
        return _or_junk(_with_directives(strategy, d))

    items = st.lists(obj(optional={"name": _or_junk(_NAMES), "value": st.text(max_size=2)}),
                     max_size=3)
    ports = st.lists(obj(optional={"containerPort": st.sampled_from([80, 443, "80", None]),
                                   "protocol": st.sampled_from(["TCP", "UDP"]),
                                   "name": _NAMES}), max_size=3)
    container = obj({"name": _or_junk(_NAMES)}, {
        "image": st.text(max_size=3), "env": _or_junk(items), "ports": _or_junk(ports),
        "args": st.lists(st.text(max_size=2), max_size=2)})
    pod_spec = obj(optional={
        "containers": _or_junk(st.lists(container, max_size=3)),
        "initContainers": st.lists(container, max_size=2),
        "volumes": _or_junk(items), "tolerations": _or_junk(items)})
    meta = obj(optional={
        "name": st.just("d"), "labels": st.dictionaries(_NAMES, st.one_of(_NAMES, st.none())),
        "finalizers": _or_junk(st.lists(_NAMES, max_size=3)),
        "ownerReferences": _or_junk(st.lists(obj(optional={"uid": _NAMES}), max_size=2)),
        "annotations": st.dictionaries(_NAMES, st.text(max_size=3), max_size=2)})
    strategy = obj(optional={"type": st.sampled_from(["Recreate", "RollingUpdate"]),
                             "rollingUpdate": json_values(3)})
    spec = obj(optional={"replicas": st.integers(0, 3), "strategy": strategy,
                         "template": obj(optional={"metadata": meta, "spec": pod_spec})})
    return st.fixed_dictionaries({"apiVersion": st.just("apps/v1"),
                                  "kind": st.just("Deployment")},
                                 optional={"metadata": meta, "spec": spec,
                                           "status": json_values(4)})


def rfc7386(target, patch):
    """RFC 7386, section 2, word for word."""
    if isinstance(patch, dict):
        target = dict(target) if isinstance(target, dict) else {}
        for name, value in patch.items():
            if value is None:
                target.pop(name, None)
            else:
                target[name] = rfc7386(target.get(name), value)
        return target
    return patch


# -- JSON patch -------------------------------------------------------------------

_POINTERS = st.one_of(
    st.sampled_from(["", "/", "/a", "/a/b", "/a/0", "/a/-", "/0", "/-", "/a~1b", "/a~0b", "/~2",
                     "/a/01", "/a/-1", "/a/99999999999999999999999", "/spec/template",
                     "/metadata/labels/x", "a", "//", "/a/b/c/d/e"]),
    st.lists(st.sampled_from(["a", "b", "0", "1", "-", "metadata", "spec", "~1", "~"]),
             max_size=4).map(lambda parts: "".join("/" + p for p in parts)),
    st.text(max_size=8))

_OPERATIONS = st.fixed_dictionaries(
    {"op": st.one_of(st.sampled_from(["add", "remove", "replace", "move", "copy", "test"]),
                     scalars)},
    optional={"path": st.one_of(_POINTERS, scalars), "from": st.one_of(_POINTERS, scalars),
              "value": json_values(6)})


class JSONPatchTests(SynchronousTestCase):
    @fuzz(400)
    @given(json_values(20), st.one_of(st.lists(_OPERATIONS, max_size=4), json_values(6)))
    @example({"a": [1]}, [{"op": "add", "path": "/a/99999999999999999999999", "value": 1}])
    @example({"a": [1]}, [{"op": "move", "from": "/a", "path": "/a/0"}])
    @example({"a": 1}, [{"op": "copy", "from": "/a", "path": "/a/b"}])
    def test_any_operations(self, obj, operations):
        """Any operation list (or other value) patches, or is a 400, 413 or 422."""
        before = copy.deepcopy(obj)
        bounded(self, apply_json_patch, obj, operations)
        self.assertEqual(obj, before)

    @fuzz(200)
    @given(json_objects(20), st.text(max_size=6), json_values(8))
    def test_add_then_remove(self, obj, key, value):
        """Adding a member and removing it again gives the object back."""
        pointer = "/" + key.replace("~", "~0").replace("/", "~1")
        ops = [{"op": "add", "path": pointer, "value": value},
               {"op": "test", "path": pointer, "value": value},
               {"op": "remove", "path": pointer}]
        outcome = bounded(self, apply_json_patch, obj, ops)
        self.assertIsNone(outcome.error)
        expected = {k: v for k, v in obj.items() if k != key}
        self.assertEqual(outcome.value, expected)


class MergePatchTests(SynchronousTestCase):
    @fuzz(400)
    @given(json_values(20), json_objects(20))
    def test_rfc7386(self, target, patch):
        """A merge patch gives what RFC 7386's own algorithm gives."""
        outcome = bounded(self, apply_merge_patch, target, patch)
        self.assertEqual(outcome.value, rfc7386(target, patch))

    @fuzz(200)
    @given(json_values(20), json_values(8))
    def test_not_an_object(self, target, patch):
        """A patch that is not an object is a 400; any object applies."""
        outcome = bounded(self, apply_merge_patch, target, patch)
        self.assertEqual(outcome.error is None, isinstance(patch, dict))


class StrategicMergePatchTests(SynchronousTestCase):
    @fuzz(400)
    @given(workloads(), workloads(directives=True),
           st.sampled_from([("apps", "Deployment"), ("", "Pod"), ("", "ConfigMap"),
                            ("", "Node"), ("", "Service")]))
    @example({"spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}},
             {"spec": {"template": {"spec": {"containers": [[1]]}}}}, ("apps", "Deployment"))
    @example({"metadata": {"finalizers": ["a"]}},
             {"metadata": {"$setElementOrder/finalizers": [{"a": 1}, [2]],
                           "finalizers": ["b"]}}, ("apps", "Deployment"))
    def test_any_patch(self, obj, patch, kind):
        """Any patch on any workload applies, or is a 400 or a 422; the inputs stay as they were."""
        before = copy.deepcopy((obj, patch))
        schema = patch_schema_for(*kind)
        outcome = bounded(self, apply_strategic_merge_patch, obj, patch, schema)
        self.assertEqual((obj, patch), before)
        if outcome.error is None:
            self.assertIsInstance(outcome.value, dict)

    @fuzz(200)
    @given(json_objects(15), json_objects(15))
    def test_plain_is_merge_patch(self, obj, patch):
        """Without list metadata or directives, a strategic patch is a merge patch."""
        if any(isinstance(k, str) and k.startswith("$") for k in _all_keys(patch)):
            return
        ours = bounded(self, apply_strategic_merge_patch, obj, patch, {})
        if ours.error is None:
            self.assertEqual(ours.value, rfc7386(obj, patch))


def _all_keys(value):
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _all_keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from _all_keys(item)


# -- field sets and the field manager ---------------------------------------------

_ELEMENTS = st.one_of(
    st.sampled_from([".", "f:a", "f:b", "f:", "k:{\"name\":\"a\"}", "k:{}", "k:[1]", "k:nope",
                     "v:1", "v:\"a\"", "v:[1,{\"a\":null}]", "v:", "i:0", "i:-1", "i:x",
                     "i:99999999999999999999", "x:1", "", "f", "k:" + "[" * 200 + "]" * 200]),
    st.text(max_size=6))
field_sets = st.recursive(st.just({}), lambda inner: st.dictionaries(
    _ELEMENTS, st.one_of(inner, json_values(3)), max_size=4), max_leaves=15)


class FieldSetTests(SynchronousTestCase):
    @fuzz(400)
    @given(field_sets)
    @example({"i:99999999999999999999": {}})
    @example({"v:1e400": {}})
    def test_parse_fields(self, fields):
        """Any fieldsV1 value reads into a set (printable path by path) or is a ValueError."""
        outcome = bounded(self, parse_fields, fields, errors=ValueError)
        if outcome.error is not None:
            return
        parsed = outcome.value
        for path in paths(parsed):
            path_string(path)
        self.assertEqual(union(parsed, parsed), parsed)
        self.assertEqual(paths(difference(parsed, parsed)), [])
        self.assertEqual(parse_fields(parsed), parsed)
        self.assertEqual(set(paths(intersection(parsed, parsed))), set(paths(parsed)))


_MANAGED = st.one_of(
    st.none(), json_values(6),
    st.lists(st.fixed_dictionaries({}, optional={
        "manager": st.one_of(_NAMES, scalars), "operation": st.sampled_from(["Apply", "Update",
                                                                             "x", None]),
        "apiVersion": st.sampled_from(["apps/v1", "", "v1"]),
        "time": st.sampled_from(["2024-05-01T10:00:00Z", "nope", "2024-05-01T10:00:00", 5]),
        "fieldsType": st.sampled_from(["FieldsV1", "x"]),
        "fieldsV1": field_sets, "subresource": st.sampled_from(["", "status", 1])}),
        max_size=3))


def _with_managed(obj, managed):
    if managed is None or not isinstance(obj.get("metadata"), dict):
        return obj
    obj = copy.deepcopy(obj)
    obj["metadata"]["managedFields"] = managed
    return obj


class FieldManagerTests(SynchronousTestCase):
    def setUp(self):
        self.manager = KindFieldManagers(lambda: T0)

    def check_entries(self, obj):
        """What the manager writes, it reads back as a client's managedFields."""
        entries = (obj.get("metadata") or {}).get("managedFields")
        if entries is not None:
            _read_request(entries)

    @fuzz(300)
    @given(st.one_of(st.none(), workloads()), workloads(), _MANAGED,
           st.sampled_from(["", "status"]))
    def test_update(self, old, new, managed, subresource):
        """Any create or update, with any managedFields sent, records well-formed entries."""
        old, new = as_decoded(old), as_decoded(_with_managed(new, managed))
        before = copy.deepcopy((old, new))
        outcome = bounded(self, self.manager.update, old, new, "m", "apps/v1", "apps",
                          "Deployment", subresource)
        self.assertEqual((old, new), before)
        if outcome.error is None:
            self.check_entries(outcome.value)

    @fuzz(300)
    @given(st.one_of(st.none(), workloads()), workloads(), st.booleans(),
           st.sampled_from(["m", "kubectl"]))
    def test_apply(self, live, applied, force, manager):
        """Any configuration applies over any object, or is refused with a 4xx."""
        live, applied = as_decoded(live), as_decoded(applied)
        if live is not None:
            live = self.manager.update(None, live, "creator", "apps/v1", "apps", "Deployment")
        before = copy.deepcopy((live, applied))
        outcome = bounded(self, self.manager.apply, live, applied, manager, force, "apps/v1",
                          "apps", "Deployment")
        self.assertEqual((live, applied), before)
        if outcome.error is not None:
            return
        result = outcome.value
        self.check_entries(result)
        again = bounded(self, self.manager.apply, result, applied, manager, False, "apps/v1",
                        "apps", "Deployment")
        self.assertIsNone(again.error)
        # The object is the same; managedFields may not be (an empty map the
        # configuration sets is no field of its set, but is one of the
        # "before-first-apply" set made from an object without entries).
        self.assertEqual(_without_managed(again.value), _without_managed(result))


def _without_managed(obj):
    meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    return {**obj, "metadata": meta}
