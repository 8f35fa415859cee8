"""ClusterRole aggregation: rules follow the selected roles, and direct edits are undone."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.auth.rbac.rules import rule
from orchd.controllers.clusterroleaggregation import ClusterRoleAggregation, aggregated_rules
from tests.support import APIHarness

RBAC = "rbac.authorization.orch.io"
ROLES = f"/apis/{RBAC}/v1/clusterroles"
VIEW = {"rbac.example.com/aggregate-to-view": "true"}
READ_PODS = rule(["get"], [""], ["pods"])
READ_CMS = rule(["get"], [""], ["configmaps"])


def role(name, rules=(), labels=None, selectors=None):
    body = {"metadata": {"name": name}, "rules": list(rules)}
    if labels:
        body["metadata"]["labels"] = labels
    if selectors is not None:
        body["aggregationRule"] = {"clusterRoleSelectors": selectors}
    return body


class AggregatedRulesTests(SynchronousTestCase):
    def test_union_in_name_order_without_repeats(self):
        roles = {"b": role("b", [READ_CMS, READ_PODS], VIEW), "a": role("a", [READ_PODS], VIEW),
                 "c": role("c", [rule(["*"], ["*"], ["*"])]),
                 "view": role("view", [rule(["delete"], [""], ["x"])], VIEW, [{"matchLabels": VIEW}])}
        self.assertEqual(aggregated_rules("view", [{"matchLabels": VIEW}], roles),
                         [READ_PODS, READ_CMS])

    def test_bad_selector_selects_nothing(self):
        roles = {"a": role("a", [READ_PODS], VIEW)}
        self.assertEqual(aggregated_rules("x", [{"matchExpressions": [{"operator": "Bad"}]}],
                                          roles), [])


class ControllerTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        controller = ClusterRoleAggregation(self.api.catalog, self.api.clock)
        controller.startService()
        self.addCleanup(controller.stopService)
        self.successResultOf(controller.started)

    def call(self, method, path, body=None, **kwargs):
        code, obj, _ = self.api.call(method, path, body, **kwargs)
        self.api.clock.advance(1)
        return code, obj

    def rules_of(self, name):
        return self.call("GET", f"{ROLES}/{name}")[1].get("rules")

    def test_follows_selected_roles(self):
        """Rules appear with a labelled role, change with it, and leave with its label."""
        self.call("POST", ROLES, role("view", selectors=[{"matchLabels": VIEW}]))
        self.assertEqual(self.rules_of("view"), [])
        self.call("POST", ROLES, role("pods", [READ_PODS], VIEW))
        self.assertEqual(self.rules_of("view"), [READ_PODS])
        self.call("PATCH", f"{ROLES}/pods", {"rules": [READ_CMS]},
                  content_type=b"application/merge-patch+json")
        self.assertEqual(self.rules_of("view"), [READ_CMS])
        self.call("PATCH", f"{ROLES}/pods", {"metadata": {"labels": None}},
                  content_type=b"application/merge-patch+json")
        self.assertEqual(self.rules_of("view"), [])

    def test_direct_edit_undone(self):
        """Rules written straight into an aggregated role are replaced again."""
        self.call("POST", ROLES, role("pods", [READ_PODS], VIEW))
        self.call("POST", ROLES, role("view", selectors=[{"matchLabels": VIEW}]))
        self.assertEqual(self.rules_of("view"), [READ_PODS])
        code, _ = self.call("PATCH", f"{ROLES}/view", {"rules": [rule(["*"], ["*"], ["*"])]},
                            content_type=b"application/merge-patch+json")
        self.assertEqual(code, 200)
        self.assertEqual(self.rules_of("view"), [READ_PODS])

    def test_chained_aggregation(self):
        """An aggregated role can itself be selected (view into edit)."""
        edit = {"rbac.example.com/aggregate-to-edit": "true"}
        self.call("POST", ROLES, role("edit", selectors=[{"matchLabels": edit}]))
        self.call("POST", ROLES, role("view", labels=edit, selectors=[{"matchLabels": VIEW}]))
        self.call("POST", ROLES, role("pods", [READ_PODS], VIEW))
        self.assertEqual(self.rules_of("edit"), [READ_PODS])
