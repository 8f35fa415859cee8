"""Tests for L{orchd.api.schemas} and the C{schemadefs_*} descriptions."""

import inspect

from twisted.trial.unittest import SynchronousTestCase

from orchd.api import (
    patchschema, schemadefs_base, schemadefs_core, schemadefs_groups, schemadefs_meta, schemas,
)
from orchd.registry.kinds.builtin import KINDS

FULL = {
    ("rbac.authorization.orch.io", "v1", "ClusterRole"),
    ("rbac.authorization.orch.io", "v1", "Role"),
    ("rbac.authorization.orch.io", "v1", "ClusterRoleBinding"),
    ("rbac.authorization.orch.io", "v1", "RoleBinding"),
    ("apps", "v1", "ControllerRevision"),
    ("", "v1", "ConfigMap"),
    ("", "v1", "Secret"),
    ("", "v1", "Namespace"),
    ("", "v1", "ServiceAccount"),
    ("", "v1", "Event"),
    ("", "v1", "Service"),
    ("", "v1", "Node"),
    ("coordination.orch.io", "v1", "Lease"),
    ("events.orch.io", "v1", "Event"),
    ("authentication.orch.io", "v1", "TokenReview"),
    ("authentication.orch.io", "v1beta1", "TokenReview"),
    ("authentication.orch.io", "v1", "SelfSubjectReview"),
    ("authorization.orch.io", "v1", "SubjectAccessReview"),
    ("authorization.orch.io", "v1beta1", "SubjectAccessReview"),
    ("authorization.orch.io", "v1", "SelfSubjectAccessReview"),
    ("authorization.orch.io", "v1", "LocalSubjectAccessReview"),
    ("authorization.orch.io", "v1", "SelfSubjectRulesReview"),
}


def schema_for(group, version, kind):
    """The definition of a kind (or list kind) of the table, or None."""
    for info in KINDS:
        if (info.group, info.version) == (group, version) and kind in (info.kind, info.list_kind):
            return schemas.kind_definitions(info)[kind == info.list_kind]
    return None


def all_definitions():
    """Every named definition, and those of every kind of the table and its list."""
    found = dict(schemas.named_definitions())
    for info in KINDS:
        kind, listing = schemas.kind_definitions(info)
        found[schemas.definition_name(info)] = kind
        found[schemas.definition_name(info, info.list_kind)] = listing
    return found


def resolve(schema):
    """The definition a property refers to (through list items), or the property itself."""
    if schema.get("type") == "array":
        schema = schema["items"]
    if "$ref" in schema:
        return all_definitions()[schema["$ref"]]
    return schema


def at(group, version, kind, path):
    """The schema at a dotted field path of a kind."""
    schema = schema_for(group, version, kind)
    for name in path.split("."):
        schema = resolve(schema)["properties"][name]
    return schema


def fields(group, version, kind, path=None):
    schema = schema_for(group, version, kind)
    if path:
        schema = at(group, version, kind, path)
    return set(resolve(schema)["properties"])


