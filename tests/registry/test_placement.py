"""Node selectors, node affinity and tolerations are checked as upstream's pod validation."""

from twisted.trial.unittest import SynchronousTestCase

from tests.support import APIHarness

PODS = "/api/v1/namespaces/default/pods"
DAEMONSETS = "/apis/apps/v1/namespaces/default/daemonsets"


def pod(name, **spec):
    return {"metadata": {"name": name},
            "spec": dict({"containers": [{"name": "c", "image": "nginx"}]}, **spec)}


def required(*terms):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}


class PlacementTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.count = 0

    def causes(self, **spec):
        self.count += 1
        code, body, _ = self.api.call("POST", PODS, pod(f"p{self.count}", **spec))
        if code == 201:
            return []
        self.assertEqual(code, 422, body)
        return [f"{c['field']}: {c['message']}" for c in body["details"]["causes"]]

    def test_valid_placements_are_taken(self):
        """Selectors, affinity of every operator and the usual tolerations are accepted."""
        self.assertEqual(self.causes(
            nodeSelector={"disk": "ssd", "orch.io/arch": "amd64"},
            affinity=required(
                {"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a", "b"]},
                    {"key": "gpu", "operator": "Exists"},
                    {"key": "cores", "operator": "Gt", "values": ["4"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In",
                                  "values": ["node-1"]}]}),
            tolerations=[{"operator": "Exists"},
                         {"key": "dedicated", "operator": "Equal", "value": "infra",
                          "effect": "NoSchedule"},
                         {"key": "node.orch.io/not-ready", "operator": "Exists",
                          "effect": "NoExecute", "tolerationSeconds": 300}]), [])

    def test_node_affinity_errors(self):
        """Operators, value counts, keys and field selectors are refused with upstream's words."""
        base = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        terms = f"{base}.nodeSelectorTerms"
        self.assertEqual(self.causes(affinity=required(
            {"matchExpressions": [{"key": "zone", "operator": "In"},
                                  {"key": "gpu", "operator": "Exists", "values": ["x"]},
                                  {"key": "cores", "operator": "Gt", "values": ["1", "2"]},
                                  {"key": "zone", "operator": "Near", "values": ["a"]}]},
            {"matchFields": [{"key": "metadata.labels", "operator": "In", "values": ["a"]},
                             {"key": "metadata.name", "operator": "In",
                              "values": ["a", "b"]}]})), [
            f"{terms}[0].matchExpressions[0].values: Required value: must be specified when "
            "`operator` is 'In' or 'NotIn'",
            f"{terms}[0].matchExpressions[1].values: Forbidden: may not be specified when "
            "`operator` is 'Exists' or 'DoesNotExist'",
            f"{terms}[0].matchExpressions[2].values: Required value: must be specified single "
            "value when `operator` is 'Lt' or 'Gt'",
            f'{terms}[0].matchExpressions[3].operator: Invalid value: "Near": not a valid '
            "selector operator",
            f'{terms}[1].matchFields[0].key: Invalid value: "metadata.labels": not a valid '
            "field selector key",
            f"{terms}[1].matchFields[1].values: Required value: must be only one value when "
            "`operator` is 'In' or 'NotIn' for node field selector"])
        self.assertEqual(self.causes(affinity=required()), [
            f"{terms}: Required value: must have at least one node selector term"])
        self.assertEqual(self.causes(affinity={"nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 101, "preference": {"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a"]}]}}]}}), [
            "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
            ".weight: Invalid value: 101: must be in the range 1-100"])

    def test_toleration_errors(self):
        """Bad operators, effects, values and seconds without NoExecute are refused."""
        self.assertEqual(self.causes(tolerations=[
            {"key": "a", "operator": "Bogus"},
            {"operator": "Equal", "value": "x"},
            {"key": "a", "operator": "Exists", "value": "x"},
            {"key": "a", "effect": "Sometimes"},
            {"key": "a", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]), [
            'spec.tolerations[0].operator: Unsupported value: "Bogus": supported values: '
            '"Equal", "Exists"',
            'spec.tolerations[1].operator: Invalid value: "Equal": operator must be Exists when '
            '`key` is empty, which means "match all values and all keys"',
            "spec.tolerations[2].operator: Invalid value: \"x\": value must be empty when "
            "`operator` is 'Exists'",
            'spec.tolerations[3].effect: Unsupported value: "Sometimes": supported values: '
            '"NoSchedule", "PreferNoSchedule", "NoExecute"',
            "spec.tolerations[4].effect: Invalid value: \"NoSchedule\": effect must be "
            "'NoExecute' when `tolerationSeconds` is set"])

    def test_node_selector_errors(self):
        """Node selector keys and values are label keys and values."""
        causes = self.causes(nodeSelector={"a b": "x", "ok": "not ok!", "n": 5})
        self.assertEqual([c.split(":")[0] for c in causes],
                         ["spec.nodeSelector", "spec.nodeSelector", "spec.nodeSelector[n]"])

    def test_templates_are_checked_too(self):
        """A workload's pod template is refused as a pod would be."""
        labels = {"app": "d"}
        code, body, _ = self.api.call("POST", DAEMONSETS, {
            "metadata": {"name": "d"}, "spec": {
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {
                    "containers": [{"name": "c", "image": "i"}],
                    "tolerations": [{"key": "a", "operator": "Bogus"}]}}}})
        self.assertEqual(code, 422, body)
        self.assertEqual(body["details"]["causes"][0]["field"],
                         "spec.template.spec.tolerations[0].operator")
