"""Rules of the RBAC kinds through the whole server: rules, role references, subjects."""

import orjson
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from orchd.registry.kinds.builtin import DEFINITIONS
from orchd.registry.strategy import IStrategy
from tests.support import APIHarness

RBAC = "rbac.authorization.orch.io"
COMPAT = "rbac.authorization.k8s.io"
BASE = f"/apis/{RBAC}/v1"
CR = f"{BASE}/clusterroles"
CRB = f"{BASE}/clusterrolebindings"
ROLES = f"{BASE}/namespaces/default/roles"
RB = f"{BASE}/namespaces/default/rolebindings"
MERGE = b"application/merge-patch+json"
JSON_PATCH = b"application/json-patch+json"
STRATEGIC = b"application/strategic-merge-patch+json"
APPLY = b"application/apply-patch+yaml"


def pods(*verbs):
    return {"apiGroups": [""], "resources": ["pods"], "verbs": list(verbs)}


def urls(*paths, verbs=("get",)):
    return {"nonResourceURLs": list(paths), "verbs": list(verbs)}


def ref(name="view", kind="ClusterRole", group=RBAC):
    out = {"kind": kind, "name": name}
    if group is not None:
        out["apiGroup"] = group
    return out


def user(name="alice", **extra):
    return dict({"kind": "User", "name": name}, **extra)


def sa(name="builder", **extra):
    return dict({"kind": "ServiceAccount", "name": name}, **extra)


