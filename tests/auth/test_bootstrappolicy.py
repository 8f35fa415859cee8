"""The bootstrap RBAC policy: its tables, reconciliation, and the run at start."""

import copy

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.api.kinds import AUTHENTICATION, AUTHORIZATION, RBAC
from orchd.app.bootstrappolicy import BootstrapPolicyError, reconcile_bootstrap_policy
from orchd.auth.bootstrappolicy import (
    AUTOUPDATE_ANNOTATION,
    BOOTSTRAP_LABEL,
    CREATE,
    NONE,
    RECREATE,
    UPDATE,
    bootstrap_policy,
    object_ref,
    reconcile_binding,
    reconcile_role,
)
from orchd.auth.bootstrappolicy.controllers import CONTROLLER_RULES
from orchd.auth.bootstrappolicy.objects import (
    cluster_role,
    cluster_role_binding,
    group,
    namespaced_role,
    service_account,
    user,
)
from orchd.auth.rbac.noderules import NODE_RULES
from orchd.auth.rbac.rules import rule
from orchd.auth.user import ANONYMOUS, AUTHENTICATED, MASTERS, UNAUTHENTICATED
from orchd.registry.kinds.builtin import KINDS
from tests.support import APIHarness

KIND_OF = {"clusterroles": "ClusterRole", "clusterrolebindings": "ClusterRoleBinding",
           "roles": "Role", "rolebindings": "RoleBinding"}
RULE_FIELDS = {"verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs"}
PUBLIC_URLS = {"/healthz", "/livez", "/readyz", "/version", "/version/"}


def policy_by_ref():
    return {object_ref(resource, obj): obj for resource, obj in bootstrap_policy()}


def subjects_of(binding):
    return [(s["kind"], s["name"]) for s in binding.get("subjects", [])]


def run(catalog, policy=None):
    return Deferred.fromCoroutine(reconcile_bootstrap_policy(catalog, policy))


