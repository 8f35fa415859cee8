"""Tests for L{orchd.api.kinds}: what a KindInfo carries, and what it has by default."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api import patchschema, schemas, tables
from orchd.api.fieldvalidation import prune_unknown_fields
from orchd.api.kinds import AUTHENTICATION, KindInfo, key_prefix_of, subresource_kind
from orchd.registry.kinds.builtin import KINDS
from tests.builtinkinds import kind_info


class DefaultsTests(SynchronousTestCase):
    def test_a_kind_with_no_rules(self):
        """A kind named and nothing else is loose, prints the default table, and merges by ObjectMeta's rules."""
        info = KindInfo("example.orch.io", "v1", "widgets", "Widget", True)
        self.assertIs(info.schema, schemas.LOOSE)
        self.assertIsNone(info.printer)
        self.assertIs(tables.printer_for(info), tables.DEFAULT_PRINTER)
        self.assertIs(info.patch_schema, patchschema.DEFAULT)
        self.assertEqual(set(info.patch_schema), {"metadata"})
        self.assertEqual((info.selectable_fields, info.subresource_kinds), ((), {}))
        self.assertEqual(info.storage_version, "v1")

    def test_facets_kept(self):
        """The facets a row names are the KindInfo's attributes."""
        pod = kind_info("", "Pod")
        self.assertIs(pod.patch_schema, patchschema.POD)
        self.assertIn("spec.nodeName", pod.selectable_fields)
        self.assertEqual(tables.column_definitions(pod)[1]["name"], "Ready")

    def test_derived_per_kind(self):
        """What modules derive from a kind is kept with that KindInfo alone."""
        one = KindInfo("example.orch.io", "v1", "widgets", "Widget", True)
        two = KindInfo("example.orch.io", "v1", "widgets", "Widget", True)
        self.assertIs(schemas.kind_definitions(one), schemas.kind_definitions(one))
        self.assertEqual(two.derived, {})


class SubresourceKindTests(SynchronousTestCase):
    def test_parent_kind(self):
        """A subresource without a kind of its own sends and answers its parent's."""
        pods = kind_info("", "Pod")
        self.assertIs(subresource_kind(pods, "status"), pods)

    def test_own_kind(self):
        """serviceaccounts/token takes a TokenRequest, which has no schema and is not pruned."""
        token = subresource_kind(kind_info("", "ServiceAccount"), "token")
        self.assertEqual((token.group, token.version, token.kind, token.resource, token.verbs),
                         (AUTHENTICATION, "v1", "TokenRequest", "serviceaccounts/token",
                          ("create",)))
        self.assertIsNone(token.schema)
        body = {"apiVersion": "authentication.orch.io/v1", "kind": "TokenRequest",
                "metadata": {"bogus": 1}, "spec": {"audiences": ["a"], "extra": 2}}
        self.assertEqual(prune_unknown_fields(body, token), [])
        self.assertEqual(body["spec"]["extra"], 2)
        self.assertRaises(ValueError, schemas.kind_definitions, token)


class KeyPrefixTests(SynchronousTestCase):
    def test_same_as_kind_info(self):
        """key_prefix_of gives every built-in resource the prefix its KindInfo has."""
        for info in KINDS:
            self.assertEqual(key_prefix_of(info.group, info.resource), info.key_prefix(), info)
        self.assertEqual(key_prefix_of("", "pods"), "/registry/pods/")
        self.assertEqual(key_prefix_of("apps", "deployments"), "/registry/apps/deployments/")