class CoverageTests(SynchronousTestCase):
    def test_every_kind_has_a_schema(self):
        """Every kind of the table, and its list, has a schema with its GVK."""
        for info in KINDS:
            schema = schema_for(info.group, info.version, info.kind)
            self.assertIsNotNone(schema, info)
            self.assertEqual(schema[schemas.GVK_EXTENSION],
                             [{"group": info.group, "version": info.version, "kind": info.kind}])
            self.assertTrue({"apiVersion", "kind", "metadata"} <= set(schema["properties"]))
            listing = schema_for(info.group, info.version, info.list_kind)
            self.assertEqual(listing["required"], ["items"])
        self.assertIsNone(schema_for("example.com", "v1", "Widget"))

    def test_full_kinds(self):
        """The full kinds are those the module docstring names; the others are loose."""
        self.assertEqual({(k.group, k.version, k.kind) for k in KINDS if k.schema.complete}, FULL)
        for info in KINDS:
            key = (info.group, info.version, info.kind)
            schema = schema_for(*key)
            self.assertEqual(info.schema.complete, key in FULL)
            if key in FULL:
                self.assertNotIn(schemas.PRESERVE, schema, key)
                self.assertTrue(schema.get("description"), key)
            else:
                self.assertIs(schema[schemas.PRESERVE], True, key)
                self.assertEqual(schema["properties"]["metadata"]["$ref"], schemas.OBJECT_META)
        for key in FULL:
            self.assertIn(key[2], schemas.__doc__)

    def test_references_resolve(self):
        """Every reference names a definition."""
        available = all_definitions()
        for name, definition in available.items():
            for target in schemas.references(definition):
                self.assertIn(target, available, name)

    def test_descriptions(self):
        """Every field of a full kind is described."""
        def check(schema, where, seen):
            for name, prop in schema.get("properties", {}).items():
                self.assertTrue(prop.get("description"), f"{where}.{name}")
                target = resolve(prop)
                if "$ref" in (prop.get("items") or prop) and id(target) not in seen:
                    seen.add(id(target))
                    check(target, f"{where}.{name}", seen)
        for key in FULL:
            check(schema_for(*key), key[2], set())

    def test_modules_small(self):
        """Each description module stays reviewable."""
        for module in (schemas, schemadefs_base, schemadefs_meta, schemadefs_core,
                       schemadefs_groups):
            self.assertLess(len(inspect.getsource(module).splitlines()), 500, module.__name__)