class PolicyDataTests(SynchronousTestCase):
    def setUp(self):
        self.policy = bootstrap_policy()
        self.by_ref = policy_by_ref()

    def roles(self):
        return [(r, o) for r, o in self.policy if r in ("clusterroles", "roles")]

    def bindings(self):
        return [(r, o) for r, o in self.policy if r in ("clusterrolebindings", "rolebindings")]

    def test_rules_are_valid(self):
        """Every rule is a PolicyRule dict: verbs, and either URLs (cluster roles only) or groups and resources."""
        for resource, role in self.roles():
            self.assertIsInstance(role["rules"], list)
            for r in role["rules"]:
                where = f"{object_ref(resource, role)}: {r}"
                self.assertLessEqual(set(r), RULE_FIELDS, where)
                self.assertIn("verbs", r, where)
                for field, values in r.items():
                    self.assertIsInstance(values, list, where)
                    self.assertTrue(values, where)
                    self.assertTrue(all(isinstance(v, str) for v in values), where)
                    if field != "apiGroups":
                        self.assertTrue(all(values), where)
                if "nonResourceURLs" in r:
                    self.assertEqual(resource, "clusterroles", where)
                    self.assertNotIn("apiGroups", r, where)
                    self.assertTrue(all(u.startswith("/") or u == "*"
                                        for u in r["nonResourceURLs"]), where)
                else:
                    self.assertTrue(r["apiGroups"] and r["resources"], where)

    def test_groups_are_served(self):
        """Rules name only API groups this server serves (or *)."""
        served = {info.group for info in KINDS} | {"*"}
        for resource, role in self.roles():
            for r in role["rules"]:
                self.assertLessEqual(set(r.get("apiGroups", [])), served,
                                     object_ref(resource, role))

    def test_names_are_unique(self):
        """No two bootstrap objects share a resource, namespace and name."""
        refs = [object_ref(resource, obj) for resource, obj in self.policy]
        self.assertEqual(len(refs), len(set(refs)))

    def test_objects_are_marked(self):
        """Every object has the RBAC apiVersion, its kind, the bootstrapping label and autoupdate on."""
        for resource, obj in self.policy:
            self.assertEqual(obj["apiVersion"], f"{RBAC}/v1")
            self.assertEqual(obj["kind"], KIND_OF[resource])
            meta = obj["metadata"]
            self.assertEqual(meta["labels"][BOOTSTRAP_LABEL], "rbac-defaults")
            self.assertEqual(meta["annotations"], {AUTOUPDATE_ANNOTATION: "true"})
            self.assertEqual(bool(meta.get("namespace")), resource in ("roles", "rolebindings"))

    def test_bindings_name_existing_roles(self):
        """Every binding's roleRef names a bootstrap role it may refer to."""
        for resource, binding in self.bindings():
            ref = binding["roleRef"]
            self.assertEqual(ref["apiGroup"], RBAC)
            if ref["kind"] == "ClusterRole":
                target = f"clusterroles/{ref['name']}"
            else:
                self.assertEqual(resource, "rolebindings")
                target = f"roles/{binding['metadata']['namespace']}/{ref['name']}"
            self.assertIn(target, self.by_ref, object_ref(resource, binding))

    def test_subjects_are_well_formed(self):
        """Users and groups carry the RBAC group; service accounts a namespace and no group."""
        for resource, binding in self.bindings():
            for subject in binding.get("subjects", []):
                if subject["kind"] == "ServiceAccount":
                    self.assertEqual(set(subject), {"kind", "name", "namespace"})
                else:
                    self.assertIn(subject["kind"], ("User", "Group"))
                    self.assertEqual(subject["apiGroup"], RBAC)

    def test_system_node(self):
        """system:node holds the node rules; its binding exists and names no one."""
        self.assertEqual(self.by_ref["clusterroles/system:node"]["rules"], list(NODE_RULES))
        self.assertEqual(subjects_of(self.by_ref["clusterrolebindings/system:node"]), [])

    def test_core_bindings(self):
        """The default groups are bound as the reference states."""
        expected = {
            "cluster-admin": [("Group", MASTERS)],
            "system:discovery": [("Group", AUTHENTICATED)],
            "system:basic-user": [("Group", AUTHENTICATED)],
            "system:public-info-viewer": [("Group", AUTHENTICATED), ("Group", UNAUTHENTICATED)],
        }
        for name, subjects in expected.items():
            self.assertEqual(subjects_of(self.by_ref[f"clusterrolebindings/{name}"]), subjects)

    def test_cluster_admin_and_basic_user(self):
        """cluster-admin may do anything; basic users may only review themselves."""
        self.assertEqual(self.by_ref["clusterroles/cluster-admin"]["rules"], [
            {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
            {"verbs": ["*"], "nonResourceURLs": ["*"]}])
        self.assertEqual(self.by_ref["clusterroles/system:basic-user"]["rules"], [
            rule(["create"], [AUTHORIZATION], ["selfsubjectaccessreviews",
                                                "selfsubjectrulesreviews"]),
            rule(["create"], [AUTHENTICATION], ["selfsubjectreviews"])])

    def test_discovery_urls(self):
        """system:discovery and system:public-info-viewer get exactly their URLs."""
        discovery = self.by_ref["clusterroles/system:discovery"]["rules"]
        self.assertEqual(len(discovery), 1)
        self.assertEqual(discovery[0]["verbs"], ["get"])
        self.assertEqual(set(discovery[0]["nonResourceURLs"]), PUBLIC_URLS | {
            "/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*"})
        public = self.by_ref["clusterroles/system:public-info-viewer"]["rules"]
        self.assertEqual(public, [{"verbs": ["get"],
                                   "nonResourceURLs": ["/livez", "/readyz", "/healthz",
                                                       "/version", "/version/"]}])

    def test_aggregated_roles(self):
        """admin, edit and view are empty aggregates that select their aggregate-to labels."""
        label = f"{RBAC}/aggregate-to-"
        for name, above in (("admin", None), ("edit", "admin"), ("view", "edit")):
            role = self.by_ref[f"clusterroles/{name}"]
            self.assertEqual(role["rules"], [])
            self.assertEqual(role["aggregationRule"],
                             {"clusterRoleSelectors": [{"matchLabels": {label + name: "true"}}]})
            if above:
                self.assertEqual(role["metadata"]["labels"][label + above], "true")
            content = self.by_ref[f"clusterroles/system:aggregate-to-{name}"]
            self.assertEqual(content["metadata"]["labels"][label + name], "true")
            self.assertTrue(content["rules"])
            self.assertNotIn("aggregationRule", content)

    def test_view_and_edit_limits(self):
        """The view content excludes secrets; the edit content leaves roles and bindings alone."""
        view = self.by_ref["clusterroles/system:aggregate-to-view"]["rules"]
        self.assertFalse([r for r in view if "secrets" in r["resources"]])
        edit = self.by_ref["clusterroles/system:aggregate-to-edit"]["rules"]
        self.assertFalse([r for r in edit if RBAC in r["apiGroups"]])
        admin = self.by_ref["clusterroles/system:aggregate-to-admin"]["rules"]
        self.assertTrue([r for r in admin if RBAC in r["apiGroups"]])

    def test_cluster_info_reader(self):
        """Anonymous users may get the cluster-info config map in orch-public, and nothing else there."""
        role = self.by_ref["roles/orch-public/orch:bootstrap-signer-clusterinfo"]
        self.assertEqual(role["rules"], [{"verbs": ["get"], "apiGroups": [""],
                                          "resources": ["configmaps"],
                                          "resourceNames": ["cluster-info"]}])
        binding = self.by_ref["rolebindings/orch-public/orch:bootstrap-signer-clusterinfo"]
        self.assertEqual(binding["roleRef"], {"apiGroup": RBAC, "kind": "Role",
                                              "name": "orch:bootstrap-signer-clusterinfo"})
        self.assertEqual(binding["subjects"], [{"kind": "User", "apiGroup": RBAC,
                                                "name": ANONYMOUS}])

    def test_anonymous_reaches_only_public_information(self):
        """Everything bound to the anonymous user reads only health, version and cluster-info."""
        anonymous = {("User", ANONYMOUS), ("Group", UNAUTHENTICATED)}
        granted = []
        for resource, binding in self.bindings():
            if anonymous & set(subjects_of(binding)):
                ref = binding["roleRef"]
                namespace = binding["metadata"].get("namespace")
                target = (f"roles/{namespace}/{ref['name']}" if ref["kind"] == "Role"
                          else f"clusterroles/{ref['name']}")
                granted.extend((namespace, r) for r in self.by_ref[target]["rules"])
        for namespace, r in granted:
            self.assertEqual(r["verbs"], ["get"])
            if "nonResourceURLs" in r:
                self.assertLessEqual(set(r["nonResourceURLs"]), PUBLIC_URLS)
            else:
                self.assertEqual((namespace, r["resources"], r["resourceNames"]),
                                 ("orch-public", ["configmaps"], ["cluster-info"]))

    def test_controller_roles(self):
        """Each controller role is bound to its service account in orch-system."""
        for name in ("namespace-controller", "generic-garbage-collector",
                     "clusterrole-aggregation-controller", "service-account-controller",
                     "node-controller", "certificate-controller", "root-ca-cert-publisher",
                     "endpoint-controller", "endpointslice-controller"):
            self.assertIn(name, CONTROLLER_RULES)
        for name in CONTROLLER_RULES:
            role_name = f"system:controller:{name}"
            self.assertIn(f"clusterroles/{role_name}", self.by_ref)
            binding = self.by_ref[f"clusterrolebindings/{role_name}"]
            self.assertEqual(binding["subjects"], [service_account("orch-system", name)])
        self.assertIn("roles/orch-system/system:controller:token-cleaner", self.by_ref)
        for namespace in ("orch-system", "orch-public"):
            self.assertIn(f"rolebindings/{namespace}/system:controller:bootstrap-signer",
                          self.by_ref)

    def test_policy_copies_are_fresh(self):
        """Changing what bootstrap_policy returned does not change the next answer."""
        changed = self.policy[0][1]
        changed["rules"][0]["verbs"].append("x")
        changed["metadata"]["labels"]["x"] = "y"
        again = bootstrap_policy()[0][1]
        self.assertEqual(again["rules"][0]["verbs"], ["*"])
        self.assertNotIn("x", again["metadata"]["labels"])


def stored(obj, **meta):
    """C{obj} as the registry would return it: with server metadata."""
    obj = copy.deepcopy(obj)
    obj["metadata"].update({"uid": "u-1", "resourceVersion": "7"}, **meta)
    return obj


READ_PODS = rule(["get", "list"], [""], ["pods"])
READ_NODES = rule(["get"], [""], ["nodes"])


class ReconcileRoleTests(SynchronousTestCase):
    def setUp(self):
        self.expected = cluster_role("r", [READ_PODS, READ_NODES])

    def test_missing_is_created(self):
        """A role that is not stored is created as expected (a copy)."""
        result = reconcile_role(self.expected, None)
        self.assertEqual(result.action, CREATE)
        self.assertEqual(result.obj, self.expected)
        self.assertIsNot(result.obj, self.expected)

    def test_same_role_is_left(self):
        """A stored role equal to the expected one needs nothing."""
        result = reconcile_role(self.expected, stored(self.expected))
        self.assertEqual((result.action, result.obj), (NONE, None))

    def test_extra_rules_are_kept(self):
        """Rules an administrator added stay, and alone they need no write."""
        existing = stored(self.expected)
        existing["rules"].append(rule(["delete"], [""], ["secrets"]))
        self.assertEqual(reconcile_role(self.expected, existing).action, NONE)

    def test_missing_rules_are_added(self):
        """Expected rules the stored ones do not cover are appended; the rest is kept."""
        extra = rule(["delete"], [""], ["secrets"])
        existing = stored(self.expected)
        existing["rules"] = [extra, READ_PODS]
        result = reconcile_role(self.expected, existing)
        self.assertEqual(result.action, UPDATE)
        self.assertEqual(result.obj["rules"], [extra, READ_PODS, READ_NODES])
        self.assertEqual(result.missing_rules, [READ_NODES])
        self.assertEqual(result.obj["metadata"]["resourceVersion"], "7")
        self.assertEqual(len(existing["rules"]), 2)

    def test_covered_rules_are_not_added(self):
        """A broader stored rule covers the expected ones."""
        existing = stored(self.expected)
        existing["rules"] = [rule(["*"], [""], ["*"])]
        self.assertEqual(reconcile_role(self.expected, existing).action, NONE)

    def test_autoupdate_false_is_left_alone(self):
        """A role whose autoupdate annotation is "false" is never written."""
        existing = stored(self.expected)
        existing["rules"] = []
        existing["metadata"]["annotations"][AUTOUPDATE_ANNOTATION] = "false"
        result = reconcile_role(self.expected, existing)
        self.assertEqual((result.action, result.protected, result.obj), (NONE, True, None))

    def test_labels_and_annotations_are_unioned(self):
        """Missing labels and annotations are added; stored values win."""
        existing = stored(self.expected)
        existing["metadata"]["labels"] = {BOOTSTRAP_LABEL: "mine", "team": "a"}
        del existing["metadata"]["annotations"]
        result = reconcile_role(self.expected, existing)
        self.assertEqual(result.action, UPDATE)
        self.assertEqual(result.obj["metadata"]["labels"], {BOOTSTRAP_LABEL: "mine", "team": "a"})
        self.assertEqual(result.obj["metadata"]["annotations"], {AUTOUPDATE_ANNOTATION: "true"})

    def test_aggregated_rules_are_not_touched(self):
        """An aggregated role's rules, filled by the controller, are not reconciled."""
        expected = cluster_role("edit", aggregate_from="edit")
        existing = stored(expected)
        existing["rules"] = [READ_PODS]
        self.assertEqual(reconcile_role(expected, existing).action, NONE)
        existing["rules"] = []
        self.assertEqual(reconcile_role(expected, existing).action, NONE)

    def test_missing_selectors_are_added(self):
        """A missing aggregation selector is appended; stored selectors and rules stay."""
        expected = cluster_role("edit", aggregate_from="edit")
        existing = stored(expected)
        own = {"matchLabels": {"mine": "true"}}
        existing["aggregationRule"]["clusterRoleSelectors"] = [own]
        existing["rules"] = [READ_PODS]
        result = reconcile_role(expected, existing)
        self.assertEqual(result.action, UPDATE)
        self.assertEqual(result.obj["aggregationRule"]["clusterRoleSelectors"],
                         [own] + expected["aggregationRule"]["clusterRoleSelectors"])
        self.assertEqual(result.obj["rules"], [READ_PODS])
        self.assertEqual(result.missing_rules, [])

    def test_unexpected_aggregation_is_removed(self):
        """A role bootstrap policy does not aggregate loses a stored aggregationRule."""
        existing = stored(self.expected)
        existing["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}
        result = reconcile_role(self.expected, existing)
        self.assertEqual(result.action, UPDATE)
        self.assertNotIn("aggregationRule", result.obj)

    def test_namespaced_role(self):
        """Roles reconcile like cluster roles."""
        expected = namespaced_role("orch-system", "r", [READ_PODS])
        existing = stored(expected)
        existing["rules"] = []
        self.assertEqual(reconcile_role(expected, existing).obj["rules"], [READ_PODS])


class ReconcileBindingTests(SynchronousTestCase):
    def setUp(self):
        self.expected = cluster_role_binding("r", group("g"), service_account("orch-system", "sa"))

    def test_missing_is_created(self):
        """A binding that is not stored is created as expected."""
        result = reconcile_binding(self.expected, None)
        self.assertEqual((result.action, result.obj), (CREATE, self.expected))

    def test_missing_subjects_are_added(self):
        """Expected subjects missing from the stored binding are appended; others stay."""
        existing = stored(self.expected)
        existing["subjects"] = [user("alice")]
        result = reconcile_binding(self.expected, existing)
        self.assertEqual(result.action, UPDATE)
        self.assertEqual(result.obj["subjects"], [user("alice")] + self.expected["subjects"])
        self.assertEqual(result.missing_subjects, self.expected["subjects"])

    def test_subjects_compare_with_defaults(self):
        """A stored subject that leaves out its default API group is the same subject."""
        existing = stored(self.expected)
        existing["subjects"] = [{"kind": "Group", "name": "g"},
                                {"kind": "ServiceAccount", "name": "sa", "apiGroup": "",
                                 "namespace": "orch-system"},
                                user("extra")]
        self.assertEqual(reconcile_binding(self.expected, existing).action, NONE)

    def test_role_ref_change_recreates(self):
        """A binding to another role is recreated as expected."""
        existing = stored(self.expected)
        existing["roleRef"]["name"] = "other"
        existing["subjects"].append(user("alice"))
        result = reconcile_binding(self.expected, existing)
        self.assertEqual((result.action, result.obj), (RECREATE, self.expected))

    def test_autoupdate_false_is_left_alone(self):
        """A protected binding is left alone, roleRef and subjects included."""
        existing = stored(self.expected)
        existing["roleRef"]["name"] = "other"
        existing["subjects"] = []
        existing["metadata"]["annotations"][AUTOUPDATE_ANNOTATION] = "false"
        result = reconcile_binding(self.expected, existing)
        self.assertEqual((result.action, result.protected), (NONE, True))

    def test_binding_without_subjects(self):
        """An expected binding with no subjects matches a stored one with none."""
        expected = cluster_role_binding("system:node")
        self.assertEqual(reconcile_binding(expected, stored(expected)).action, NONE)


BASIC_USER = f"/apis/{RBAC}/v1/clusterroles/system:basic-user"


class ConflictingStore:
    """A resource store whose first C{conflicts} updates fail with 409."""

    def __init__(self, store, conflicts):
        self.store = store
        self.conflicts = conflicts

    def get(self, ctx, name):
        return self.store.get(ctx, name)

    def find(self, ctx, name):
        return self.store.find(ctx, name)

    def create(self, ctx, obj):
        return self.store.create(ctx, obj)

    def delete(self, ctx, name, options=None):
        return self.store.delete(ctx, name, options)

    async def update(self, ctx, name, obj):
        if self.conflicts:
            self.conflicts -= 1
            raise StatusError.stale("clusterroles", RBAC, name)
        return await self.store.update(ctx, name, obj)


class ConflictingCatalog:
    """A catalog whose cluster roles conflict on update."""

    def __init__(self, catalog, conflicts):
        self.catalog = catalog
        self.clusterroles = ConflictingStore(catalog.resource(RBAC, "clusterroles"), conflicts)

    def resource(self, group, resource):
        if resource == "clusterroles":
            return self.clusterroles
        return self.catalog.resource(group, resource)

    def system_context(self, namespace=""):
        return self.catalog.system_context(namespace)


class EndToEndTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.first = self.successResultOf(run(self.api.catalog))

    def basic_user(self):
        code, role, _ = self.api.call("GET", BASIC_USER)
        self.assertEqual(code, 200)
        return role

    def drop_selfsubjectreviews(self, role):
        role["rules"] = [r for r in role["rules"] if "selfsubjectreviews" not in r["resources"]]
        code, _, _ = self.api.call("PUT", BASIC_USER, role)
        self.assertEqual(code, 200)

    def test_first_run_creates_everything(self):
        """The first run creates every bootstrap object, in every namespace it names."""
        refs = [object_ref(resource, obj) for resource, obj in bootstrap_policy()]
        self.assertEqual(self.first.created, refs)
        self.assertEqual(self.first.failed, [])
        self.assertTrue(self.first.ok)
        self.assertEqual(self.basic_user()["metadata"]["labels"][BOOTSTRAP_LABEL],
                         "rbac-defaults")
        code, binding, _ = self.api.call(
            "GET", f"/apis/{RBAC}/v1/namespaces/orch-public/rolebindings/"
                   "orch:bootstrap-signer-clusterinfo")
        self.assertEqual((code, binding["subjects"][0]["name"]), (200, ANONYMOUS))

    def test_second_run_changes_nothing(self):
        """Running again writes nothing."""
        version = self.basic_user()["metadata"]["resourceVersion"]
        second = self.successResultOf(run(self.api.catalog))
        self.assertEqual(second.changed, [])
        self.assertEqual(second.unchanged, self.first.created)
        self.assertEqual(self.basic_user()["metadata"]["resourceVersion"], version)

    def test_removed_rule_is_restored(self):
        """A rule a user removed from system:basic-user is back after the next run."""
        self.drop_selfsubjectreviews(self.basic_user())
        report = self.successResultOf(run(self.api.catalog))
        self.assertEqual(report.updated, ["clusterroles/system:basic-user"])
        resources = [r for rule_ in self.basic_user()["rules"] for r in rule_["resources"]]
        self.assertIn("selfsubjectreviews", resources)
        self.assertEqual(self.successResultOf(run(self.api.catalog)).changed, [])

    def test_protected_role_is_not_restored(self):
        """With autoupdate "false", a user's removal stays."""
        role = self.basic_user()
        role["metadata"]["annotations"][AUTOUPDATE_ANNOTATION] = "false"
        self.drop_selfsubjectreviews(role)
        report = self.successResultOf(run(self.api.catalog))
        self.assertEqual(report.protected, ["clusterroles/system:basic-user"])
        self.assertEqual(report.changed, [])
        self.assertEqual(len(self.basic_user()["rules"]), 1)

    def test_changed_role_ref_is_recreated(self):
        """A binding pointed at another role is deleted and created as bootstrap policy has it."""
        path = f"/apis/{RBAC}/v1/clusterrolebindings/system:basic-user"
        code, _, _ = self.api.call("DELETE", path)
        self.assertEqual(code, 200)
        code, _, _ = self.api.call("POST", f"/apis/{RBAC}/v1/clusterrolebindings",
                                   cluster_role_binding("system:discovery", user("bob"),
                                                        name="system:basic-user"))
        self.assertEqual(code, 201)
        report = self.successResultOf(run(self.api.catalog))
        self.assertEqual(report.recreated, ["clusterrolebindings/system:basic-user"])
        _, binding, _ = self.api.call("GET", path)
        self.assertEqual(binding["roleRef"]["name"], "system:basic-user")
        self.assertEqual(subjects_of(binding), [("Group", AUTHENTICATED)])

    def test_one_failure_does_not_stop_the_rest(self):
        """An object that cannot be written is reported; the others are still written."""
        self.drop_selfsubjectreviews(self.basic_user())
        policy = [("roles", namespaced_role("no-such-namespace", "r", [READ_PODS]))]
        policy += [(r, o) for r, o in bootstrap_policy() if r == "clusterroles"]
        report = self.successResultOf(run(self.api.catalog, policy))
        self.assertEqual([ref for ref, _ in report.failed], ["roles/no-such-namespace/r"])
        self.assertFalse(report.ok)
        self.assertEqual(report.updated, ["clusterroles/system:basic-user"])
        self.assertRaises(BootstrapPolicyError, report.check)

    def test_conflict_is_retried_once(self):
        """An update that meets a conflict is decided and written again."""
        self.drop_selfsubjectreviews(self.basic_user())
        report = self.successResultOf(run(ConflictingCatalog(self.api.catalog, 1)))
        self.assertEqual(report.updated, ["clusterroles/system:basic-user"])
        self.assertEqual(len(self.basic_user()["rules"]), 2)

    def test_second_conflict_fails_that_object(self):
        """Two conflicts in a row fail the object, and the run goes on."""
        self.drop_selfsubjectreviews(self.basic_user())
        report = self.successResultOf(run(ConflictingCatalog(self.api.catalog, 2)))
        self.assertEqual([ref for ref, _ in report.failed], ["clusterroles/system:basic-user"])
        self.assertIn("has been modified", report.failed[0][1])
        self.assertEqual(len(report.unchanged), len(self.first.created) - 1)
