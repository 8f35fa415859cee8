"""Tests for L{orchd.api.fieldvalidation} and L{orchd.api.strictdecode}."""

import copy

from twisted.trial.unittest import SynchronousTestCase

from orchd.api import fieldvalidation, schemas
from orchd.api.errors import StatusError
from orchd.api.fieldvalidation import (
    duplicate_field_message, prune_unknown_fields, strict_error, unknown_field_message,
)
from orchd.api.kinds import KindInfo
from orchd.api import codecs, strictdecode
from orchd.api.strictdecode import duplicate_fields
from orchd.registry.kinds.builtin import KINDS

RBAC = "rbac.authorization.orch.io"


def prune(obj, group, version, kind):
    """Prune as the server does an object of a built-in kind, or of its list kind."""
    for info in KINDS:
        if (info.group, info.version) == (group, version) and kind in (info.kind, info.list_kind):
            return prune_unknown_fields(obj, info, listing=kind == info.list_kind)
    return prune_unknown_fields(obj, KindInfo(group, version, kind.lower() + "s", kind, True,
                                              schema=None))


def cluster_role(**extra):
    role = {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "reader", "labels": {"a": "b"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x",
                                          "uid": "1"}]},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
                  {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}],
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]},
    }
    role.update(extra)
    return role


class PruneTests(SynchronousTestCase):
    def test_known_untouched(self):
        """An object with only known fields is reported clean and left exactly as it was."""
        role = cluster_role()
        before = copy.deepcopy(role)
        self.assertEqual(prune(role, RBAC, "v1", "ClusterRole"), [])
        self.assertEqual(role, before)
        self.assertIs(role["rules"][0]["verbs"], role["rules"][0]["verbs"])

    def test_unknown_fields(self):
        """Unknown fields at any depth are removed and reported with upstream's paths."""
        role = cluster_role(extra=1)
        role["metadata"]["bogus"] = True
        role["metadata"]["ownerReferences"][0]["zone"] = "a"
        role["rules"][1]["verbz"] = ["get"]
        role["aggregationRule"]["clusterRoleSelectors"][0]["matchFields"] = {}
        role["aggregationRule"]["clusterRoleSelectors"][0]["matchExpressions"] = [
            {"key": "k", "operator": "Exists", "valuez": []}]
        expected = copy.deepcopy(cluster_role())
        expected["aggregationRule"]["clusterRoleSelectors"][0]["matchExpressions"] = [
            {"key": "k", "operator": "Exists"}]
        found = prune(role, RBAC, "v1", "ClusterRole")
        self.assertEqual(found, [
            "metadata.ownerReferences[0].zone",
            "metadata.bogus",
            "rules[1].verbz",
            "aggregationRule.clusterRoleSelectors[0].matchFields",
            "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].valuez",
            "extra",
        ])
        self.assertEqual(role, expected)

    def test_binding(self):
        """Struct fields of a binding are checked; the type and metadata are always known."""
        binding = {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "b"},
                   "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "r", "x": 1},
                   "subjects": [{"kind": "User", "name": "alice", "uid": "7"}]}
        self.assertEqual(prune(binding, RBAC, "v1", "ClusterRoleBinding"),
                         ["roleRef.x", "subjects[0].uid"])
        self.assertEqual(binding["subjects"], [{"kind": "User", "name": "alice"}])

    def test_core_kinds(self):
        """Full core kinds: config maps, services, nodes."""
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                      "data": {"a": "b", "spec": "x"}, "spec": {"foo": 1}}
        self.assertEqual(prune(config_map, "", "v1", "ConfigMap"), ["spec"])
        self.assertEqual(config_map["data"], {"a": "b", "spec": "x"})
        service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                   "spec": {"ports": [{"port": 80, "targetPort": "http", "foo": 1}],
                            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 5, "x": 1}},
                            "internalTrafficPolicy": "Local", "bar": 2},
                   "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4", "y": 1}]}}}
        self.assertEqual(prune(service, "", "v1", "Service"), [
            "spec.ports[0].foo", "spec.sessionAffinityConfig.clientIP.x", "spec.bar",
            "status.loadBalancer.ingress[0].y"])
        self.assertEqual(service["spec"]["ports"], [{"port": 80, "targetPort": "http"}])

    def test_node_status_keeps_unknown(self):
        """Node status keeps fields newer agents report, but its known parts are checked."""
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
                "spec": {"unschedulable": True, "future": 1},
                "status": {"newThing": {"a": 1}, "capacity": {"cpu": "2"},
                           "nodeInfo": {"kubeletVersion": "v1", "newInfo": "x"},
                           "addresses": [{"type": "InternalIP", "address": "10.0.0.1", "z": 1}]}}
        self.assertEqual(prune(node, "", "v1", "Node"),
                         ["spec.future", "status.addresses[0].z"])
        self.assertEqual(node["status"]["newThing"], {"a": 1})
        self.assertEqual(node["status"]["nodeInfo"]["newInfo"], "x")

    def test_preserved_subtree(self):
        """Nothing inside an embedded object (ControllerRevision data) is pruned."""
        revision = {"apiVersion": "apps/v1", "kind": "ControllerRevision",
                    "metadata": {"name": "r"}, "revision": 2,
                    "data": {"spec": {"anything": [{"goes": True}]}, "x": 1}}
        before = copy.deepcopy(revision)
        self.assertEqual(prune(revision, "apps", "v1", "ControllerRevision"), [])
        self.assertEqual(revision, before)

    def test_loose_kinds(self):
        """Loose kinds keep every field but those of their metadata."""
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                      "metadata": {"name": "d", "bogus": 1},
                      "spec": {"whatever": {"x": [1]}}, "status": {"y": 1}, "extra": True}
        self.assertEqual(prune(deployment, "apps", "v1", "Deployment"),
                         ["metadata.bogus"])
        self.assertEqual(set(deployment), {"apiVersion", "kind", "metadata", "spec", "status",
                                           "extra"})
        self.assertEqual(deployment["spec"], {"whatever": {"x": [1]}})

    def test_every_kind(self):
        """Every kind of the table can be pruned; type fields and metadata are always known."""
        for info in KINDS:
            obj = {"apiVersion": info.api_version, "kind": info.kind,
                   "metadata": {"name": "x", "labels": {"a": "b"}}}
            self.assertEqual(prune_unknown_fields(obj, info), [],
                             info)

    def test_reviews(self):
        """Access reviews are full: v1 says groups, v1beta1 says group."""
        review = {"apiVersion": "authorization.orch.io/v1", "kind": "SubjectAccessReview",
                  "spec": {"user": "u", "group": ["g"],
                           "resourceAttributes": {"verb": "get", "resource": "pods", "q": 1}}}
        self.assertEqual(prune(review, "authorization.orch.io", "v1",
                                              "SubjectAccessReview"),
                         ["spec.group", "spec.resourceAttributes.q"])
        review = {"spec": {"user": "u", "group": ["g"]}}
        self.assertEqual(prune(review, "authorization.orch.io", "v1beta1",
                                              "SubjectAccessReview"), [])

    def test_lists(self):
        """List kinds check their items."""
        listing = {"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {"x": 1},
                   "items": [{"metadata": {"name": "a"}, "data": {}, "y": 2}]}
        self.assertEqual(prune(listing, "", "v1", "ConfigMapList"),
                         ["metadata.x", "items[0].y"])

    def test_unknown_kind(self):
        """Kinds the table does not have, and values that are not objects, are left alone."""
        widget = {"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"a": 1}}
        self.assertEqual(prune(widget, "example.com", "v1", "Widget"), [])
        self.assertEqual(widget["spec"], {"a": 1})
        self.assertEqual(prune([1], "", "v1", "ConfigMap"), [])

    def test_wrong_types_ignored(self):
        """A value of the wrong type is for validation to report, not pruning."""
        role = cluster_role(rules={"a": 1}, metadata=["x"])
        self.assertEqual(prune(role, RBAC, "v1", "ClusterRole"), [])
        role = cluster_role(rules=[["nested"], "x", None])
        self.assertEqual(prune(role, RBAC, "v1", "ClusterRole"), [])

    def test_map_of_objects(self):
        """Keys of a map of objects join the path like fields."""
        pool = {"V": schemas.obj({"a": schemas.string()})}
        node = fieldvalidation._compile(
            schemas.obj({"m": {"type": "object", "additionalProperties": {"$ref": "V"}},
                         "n": {"type": "array", "items": {"type": "array",
                                                          "items": {"$ref": "V"}}}}),
            pool, {})
        value = {"m": {"k1": {"a": "x", "b": 1}}, "n": [[{"a": "y", "c": 2}]]}
        found = []
        fieldvalidation._prune_object(value, node, "", found)
        self.assertEqual(found, ["m.k1.b", "n[0][0].c"])
        self.assertEqual(value, {"m": {"k1": {"a": "x"}}, "n": [[{"a": "y"}]]})


class MessageTests(SynchronousTestCase):
    def test_messages(self):
        self.assertEqual(unknown_field_message("spec.foo"), 'unknown field "spec.foo"')
        self.assertEqual(duplicate_field_message("metadata.name"),
                         'duplicate field "metadata.name"')

    def test_strict_error(self):
        """The 400 of fieldValidation=Strict, with every message joined."""
        error = strict_error("ClusterRole", "v1", [unknown_field_message("foo"),
                                                   duplicate_field_message("kind")])
        self.assertIsInstance(error, StatusError)
        self.assertEqual((error.code, error.reason), (400, "BadRequest"))
        self.assertEqual(error.message,
                         'ClusterRole in version "v1" cannot be handled as a ClusterRole: '
                         'strict decoding error: unknown field "foo", duplicate field "kind"')
        self.assertEqual(error.to_status()["message"], error.message)


class DuplicateTests(SynchronousTestCase):
    def test_none(self):
        """Bodies without duplicates, and bodies that do not parse, have none."""
        self.assertEqual(duplicate_fields(b'{"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}]}',
                                          "application/json"), [])
        self.assertEqual(duplicate_fields(b'{"a": 1, "a"', "application/json"), [])
        self.assertEqual(duplicate_fields(b"a: [", "application/yaml"), [])
        self.assertEqual(duplicate_fields(b"a: 1\n---\nb: 2\n", "application/yaml"), [])
        self.assertEqual(duplicate_fields(b"", None), [])

    def test_strings_that_look_like_keys(self):
        """Quotes, colons and backslashes inside strings neither hide nor invent duplicates."""
        self.assertEqual(duplicate_fields(
            b'{"a": "x\\": 1", "b" : "\\\\", "c\\"": {"d": ["e:", {"f": "\\"g\\":"}]}}'), [])
        self.assertEqual(duplicate_fields(b'{"a": "\\"a\\":", "a" : 2}'), ["a"])

    #: Bodies whose strings hold colons, quotes and backslashes, and keys
    #: spelt with escapes: (body, the duplicates in it).
    TRICKY = [
        (b'{"a": "x\\": 1", "b" : "\\\\", "c\\"": {"d": ["e:", {"f": "\\"g\\":"}]}}', []),
        (b'{"a": "\\"a\\":", "a" : 2}', ["a"]),
        (b'{"a": "b:", "a": 1}', ["a"]),
        (b'{"a": 1, "\\u0061": 2}', ["a"]),
        (b'{"a\\\\": "\\\\\\"::", "b": {"c": ":", "c": ":"}}', ["b.c"]),
        (b'{"x": "\\\\", "y": "\\\\\\\\\\":\\\\", "z": [1, {"t": "12:00"}]}', []),
        (b'{"spec": {"a": 1, "a": 2}, "spec": {"b": 1}}', ["spec.a", "spec"]),
        (b'{"a" :1,"b"\n:\t{}, "c": [[{}], {"d": null}]}', []),
        (b'[{"a": 1}, {"a": 1, "a": 2}]', ["[1].a"]),
    ]

    def test_decoded_body(self):
        """Decoding a JSON body finds the same duplicates as the decoder that tracks keys."""
        for body, expected in self.TRICKY:
            for text in (body, body.decode()):
                self.assertEqual(codecs.decode(text, codecs.JSON, duplicates=True)[1],
                                 expected, text)
                self.assertEqual(duplicate_fields(text), expected, text)

    def test_decoded_body_counted(self):
        """A decoded JSON body without duplicates is not decoded a second time to show it."""
        def refuse(*args, **kwargs):
            raise AssertionError("decoded again")

        self.patch(strictdecode.json, "loads", refuse)
        for body, expected in self.TRICKY:
            if not expected:
                self.assertEqual(codecs.decode(body, codecs.JSON, duplicates=True)[1], [])

    def test_json(self):
        """JSON duplicates at any depth, in document order, each path once."""
        body = (b'{"kind": "A", "metadata": {"name": "a", "name": "b", "labels": {"x": "1", '
                b'"x": "2", "x": "3"}}, "rules": [{"verbs": [], "verbs": []}, '
                b'[{"deep": 1, "deep": 2}]], "kind": "B"}')
        self.assertEqual(duplicate_fields(body, "application/json"), [
            "metadata.name", "metadata.labels.x", "rules[0].verbs", "rules[1][0].deep", "kind"])

    def test_json_shadowed_values(self):
        """Duplicates inside a value that a later duplicate replaces are found too."""
        body = b'{"spec": {"a": 1, "a": 2}, "spec": {"b": 1}}'
        self.assertEqual(duplicate_fields(body, "application/json"), ["spec.a", "spec"])

    def test_media_types(self):
        """JSON unless the media type names YAML; parameters and bytes are accepted."""
        yaml_only = b"a: 1\na: 2\n"
        self.assertEqual(duplicate_fields(yaml_only, "application/json"), [])
        for media_type in ("application/yaml", b"application/yaml; charset=utf-8",
                           "application/apply-patch+yaml", "text/yaml", "application/x-yaml",
                           "application/yml"):
            self.assertEqual(duplicate_fields(yaml_only, media_type), ["a"], media_type)
        json_body = b'{"a": 1, "a": 2}'
        for media_type in (None, "application/merge-patch+json",
                           "application/strategic-merge-patch+json", "application/yaml"):
            self.assertEqual(duplicate_fields(json_body, media_type), ["a"], media_type)

    def test_yaml(self):
        """YAML duplicates at any depth, with timestamps read as strings."""
        body = b"""\
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  labels:
    x: "1"
    x: "2"
  name: b
data:
  2001-01-01: one
  "2001-01-01": two
  list:
  - {a: 1, a: 2}
  - - b: 1
      b: 2
kind: Secret
"""
        self.assertEqual(duplicate_fields(body, "application/yaml"), [
            "metadata.labels.x", "metadata.name", "data.2001-01-01", "data.list[0].a",
            "data.list[1][0].b", "kind"])

    def test_yaml_keys_as_json(self):
        """YAML keys compare as the JSON keys they become."""
        self.assertEqual(duplicate_fields(b"1: a\n'1': b\ntrue: c\n'true': d\n",
                                          "application/yaml"), ["1", "true"])

    def test_yaml_aliases(self):
        """Aliased nodes are walked once; merge keys are not duplicates."""
        body = b"""\
base: &base {a: 1, a: 2}
copy: *base
merged:
  <<: *base
  a: 3
"""
        self.assertEqual(duplicate_fields(body, "application/yaml"), ["base.a"])
        bomb = b"a: &a [x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\n"
        self.assertEqual(duplicate_fields(bomb, "application/yaml"), [])