class RBACTestCase(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def call(self, method, path, body=None, content_type=b"application/json"):
        return self.api.call(method, path, body, content_type=content_type)[:2]

    def create(self, collection, name, **fields):
        return self.call("POST", collection, dict(fields, metadata={"name": name}))

    def created(self, collection, name, **fields):
        code, obj = self.create(collection, name, **fields)
        self.assertEqual(code, 201, obj)
        return obj

    def apply(self, collection, kind, name, manager="alice", api_version=None, **fields):
        body = dict(fields, apiVersion=api_version or f"{RBAC}/v1", kind=kind,
                    metadata={"name": name})
        return self.call("PATCH", f"{collection}/{name}?fieldManager={manager}",
                         orjson.dumps(body), content_type=APPLY)

    def assertInvalid(self, answer, kind, name, *causes):
        """A 422 for C{kind}/C{name} whose causes are exactly C{(field, reason, message)}."""
        code, status = answer
        self.assertEqual((code, status["reason"]), (422, "Invalid"), status)
        self.assertEqual(status["details"]["kind"], kind)
        self.assertEqual(status["details"]["group"], RBAC)
        found = [(c["field"], c["reason"], c["message"]) for c in status["details"]["causes"]]
        self.assertEqual(found, list(causes))
        texts = [f"{field}: {message}" for field, _, message in causes]
        joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
        self.assertEqual(status["message"], f'{kind}.{RBAC} "{name}" is invalid: {joined}')


class StrategyTests(SynchronousTestCase):
    def test_strategies_provide_the_interface(self):
        """Each of the four kinds has a strategy of its own that creates on PUT."""
        for definition in DEFINITIONS:
            info = definition.info
            if info.group == RBAC:
                strategy = definition.new_strategy(None)
                verifyObject(IStrategy, strategy)
                self.assertEqual(type(strategy).__name__, info.kind + "Strategy")
                self.assertTrue(strategy.allow_create_on_update)


class PolicyRuleTests(RBACTestCase):
    def test_valid_rules_are_stored_as_sent(self):
        """Resource and non-resource rules are accepted and stored unchanged."""
        rules = [pods("get", "list"), urls("/healthz", "/api/*", "*"),
                 {"apiGroups": ["apps"], "resources": ["deployments"],
                  "resourceNames": ["web"], "verbs": ["*"]}]
        role = self.created(CR, "reader", rules=rules)
        self.assertEqual(role["rules"], rules)
        self.assertEqual(self.call("GET", f"{CR}/reader")[1]["rules"], rules)

    def test_role_and_cluster_role_without_rules(self):
        """Rules are optional."""
        self.created(CR, "empty")
        self.created(ROLES, "empty", rules=[])

    def test_verbs_required(self):
        """A rule with no verbs, missing or empty, is refused."""
        required = ("rules[0].verbs", "FieldValueRequired",
                    "Required value: verbs must contain at least one value")
        self.assertInvalid(self.create(CR, "a", rules=[pods()]), "ClusterRole", "a", required)
        rule = {"apiGroups": [""], "resources": ["pods"]}
        self.assertInvalid(self.create(ROLES, "a", rules=[rule]), "Role", "a", required)

    def test_resource_rules_need_groups_and_resources(self):
        """A rule without non-resource URLs needs apiGroups and resources."""
        self.assertInvalid(
            self.create(CR, "a", rules=[pods("get"), {"verbs": ["get"]}]), "ClusterRole", "a",
            ("rules[1].apiGroups", "FieldValueRequired",
             "Required value: resource rules must supply at least one api group"),
            ("rules[1].resources", "FieldValueRequired",
             "Required value: resource rules must supply at least one resource"))
        self.assertInvalid(
            self.create(ROLES, "a", rules=[{"resources": ["pods"], "verbs": ["get"]}]),
            "Role", "a",
            ("rules[0].apiGroups", "FieldValueRequired",
             "Required value: resource rules must supply at least one api group"))

    def test_resources_and_urls_exclude_each_other(self):
        """A rule names resources or non-resource URLs, never both."""
        both = "rules cannot apply to both regular resources and non-resource URLs"
        for extra in ({"resources": ["pods"]}, {"apiGroups": [""]}, {"resourceNames": ["x"]}):
            rule = dict(urls("/api", "/apis"), **extra)
            self.assertInvalid(
                self.create(CR, "a", rules=[rule]), "ClusterRole", "a",
                ("rules[0].nonResourceURLs", "FieldValueInvalid",
                 f'Invalid value: []string{{"/api", "/apis"}}: {both}'))

    def test_role_cannot_name_urls(self):
        """Non-resource URLs are for ClusterRoles only."""
        self.assertInvalid(
            self.create(ROLES, "a", rules=[urls("/healthz")]), "Role", "a",
            ("rules[0].nonResourceURLs", "FieldValueInvalid",
             ('Invalid value: []string{"/healthz"}: '
              "namespaced rules cannot apply to non-resource URLs")))

    def test_star_only_as_whole_last_segment(self):
        """In a non-resource URL `*` may only be the whole last segment."""
        for good in ("*", "/*", "/api/*", "/apis/apps/*"):
            self.created(CR, "ok-" + str(len(good)), rules=[urls(good)])
        for bad in ("/healthz*", "/api/*/v1", "*/x", "/a*b/*", "/api/v*"):
            self.assertInvalid(
                self.create(CR, "bad", rules=[urls("/ok", bad)]), "ClusterRole", "bad",
                ("rules[0].nonResourceURLs[1]", "FieldValueInvalid",
                 f'Invalid value: "{bad}": \'*\' is allowed only as a whole, final path segment'))

    def test_wrong_types_are_invalid(self):
        """Values of the wrong JSON type are 422s, not server errors."""
        self.assertInvalid(self.create(CR, "a", rules="all"), "ClusterRole", "a",
                           ("rules", "FieldValueTypeInvalid",
                            'Invalid value: "all": must be of type array'))
        self.assertInvalid(self.create(CR, "a", rules=[{"verbs": "get", "nonResourceURLs": [1]}]),
                           "ClusterRole", "a",
                           ("rules[0].verbs", "FieldValueTypeInvalid",
                            'Invalid value: "get": must be of type array'),
                           ("rules[0].nonResourceURLs[0]", "FieldValueTypeInvalid",
                            "Invalid value: 1: must be of type string"),
                           ("rules[0].verbs", "FieldValueRequired",
                            "Required value: verbs must contain at least one value"),
                           ("rules[0].apiGroups", "FieldValueRequired",
                            "Required value: resource rules must supply at least one api group"),
                           ("rules[0].resources", "FieldValueRequired",
                            "Required value: resource rules must supply at least one resource"))


class AggregationRuleTests(RBACTestCase):
    def test_valid_selectors(self):
        """Label selectors with labels and expressions are accepted."""
        rule = {"clusterRoleSelectors": [
            {"matchLabels": {f"{RBAC}/aggregate-to-view": "true"}},
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                  {"key": "legacy", "operator": "DoesNotExist"}]}]}
        role = self.created(CR, "view", aggregationRule=rule)
        self.assertEqual(role["aggregationRule"], rule)

    def test_at_least_one_selector(self):
        """An aggregationRule without selectors is refused; a null one is no rule."""
        self.assertInvalid(
            self.create(CR, "a", aggregationRule={}), "ClusterRole", "a",
            ("aggregationRule.clusterRoleSelectors", "FieldValueRequired",
             ("Required value: at least one clusterRoleSelector required if aggregationRule "
              "is non-nil")))
        self.created(CR, "b", aggregationRule=None)

    def test_invalid_selectors(self):
        """Selector errors name the field, and a selector that cannot convert says so."""
        path = "aggregationRule.clusterRoleSelectors[0]"
        selector = {"matchLabels": {"ok": "bad value"},
                    "matchExpressions": [{"key": "x", "operator": "Near"},
                                         {"key": "y", "operator": "In"},
                                         {"key": "z", "operator": "Exists", "values": ["v"]}]}
        answer = self.create(CR, "a", aggregationRule={"clusterRoleSelectors": [selector]})
        value_rule = ("a valid label must be an empty string or consist of alphanumeric "
                      "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                      "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
                      "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
        self.assertInvalid(
            answer, "ClusterRole", "a",
            (f"{path}.matchLabels", "FieldValueInvalid",
             f'Invalid value: "bad value": {value_rule}'),
            (f"{path}.matchExpressions[0].operator", "FieldValueInvalid",
             'Invalid value: "Near": not a valid selector operator'),
            (f"{path}.matchExpressions[1].values", "FieldValueRequired",
             "Required value: must be specified when `operator` is 'In' or 'NotIn'"),
            (f"{path}.matchExpressions[2].values", "FieldValueForbidden",
             "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
            (path, "FieldValueInvalid", 'Invalid value: "null": invalid label selector.'))

    def test_invalid_selector_key(self):
        """A label key that is not a qualified name is refused."""
        code, status = self.create(CR, "a", aggregationRule={"clusterRoleSelectors": [
            {"matchExpressions": [{"key": "-x", "operator": "Exists"}]}]})
        self.assertEqual(code, 422)
        self.assertEqual(
            [c["field"] for c in status["details"]["causes"]],
            ["aggregationRule.clusterRoleSelectors[0].matchExpressions[0].key",
             "aggregationRule.clusterRoleSelectors[0]"])


class RoleRefTests(RBACTestCase):
    def test_binding_defaults(self):
        """roleRef.apiGroup and User/Group apiGroup default to the RBAC group; SAs' stay empty."""
        binding = self.created(RB, "b", roleRef=ref("edit", group=None),
                               subjects=[user(), {"kind": "Group", "name": "devs"}, sa()])
        self.assertEqual(binding["roleRef"], ref("edit"))
        self.assertEqual(binding["subjects"], [user(apiGroup=RBAC),
                                               {"kind": "Group", "name": "devs", "apiGroup": RBAC},
                                               sa()])
        self.assertEqual(self.call("GET", f"{RB}/b")[1]["subjects"], binding["subjects"])

    def test_compat_group_stored_in_our_spelling(self):
        """[COMPAT] The upstream RBAC group is accepted and stored as rbac.authorization.orch.io."""
        binding = self.created(CRB, "b", roleRef=ref(group=COMPAT),
                               subjects=[user(apiGroup=COMPAT)])
        self.assertEqual(binding["roleRef"]["apiGroup"], RBAC)
        self.assertEqual(binding["subjects"][0]["apiGroup"], RBAC)
        code, binding = self.call("POST", f"/apis/{COMPAT}/v1/namespaces/default/rolebindings", {
            "apiVersion": f"{COMPAT}/v1", "kind": "RoleBinding", "metadata": {"name": "c"},
            "roleRef": ref("r", kind="Role", group=COMPAT)})
        self.assertEqual((code, binding["apiVersion"]), (201, f"{COMPAT}/v1"))
        self.assertEqual(self.call("GET", f"{RB}/c")[1]["roleRef"], ref("r", kind="Role"))

    def test_role_binding_kinds(self):
        """A RoleBinding may name a Role or ClusterRole, a ClusterRoleBinding a ClusterRole."""
        self.created(RB, "to-role", roleRef=ref("r", kind="Role"))
        self.created(RB, "to-cluster-role", roleRef=ref())
        self.created(CRB, "ok", roleRef=ref())
        self.assertInvalid(self.create(CRB, "b", roleRef=ref(kind="Role")),
                           "ClusterRoleBinding", "b",
                           ("roleRef.kind", "FieldValueNotSupported",
                            'Unsupported value: "Role": supported values: "ClusterRole"'))
        self.assertInvalid(self.create(RB, "b", roleRef=ref(kind="Pod")), "RoleBinding", "b",
                           ("roleRef.kind", "FieldValueNotSupported",
                            'Unsupported value: "Pod": supported values: "Role", "ClusterRole"'))

    def test_role_ref_group(self):
        """roleRef.apiGroup must be the RBAC group."""
        self.assertInvalid(self.create(CRB, "b", roleRef=ref(group="apps")),
                           "ClusterRoleBinding", "b",
                           ("roleRef.apiGroup", "FieldValueNotSupported",
                            f'Unsupported value: "apps": supported values: "{RBAC}"'))

    def test_role_ref_name(self):
        """roleRef.name is required and must be a valid path segment."""
        self.assertInvalid(self.create(CRB, "b", roleRef=ref("")), "ClusterRoleBinding", "b",
                           ("roleRef.name", "FieldValueRequired", "Required value"))
        self.assertInvalid(self.create(RB, "b", roleRef=ref("a/b")), "RoleBinding", "b",
                           ("roleRef.name", "FieldValueInvalid",
                            "Invalid value: \"a/b\": may not contain '/'"))
        self.assertInvalid(self.create(RB, "b", roleRef=ref("..")), "RoleBinding", "b",
                           ("roleRef.name", "FieldValueInvalid",
                            "Invalid value: \"..\": may not be '..'"))
        self.created(CRB, "colons", roleRef=ref("system:controller:x"))

    def test_missing_role_ref(self):
        """A binding without roleRef is refused for its kind and name."""
        self.assertInvalid(self.create(CRB, "b"), "ClusterRoleBinding", "b",
                           ("roleRef.kind", "FieldValueNotSupported",
                            'Unsupported value: "": supported values: "ClusterRole"'),
                           ("roleRef.name", "FieldValueRequired", "Required value"))
        self.assertInvalid(self.create(CRB, "b", roleRef="view"), "ClusterRoleBinding", "b",
                           ("roleRef", "FieldValueTypeInvalid",
                            'Invalid value: "view": must be of type object'))


class SubjectTests(RBACTestCase):
    def test_kinds(self):
        """Subjects are Users, Groups or ServiceAccounts."""
        self.assertInvalid(
            self.create(CRB, "b", roleRef=ref(), subjects=[user(), {"kind": "Robot", "name": "r"}]),
            "ClusterRoleBinding", "b",
            ("subjects[1].kind", "FieldValueNotSupported",
             'Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"'))

    def test_name_required(self):
        """Every subject needs a name."""
        self.assertInvalid(
            self.create(RB, "b", roleRef=ref(), subjects=[{"kind": "Group"}, sa("")]),
            "RoleBinding", "b",
            ("subjects[0].name", "FieldValueRequired", "Required value"),
            ("subjects[1].name", "FieldValueRequired", "Required value"))

    def test_service_account_name(self):
        """A service account subject names a valid service account."""
        code, status = self.create(RB, "b", roleRef=ref(), subjects=[sa("Builder_1")])
        self.assertEqual(code, 422)
        cause = status["details"]["causes"][0]
        self.assertEqual((cause["field"], cause["reason"]),
                         ("subjects[0].name", "FieldValueInvalid"))
        self.assertTrue(cause["message"].startswith(
            'Invalid value: "Builder_1": a lowercase RFC 1123 subdomain'), cause)

    def test_service_account_namespace(self):
        """A ClusterRoleBinding's service accounts need a namespace; a RoleBinding's do not."""
        self.assertInvalid(self.create(CRB, "b", roleRef=ref(), subjects=[sa()]),
                           "ClusterRoleBinding", "b",
                           ("subjects[0].namespace", "FieldValueRequired", "Required value"))
        self.created(CRB, "b", roleRef=ref(), subjects=[sa(namespace="ci")])
        self.created(RB, "b", roleRef=ref(), subjects=[sa()])

    def test_api_groups(self):
        """User and Group subjects belong to the RBAC group, ServiceAccounts to the core group."""
        self.assertInvalid(
            self.create(CRB, "b", roleRef=ref(), subjects=[
                user(apiGroup="apps"), sa(namespace="ci", apiGroup=RBAC)]),
            "ClusterRoleBinding", "b",
            ("subjects[0].apiGroup", "FieldValueNotSupported",
             f'Unsupported value: "apps": supported values: "{RBAC}"'),
            ("subjects[1].apiGroup", "FieldValueNotSupported",
             'Unsupported value: "rbac.authorization.orch.io": supported values: ""'))

    def test_namespace_on_user_is_stored(self):
        """A namespace on a User or Group is stored, as upstream does; the authorizer reports it."""
        binding = self.created(CRB, "b", roleRef=ref(), subjects=[user(namespace="default")])
        self.assertEqual(binding["subjects"], [user(namespace="default", apiGroup=RBAC)])


class UpdateTests(RBACTestCase):
    """PUT, the three patch types and server-side apply go through the same rules."""

    def setUp(self):
        super().setUp()
        self.created(CR, "reader", rules=[pods("get")])
        self.created(CRB, "readers", roleRef=ref("reader"), subjects=[user()])
        self.created(RB, "local", roleRef=ref("reader"), subjects=[sa()])

    def change_role_ref(self, name):
        """The cause of changing the ClusterRole a binding names to C{name}."""
        fields = ", ".join(f'{k}:"{v}"' for k, v in
                           (("APIGroup", RBAC), ("Kind", "ClusterRole"), ("Name", name)))
        return ("roleRef", "FieldValueInvalid",
                f"Invalid value: rbac.RoleRef{{{fields}}}: cannot change roleRef")

    def test_put_creates_missing_objects(self):
        """A PUT of a missing object of any RBAC kind creates it."""
        for collection, name, body in (
                (CR, "new", {"rules": [pods("get")]}), (ROLES, "new", {}),
                (CRB, "new", {"roleRef": ref()}), (RB, "new", {"roleRef": ref()})):
            code, obj = self.call("PUT", f"{collection}/{name}",
                                  dict(body, metadata={"name": name}))
            self.assertEqual(code, 201, obj)
        self.assertEqual(self.call("GET", f"{CRB}/new")[1]["roleRef"], ref())

    def test_put_validates_rules(self):
        """A PUT with a bad rule is refused and changes nothing."""
        answer = self.call("PUT", f"{CR}/reader", {"metadata": {"name": "reader"},
                                                   "rules": [urls("/x*")]})
        self.assertEqual(answer[0], 422)
        self.assertEqual(self.call("GET", f"{CR}/reader")[1]["rules"], [pods("get")])

    def test_put_cannot_change_role_ref(self):
        """roleRef is immutable: a PUT naming another role is 422 in upstream's words."""
        answer = self.call("PUT", f"{CRB}/readers",
                           {"metadata": {"name": "readers"}, "roleRef": ref("admin")})
        self.assertInvalid(answer, "ClusterRoleBinding", "readers",
                           self.change_role_ref("admin"))

    def test_put_with_defaults_left_out_is_no_change(self):
        """Leaving out roleRef.apiGroup or spelling it upstream's way does not change roleRef."""
        for group in (None, COMPAT, ""):
            code, obj = self.call("PUT", f"{CRB}/readers", {
                "metadata": {"name": "readers"}, "roleRef": ref("reader", group=group),
                "subjects": [user("bob")]})
            self.assertEqual(code, 200, obj)
            self.assertEqual(obj["roleRef"], ref("reader"))
            self.assertEqual(obj["subjects"], [user("bob", apiGroup=RBAC)])

    def test_merge_patch(self):
        """A merge patch replaces lists whole, is defaulted, and cannot change roleRef."""
        code, obj = self.call("PATCH", f"{CR}/reader", {"rules": [urls("/metrics")]},
                              content_type=MERGE)
        self.assertEqual((code, obj["rules"]), (200, [urls("/metrics")]))
        code, obj = self.call("PATCH", f"{CRB}/readers", {"subjects": [{"kind": "Group",
                                                                       "name": "g"}]},
                              content_type=MERGE)
        self.assertEqual(obj["subjects"], [{"kind": "Group", "name": "g", "apiGroup": RBAC}])
        self.assertInvalid(
            self.call("PATCH", f"{CRB}/readers", {"roleRef": {"name": "admin"}},
                      content_type=MERGE),
            "ClusterRoleBinding", "readers", self.change_role_ref("admin"))
        self.assertInvalid(
            self.call("PATCH", f"{CR}/reader", {"rules": [{"verbs": []}]}, content_type=MERGE),
            "ClusterRole", "reader",
            ("rules[0].verbs", "FieldValueRequired",
             "Required value: verbs must contain at least one value"),
            ("rules[0].apiGroups", "FieldValueRequired",
             "Required value: resource rules must supply at least one api group"),
            ("rules[0].resources", "FieldValueRequired",
             "Required value: resource rules must supply at least one resource"))

    def test_merge_patch_dropping_role_ref(self):
        """Removing roleRef is a change of it, and leaves no kind or name."""
        answer = self.call("PATCH", f"{RB}/local", {"roleRef": None}, content_type=MERGE)
        self.assertInvalid(answer, "RoleBinding", "local",
                           ("roleRef.kind", "FieldValueNotSupported",
                            'Unsupported value: "": supported values: "Role", "ClusterRole"'),
                           ("roleRef.name", "FieldValueRequired", "Required value"),
                           ("roleRef", "FieldValueInvalid",
                            (f'Invalid value: rbac.RoleRef{{APIGroup:"{RBAC}", Kind:"", Name:""}}: '
                             "cannot change roleRef")))

    def test_json_patch(self):
        """A JSON patch may append a rule or subject; the result is defaulted and validated."""
        code, obj = self.call("PATCH", f"{CR}/reader",
                              [{"op": "add", "path": "/rules/-", "value": pods("list")}],
                              content_type=JSON_PATCH)
        self.assertEqual((code, obj["rules"]), (200, [pods("get"), pods("list")]))
        code, obj = self.call("PATCH", f"{CRB}/readers",
                              [{"op": "add", "path": "/subjects/-", "value": user("bob")}],
                              content_type=JSON_PATCH)
        self.assertEqual(obj["subjects"], [user(apiGroup=RBAC), user("bob", apiGroup=RBAC)])
        self.assertInvalid(
            self.call("PATCH", f"{CR}/reader",
                      [{"op": "remove", "path": "/rules/0/verbs"}], content_type=JSON_PATCH),
            "ClusterRole", "reader",
            ("rules[0].verbs", "FieldValueRequired",
             "Required value: verbs must contain at least one value"))
        self.assertInvalid(
            self.call("PATCH", f"{CRB}/readers",
                      [{"op": "replace", "path": "/roleRef/name", "value": "admin"}],
                      content_type=JSON_PATCH),
            "ClusterRoleBinding", "readers", self.change_role_ref("admin"))
        self.assertInvalid(
            self.call("PATCH", f"{CRB}/readers",
                      [{"op": "add", "path": "/subjects/-", "value": sa()}],
                      content_type=JSON_PATCH),
            "ClusterRoleBinding", "readers",
            ("subjects[2].namespace", "FieldValueRequired", "Required value"))

    def test_strategic_patch_replaces_lists(self):
        """A strategic merge patch replaces rules and subjects whole: every RBAC list is atomic."""
        code, obj = self.call("PATCH", f"{CR}/reader", {"rules": [pods("watch")]},
                              content_type=STRATEGIC)
        self.assertEqual((code, obj["rules"]), (200, [pods("watch")]))
        code, obj = self.call("PATCH", f"{CR}/reader",
                              {"rules": [{"apiGroups": ["apps"], "resources": ["deployments"],
                                          "verbs": ["get"]}]},
                              content_type=STRATEGIC)
        self.assertEqual(obj["rules"], [{"apiGroups": ["apps"], "resources": ["deployments"],
                                         "verbs": ["get"]}])
        code, obj = self.call("PATCH", f"{CRB}/readers", {"subjects": [user("bob")]},
                              content_type=STRATEGIC)
        self.assertEqual((code, obj["subjects"]), (200, [user("bob", apiGroup=RBAC)]))
        self.call("PATCH", f"{CR}/reader", {"aggregationRule": {
            "clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}}, content_type=STRATEGIC)
        code, obj = self.call("PATCH", f"{CR}/reader", {"aggregationRule": {
            "clusterRoleSelectors": [{"matchLabels": {"c": "d"}}]}}, content_type=STRATEGIC)
        self.assertEqual((code, obj["aggregationRule"]), (200, {"clusterRoleSelectors": [
            {"matchLabels": {"c": "d"}}]}))

    def test_strategic_patch_validates(self):
        """A strategic merge patch with a bad rule or a new roleRef is refused."""
        self.assertInvalid(
            self.call("PATCH", f"{CR}/reader", {"rules": [urls("/a", "/b*")]},
                      content_type=STRATEGIC),
            "ClusterRole", "reader",
            ("rules[0].nonResourceURLs[1]", "FieldValueInvalid",
             "Invalid value: \"/b*\": '*' is allowed only as a whole, final path segment"))
        self.assertInvalid(
            self.call("PATCH", f"{RB}/local", {"roleRef": {"kind": "Role"}},
                      content_type=STRATEGIC),
            "RoleBinding", "local",
            ("roleRef", "FieldValueInvalid",
             (f'Invalid value: rbac.RoleRef{{APIGroup:"{RBAC}", Kind:"Role", Name:"reader"}}: '
              "cannot change roleRef")))

    def test_role_update_rules(self):
        """A Role keeps refusing non-resource URLs on update."""
        self.created(ROLES, "r", rules=[pods("get")])
        self.assertInvalid(
            self.call("PATCH", f"{ROLES}/r", {"rules": [urls("/healthz")]}, content_type=MERGE),
            "Role", "r",
            ("rules[0].nonResourceURLs", "FieldValueInvalid",
             ('Invalid value: []string{"/healthz"}: '
              "namespaced rules cannot apply to non-resource URLs")))


class ApplyTests(RBACTestCase):
    def test_apply_rules_atomic(self):
        """Applied rules replace the list whole, owned as one field; another manager conflicts."""
        code, role = self.apply(CR, "ClusterRole", "r", rules=[pods("get")])
        self.assertEqual(code, 201, role)
        self.assertEqual(role["metadata"]["managedFields"][0]["fieldsV1"], {"f:rules": {}})
        code, role = self.apply(CR, "ClusterRole", "r", rules=[pods("list")])
        self.assertEqual((code, role["rules"]), (200, [pods("list")]))
        code, status = self.apply(CR, "ClusterRole", "r", manager="bob", rules=[pods("watch")])
        self.assertEqual(code, 409)
        self.assertEqual(status["message"], 'Apply failed with 1 conflict: conflict with "alice": '
                                            ".rules")

    def test_apply_validates(self):
        """An applied bad rule is refused, on create and on update."""
        verbs = ("rules[0].verbs", "FieldValueRequired",
                 "Required value: verbs must contain at least one value")
        self.assertInvalid(self.apply(CR, "ClusterRole", "r", rules=[pods()]),
                           "ClusterRole", "r", verbs)
        self.apply(CR, "ClusterRole", "r", rules=[pods("get")])
        self.assertInvalid(self.apply(CR, "ClusterRole", "r", rules=[pods()]),
                           "ClusterRole", "r", verbs)

    def test_apply_binding(self):
        """Applied bindings are defaulted, keep their roleRef, and reapplying is a no-op."""
        subjects = [user(), {"kind": "Group", "name": "g", "apiGroup": COMPAT}]
        code, binding = self.apply(CRB, "ClusterRoleBinding", "b", api_version=f"{COMPAT}/v1",
                                   roleRef=ref(group=COMPAT), subjects=subjects)
        self.assertEqual(code, 201, binding)
        self.assertEqual(binding["roleRef"], ref())
        self.assertEqual(binding["subjects"], [user(apiGroup=RBAC),
                                               {"kind": "Group", "name": "g", "apiGroup": RBAC}])
        version = binding["metadata"]["resourceVersion"]
        code, again = self.apply(CRB, "ClusterRoleBinding", "b", api_version=f"{COMPAT}/v1",
                                 roleRef=ref(group=COMPAT), subjects=subjects)
        self.assertEqual((code, again["metadata"]["resourceVersion"]), (200, version))
        self.assertInvalid(self.apply(CRB, "ClusterRoleBinding", "b", roleRef=ref("admin")),
                           "ClusterRoleBinding", "b",
                           ("roleRef", "FieldValueInvalid",
                            (f'Invalid value: rbac.RoleRef{{APIGroup:"{RBAC}", '
                             'Kind:"ClusterRole", Name:"admin"}: cannot change roleRef')))

    def test_apply_role_binding_subjects(self):
        """Applied subjects are checked: cluster-wide service accounts need a namespace."""
        self.assertInvalid(self.apply(CRB, "ClusterRoleBinding", "b", roleRef=ref(),
                                      subjects=[sa()]),
                           "ClusterRoleBinding", "b",
                           ("subjects[0].namespace", "FieldValueRequired", "Required value"))
        code, binding = self.apply(RB, "RoleBinding", "b", roleRef=ref("r", kind="Role"),
                                   subjects=[sa()])
        self.assertEqual((code, binding["subjects"]), (201, [sa()]))
