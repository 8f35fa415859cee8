"""Upstream spellings of renamed groups, accepted from typed clients."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.groups import (
    canonical_api_version, canonical_group, in_spelling, upstream_alias, upstream_group,
    with_upstream_names,
)
from orchd.api.kinds import KindInfo
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


class UpstreamAliasTests(SynchronousTestCase):
    def test_upstream_group(self):
        """Only orch.io groups have an upstream spelling, the inverse of canonical_group."""
        self.assertEqual(upstream_group("apiextensions.orch.io"), "apiextensions.k8s.io")
        self.assertEqual(canonical_group(upstream_group("flowcontrol.apiserver.orch.io")),
                         "flowcontrol.apiserver.orch.io")
        for group in ("", "apps", "example.com", "rbac.authorization.k8s.io", "orch.io"):
            self.assertIsNone(upstream_group(group), group)

    def test_alias(self):
        """An alias differs only in its group and has no short names or categories."""
        info = KindInfo("networking.orch.io", "v1", "ingresses", "Ingress", True,
                        short_names=("ing",), categories=("all",), subresources=("status",))
        alias = upstream_alias(info)
        self.assertEqual((alias.group, alias.resource, alias.kind, alias.version),
                         ("networking.k8s.io", "ingresses", "Ingress", "v1"))
        self.assertEqual((alias.short_names, alias.categories), ((), ()))
        self.assertEqual((alias.subresources, alias.schema, alias.namespaced),
                         (info.subresources, info.schema, True))
        self.assertEqual((info.group, info.short_names), ("networking.orch.io", ("ing",)))
        self.assertIs(upstream_alias(info), alias)
        self.assertIsNot(alias.derived, info.derived)

    def test_with_upstream_names(self):
        """The served kinds come first, then the aliases of the renamed groups' kinds only."""
        kinds = [KindInfo("", "v1", "pods", "Pod", True),
                 KindInfo("rbac.authorization.orch.io", "v1", "roles", "Role", True),
                 KindInfo("example.com", "v1", "widgets", "Widget", True)]
        described = with_upstream_names(kinds)
        self.assertEqual(described[:3], kinds)
        self.assertEqual([(k.group, k.resource) for k in described[3:]],
                         [("rbac.authorization.k8s.io", "roles")])