class FactTests(SynchronousTestCase):
    """Upstream facts the schemas carry over."""

    def test_policy_rule(self):
        rule = resolve(at("rbac.authorization.orch.io", "v1", "ClusterRole", "rules"))
        self.assertEqual(set(rule["properties"]),
                         {"apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"})
        self.assertEqual(rule["required"], ["verbs"])
        for name, prop in rule["properties"].items():
            self.assertEqual((prop["type"], prop["items"], prop["x-kubernetes-list-type"]),
                             ("array", {"type": "string"}, "atomic"), name)

    def test_rbac(self):
        rbac = "rbac.authorization.orch.io"
        self.assertEqual(fields(rbac, "v1", "ClusterRole"),
                         {"apiVersion", "kind", "metadata", "rules", "aggregationRule"})
        self.assertEqual(at(rbac, "v1", "ClusterRole", "rules")["x-kubernetes-list-type"], "atomic")
        selectors = at(rbac, "v1", "ClusterRole", "aggregationRule.clusterRoleSelectors")
        self.assertEqual((selectors["items"]["$ref"], selectors["x-kubernetes-list-type"]),
                         (schemas.LABEL_SELECTOR, "atomic"))
        for kind in ("ClusterRoleBinding", "RoleBinding"):
            binding = schema_for(rbac, "v1", kind)
            self.assertEqual(binding["required"], ["roleRef"])
            self.assertEqual(at(rbac, "v1", kind, "subjects")["x-kubernetes-list-type"], "atomic")
            role_ref = resolve(at(rbac, "v1", kind, "roleRef"))
            self.assertEqual(role_ref["required"], ["apiGroup", "kind", "name"])
            self.assertEqual(role_ref["x-kubernetes-map-type"], "atomic")
            subject = resolve(at(rbac, "v1", kind, "subjects"))
            self.assertEqual(set(subject["properties"]), {"kind", "name", "apiGroup", "namespace"})
            self.assertEqual(subject["required"], ["kind", "name"])

    def test_controller_revision(self):
        revision = schema_for("apps", "v1", "ControllerRevision")
        self.assertEqual(revision["required"], ["revision"])
        self.assertEqual((revision["properties"]["revision"]["type"],
                          revision["properties"]["revision"]["format"]), ("integer", "int64"))
        data = resolve(revision["properties"]["data"])
        self.assertIs(data[schemas.PRESERVE], True)
        self.assertNotIn(schemas.PRESERVE, revision)

    def test_lease(self):
        spec = fields("coordination.orch.io", "v1", "Lease", "spec")
        self.assertEqual(spec, {"holderIdentity", "leaseDurationSeconds", "acquireTime",
                                "renewTime", "leaseTransitions", "strategy", "preferredHolder"})
        renew = at("coordination.orch.io", "v1", "Lease", "spec.renewTime")
        self.assertEqual(renew["$ref"], schemas.MICRO_TIME)
        self.assertEqual(at("coordination.orch.io", "v1", "Lease",
                            "spec.leaseDurationSeconds")["format"], "int32")

    def test_service(self):
        """Every field of ServiceSpec, ServicePort and ServiceStatus."""
        self.assertEqual(fields("", "v1", "Service", "spec"), {
            "allocateLoadBalancerNodePorts", "clusterIP", "clusterIPs", "externalIPs",
            "externalName", "externalTrafficPolicy", "healthCheckNodePort",
            "internalTrafficPolicy", "ipFamilies", "ipFamilyPolicy", "loadBalancerClass",
            "loadBalancerIP", "loadBalancerSourceRanges", "ports", "publishNotReadyAddresses",
            "selector", "sessionAffinity", "sessionAffinityConfig", "trafficDistribution", "type"})
        self.assertEqual(fields("", "v1", "Service", "spec.ports"), {
            "appProtocol", "name", "nodePort", "port", "protocol", "targetPort"})
        self.assertEqual(at("", "v1", "Service", "spec.ports.targetPort")["$ref"],
                         schemas.INT_OR_STRING)
        self.assertEqual(at("", "v1", "Service", "spec.sessionAffinityConfig.clientIP"
                            ".timeoutSeconds")["format"], "int32")
        self.assertEqual(fields("", "v1", "Service", "status"), {"conditions", "loadBalancer"})
        self.assertEqual(at("", "v1", "Service", "spec.selector")["x-kubernetes-map-type"],
                         "atomic")

    def test_node(self):
        """Every field of NodeSpec and NodeStatus; node-reported levels keep unknown fields."""
        self.assertEqual(fields("", "v1", "Node", "spec"), {
            "configSource", "externalID", "podCIDR", "podCIDRs", "providerID", "taints",
            "unschedulable"})
        self.assertTrue({
            "addresses", "allocatable", "capacity", "conditions", "config", "daemonEndpoints",
            "features", "images", "nodeInfo", "phase", "runtimeHandlers", "volumesAttached",
            "volumesInUse"} <= fields("", "v1", "Node", "status"))
        self.assertEqual(fields("", "v1", "Node", "status.conditions"), {
            "type", "status", "reason", "message", "lastHeartbeatTime", "lastTransitionTime"})
        self.assertEqual(at("", "v1", "Node", "status.capacity")["additionalProperties"],
                         {"$ref": schemas.QUANTITY})
        for path in ("status", "status.nodeInfo"):
            self.assertIs(resolve(at("", "v1", "Node", path))[schemas.PRESERVE], True)
        self.assertNotIn(schemas.PRESERVE, resolve(at("", "v1", "Node", "spec")))
        self.assertEqual(at("", "v1", "Node", "status.daemonEndpoints.kubeletEndpoint.Port")
                         ["format"], "int32")

    def test_core_kinds(self):
        self.assertEqual(fields("", "v1", "ServiceAccount") - {"apiVersion", "kind", "metadata"},
                         {"secrets", "imagePullSecrets", "automountServiceAccountToken"})
        secrets = at("", "v1", "ServiceAccount", "secrets")
        self.assertEqual((secrets["x-kubernetes-list-type"], secrets["x-kubernetes-list-map-keys"]),
                         ("map", ["name"]))
        self.assertEqual(fields("", "v1", "Namespace", "status"), {"phase", "conditions"})
        self.assertEqual(fields("", "v1", "Namespace", "spec"), {"finalizers"})
        self.assertEqual(at("", "v1", "Secret", "data")["additionalProperties"],
                         {"type": "string", "format": "byte"})
        event = schema_for("", "v1", "Event")
        self.assertEqual(event["required"], ["metadata", "involvedObject"])
        self.assertEqual(schema_for("events.orch.io", "v1", "Event")["required"],
                         ["eventTime"])

    def test_reviews(self):
        v1 = fields("authorization.orch.io", "v1", "SubjectAccessReview", "spec")
        self.assertIn("groups", v1)
        v1beta1 = fields("authorization.orch.io", "v1beta1", "SubjectAccessReview", "spec")
        self.assertIn("group", v1beta1)
        self.assertNotIn("groups", v1beta1)
        status = resolve(at("authorization.orch.io", "v1", "SelfSubjectRulesReview", "status"))
        self.assertEqual(status["required"], ["resourceRules", "nonResourceRules", "incomplete"])
        self.assertEqual(fields("authentication.orch.io", "v1", "TokenReview", "status.user"),
                         {"username", "uid", "groups", "extra"})
        self.assertEqual(fields("authentication.orch.io", "v1", "SelfSubjectReview"),
                         {"apiVersion", "kind", "metadata", "status"})

    def test_meta(self):
        meta = all_definitions()[schemas.OBJECT_META]["properties"]
        self.assertEqual(meta["creationTimestamp"]["$ref"], schemas.TIME)
        self.assertEqual(meta["finalizers"]["x-kubernetes-list-type"], "set")
        self.assertEqual(meta["ownerReferences"]["x-kubernetes-list-map-keys"], ["uid"])
        for name in (schemas.TIME, schemas.MICRO_TIME):
            definition = all_definitions()[name]
            self.assertEqual((definition["type"], definition["format"]), ("string", "date-time"))
        self.assertIs(all_definitions()[schemas.INT_OR_STRING]
                      ["x-kubernetes-int-or-string"], True)
        selector = all_definitions()[schemas.LABEL_SELECTOR]
        self.assertEqual(set(selector["properties"]), {"matchLabels", "matchExpressions"})


