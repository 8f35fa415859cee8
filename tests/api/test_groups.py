"""Upstream spellings of renamed groups, accepted from typed clients."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.groups import canonical_api_version, canonical_group, in_spelling
from tests.support import APIHarness


class SpellingTests(SynchronousTestCase):
    def test_canonical(self):
        """k8s.io groups map to their orch.io names; kept and plain groups do not change."""
        self.assertEqual(canonical_group("rbac.authorization.k8s.io"),
                         "rbac.authorization.orch.io")
        self.assertEqual(canonical_group("apps"), "apps")
        self.assertEqual(canonical_group("meta.k8s.io"), "meta.k8s.io")
        self.assertEqual(canonical_api_version("scheduling.k8s.io/v1"), "scheduling.orch.io/v1")
        self.assertEqual(canonical_api_version("v1"), "v1")

    def test_in_spelling_copies(self):
        """Answers are re-spelled on copies; lists re-spell their items."""
        obj = {"apiVersion": "a.orch.io/v1", "kind": "XList",
               "items": [{"apiVersion": "a.orch.io/v1", "kind": "X"}]}
        out = in_spelling(obj, "a.k8s.io/v1")
        self.assertEqual(out["items"][0]["apiVersion"], "a.k8s.io/v1")
        self.assertEqual(obj["items"][0]["apiVersion"], "a.orch.io/v1")


class AliasRequestTests(SynchronousTestCase):
    def test_upstream_path_served(self):
        """A create under the upstream group path is stored under the renamed group."""
        api = APIHarness()
        path = "/apis/scheduling.k8s.io/v1/priorityclasses"
        code, obj, _ = api.call("POST", path, {"apiVersion": "scheduling.k8s.io/v1",
                                               "kind": "PriorityClass",
                                               "metadata": {"name": "p"}, "value": 5})
        self.assertEqual(code, 201)
        self.assertEqual(obj["apiVersion"], "scheduling.k8s.io/v1")
        _, stored, _ = api.call("GET", "/apis/scheduling.orch.io/v1/priorityclasses/p")
        self.assertEqual(stored["apiVersion"], "scheduling.orch.io/v1")
        _, listed, _ = api.call("GET", path)
        self.assertEqual((listed["apiVersion"], listed["items"][0]["apiVersion"]),
                         ("scheduling.k8s.io/v1", "scheduling.k8s.io/v1"))

    def test_discovery_shows_only_renamed(self):
        """Discovery lists only the orch.io spelling."""
        _, groups, _ = APIHarness().call("GET", "/apis")
        names = [g["name"] for g in groups["groups"]]
        self.assertIn("scheduling.orch.io", names)
        self.assertFalse([n for n in names if n.endswith(".k8s.io")])
