"""PodDisruptionBudget validation: upstream's rules of the spec, as 422s naming the field."""

from twisted.trial.unittest import SynchronousTestCase

from tests.support import APIHarness

PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"


def budget(**spec):
    return {"metadata": {"name": "web"}, "spec": spec}


class BudgetValidationTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def create(self, body):
        code, answer, _ = self.api.call("POST", PDBS, body)
        return code, answer

    def test_valid_budgets(self):
        """Integers, percentages, a selector and each eviction policy are taken."""
        for index, spec in enumerate(({"minAvailable": 2}, {"maxUnavailable": "25%"},
                                      {"minAvailable": "100%", "selector": {"matchExpressions": [
                                          {"key": "app", "operator": "In",
                                           "values": ["web"]}]}},
                                      {"maxUnavailable": 0,
                                       "unhealthyPodEvictionPolicy": "AlwaysAllow"},
                                      {"unhealthyPodEvictionPolicy": "IfHealthyBudget"})):
            body = budget(**spec)
            body["metadata"]["name"] = f"b{index}"
            code, answer = self.create(body)
            self.assertEqual(code, 201, answer)
            self.assertEqual(answer["status"], {"disruptionsAllowed": 0, "currentHealthy": 0,
                                                "desiredHealthy": 0, "expectedPods": 0})

    def test_invalid_budgets(self):
        """Both bounds, negative or over-100% values, bad selectors and policies are 422."""
        cases = [
            ({"minAvailable": 1, "maxUnavailable": 1},
             "spec: Invalid value: ", "minAvailable and maxUnavailable cannot be both set"),
            ({"minAvailable": -1}, "spec.minAvailable: Invalid value: -1",
             "must be greater than or equal to 0"),
            ({"maxUnavailable": "120%"}, 'spec.maxUnavailable: Invalid value: "120%"',
             "must not be greater than 100%"),
            ({"minAvailable": "abc"}, 'spec.minAvailable: Invalid value: "abc"',
             "a valid percent string"),
            ({"minAvailable": 1, "selector": {"matchExpressions": [
                {"key": "app", "operator": "Near", "values": ["web"]}]}},
             "spec.selector.matchExpressions[0].operator", "not a valid selector operator"),
            ({"minAvailable": 1, "selector": {"matchLabels": {"app": "not valid!"}}},
             "spec.selector.matchLabels", "Invalid value"),
            ({"unhealthyPodEvictionPolicy": "Never"},
             'spec.unhealthyPodEvictionPolicy: Unsupported value: "Never"',
             '"AlwaysAllow", "IfHealthyBudget"'),
        ]
        for spec, field, text in cases:
            code, answer = self.create(budget(**spec))
            self.assertEqual(code, 422, (spec, answer))
            self.assertIn(field, answer["message"], spec)
            self.assertIn(text, answer["message"], spec)

    def test_update_is_validated(self):
        """An update to an invalid spec is refused as a create is."""
        self.assertEqual(self.create(budget(minAvailable=1))[0], 201)
        code, answer, _ = self.api.call("PATCH", f"{PDBS}/web", {"spec": {"maxUnavailable": 1}},
                                        content_type=b"application/merge-patch+json")
        self.assertEqual(code, 422, answer)