class PatchTableTests(SynchronousTestCase):
    def test_derived_from_patch_table(self):
        """Merge keys come from the server's patch table; none are written by hand."""
        for module in (schemadefs_meta, schemadefs_core, schemadefs_groups):
            for definition in module.DEFINITIONS.values():
                self.assertNotIn(schemas.PATCH_MERGE_KEY, str(definition))
        ports = at("", "v1", "Service", "spec.ports")
        self.assertEqual((ports[schemas.PATCH_STRATEGY], ports[schemas.PATCH_MERGE_KEY]),
                         ("merge", patchschema.SERVICE["spec"].fields["ports"].key))

    def test_unknown_field_in_table(self):
        """A table naming a field a full schema lacks is an error, not a silent gap."""
        pool = {"X": schemas.obj({"a": schemas.string()})}
        self.assertRaises(ValueError, schemas._annotate, schemas.ref("X"),
                          {"b": patchschema.merge_list("name")}, pool, "Kind")

    def test_conflict(self):
        """Two kinds may not ask different patch rules of a shared definition."""
        pool = {"X": schemas.obj({"a": schemas.array(schemas.string())})}
        schemas._annotate(schemas.ref("X"), {"a": patchschema.merge_list("k")}, pool, "One")
        self.assertRaises(ValueError, schemas._annotate, schemas.ref("X"),
                          {"a": patchschema.merge_list("j")}, pool, "Two")

    def test_loose_kinds_skip(self):
        """Loose kinds keep unknown fields, so table rows below them are skipped."""
        pool = {"X": schemas.preserved()}
        schemas._annotate(schemas.ref("X"), {"b": patchschema.merge_list("name")}, pool, "Kind")
        self.assertEqual(pool["X"], schemas.preserved())

    def test_static_tables_untouched(self):
        """Deriving the extensions does not change the module tables."""
        all_definitions()
        ports = schemadefs_core.DEFINITIONS["io.orch.api.core.v1.ServiceSpec"]["properties"]["ports"]
        self.assertNotIn(schemas.PATCH_STRATEGY, ports)
