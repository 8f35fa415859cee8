"""Tests for L{orchd.api.versions}: C{--runtime-config}."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.kinds import KindInfo
from orchd.api.versions import enabled_kinds, parse_runtime_config
from orchd.registry.kinds.builtin import KINDS


def served(text, kinds=KINDS):
    """The C{(group, version, resource)} triples served under C{text}."""
    return {(info.group, info.version, info.resource) for info in enabled_kinds(text, kinds)}


def _kind(group, version, resource):
    return KindInfo(group, version, resource, resource.capitalize(), True)


#: A small table with one version of each stage, so outcomes are easy to read.
TABLE = (
    _kind("", "v1", "pods"),
    _kind("", "v1", "secrets"),
    _kind("apps", "v1", "deployments"),
    _kind("apps", "v1beta1", "deployments"),
    _kind("apps", "v1beta1", "widgets"),
    _kind("coord", "v1alpha1", "candidates"),
)
STABLE = {("", "v1", "pods"), ("", "v1", "secrets"), ("apps", "v1", "deployments")}
BETA = {("apps", "v1beta1", "deployments"), ("apps", "v1beta1", "widgets")}
ALPHA = {("coord", "v1alpha1", "candidates")}


class DefaultTests(SynchronousTestCase):
    """Stable versions on, alpha and beta off."""

    def test_defaults(self):
        """An empty runtime config serves the stable versions only."""
        self.assertEqual(served("", TABLE), STABLE)
        self.assertEqual(served(None, TABLE), STABLE)

    def test_real_table(self):
        """Every stable row of the real table is served, and the resource metrics beta."""
        expected = {(i.group, i.version, i.resource) for i in KINDS
                    if i.stage == "stable" or i.group == "metrics.orch.io"}
        self.assertEqual(served(""), expected)
        self.assertNotIn(("flowcontrol.apiserver.orch.io", "v1beta2", "flowschemas"), served(""))

    def test_table_order(self):
        """The result keeps the table's order."""
        self.assertEqual(enabled_kinds("api/all", TABLE), list(TABLE))


class StageKeyTests(SynchronousTestCase):
    """C{api/all}, C{api/ga}, C{api/beta}, C{api/alpha}."""

    def test_all(self):
        """api/all turns everything on, or off."""
        self.assertEqual(served("api/all", TABLE), STABLE | BETA | ALPHA)
        self.assertEqual(served("api/all=false", TABLE), set())

    def test_stages(self):
        """Each stage key addresses only its stage."""
        self.assertEqual(served("api/beta=true", TABLE), STABLE | BETA)
        self.assertEqual(served("api/alpha", TABLE), STABLE | ALPHA)
        self.assertEqual(served("api/ga=false", TABLE), set())

    def test_stage_order_fixed(self):
        """api/all is applied before the narrower keys, whatever the written order."""
        self.assertEqual(served("api/ga=true,api/all=false", TABLE), STABLE)


class VersionAndResourceTests(SynchronousTestCase):
    """C{<group>/<version>} and C{<group>/<version>/<resource>} keys."""

    def test_version(self):
        """A version key switches one group/version, over the stage keys."""
        self.assertEqual(served("apps/v1beta1", TABLE), STABLE | BETA)
        self.assertEqual(served("api/all=false,apps/v1=true", TABLE),
                         {("apps", "v1", "deployments")})
        self.assertEqual(served("apps/v1=false", TABLE), STABLE - {("apps", "v1", "deployments")})

    def test_core_spellings(self):
        """The core group is v1, /v1 or api/v1."""
        core = {("", "v1", "pods"), ("", "v1", "secrets")}
        for key in ("v1", "/v1", "api/v1"):
            self.assertEqual(served(f"{key}=false", TABLE), STABLE - core, key)

    def test_resource_in_disabled_version(self):
        """Enabling one resource of a disabled version serves just that resource."""
        self.assertEqual(served("apps/v1beta1/widgets", TABLE),
                         STABLE | {("apps", "v1beta1", "widgets")})
        self.assertEqual(served("v1=false,api/v1/pods=true", TABLE),
                         {("", "v1", "pods"), ("apps", "v1", "deployments")})
        self.assertEqual(served("v1=false,v1/secrets", TABLE),
                         {("", "v1", "secrets"), ("apps", "v1", "deployments")})

    def test_resource_beats_version(self):
        """A resource key wins over its version key, whatever the order."""
        self.assertEqual(served("apps/v1beta1/widgets=false,apps/v1beta1=true", TABLE),
                         STABLE | {("apps", "v1beta1", "deployments")})
        self.assertEqual(served("api/v1/pods=false", TABLE), STABLE - {("", "v1", "pods")})

    def test_real_group(self):
        """A beta group of the real table can be switched on."""
        self.assertIn(("flowcontrol.apiserver.orch.io", "v1beta2", "flowschemas"),
                      served("flowcontrol.apiserver.orch.io/v1beta2=true"))


class ErrorTests(SynchronousTestCase):
    """Names the table lacks and values that are not booleans are errors."""

    def assertRejected(self, text, says):
        with self.assertRaises(ValueError) as caught:
            enabled_kinds(text, TABLE)
        self.assertIn(says, str(caught.exception))

    def test_unknown_names(self):
        """Unknown groups, versions, resources and stage keys are named in the message."""
        self.assertRejected("nope/v1", "unknown API group 'nope'")
        self.assertRejected("apps/v2", "unknown group version apps/v2")
        self.assertRejected("apps/v1/gadgets", "unknown resource 'gadgets'")
        self.assertRejected("api/gamma", "stage keys")
        self.assertRejected("v3", "unknown group version v3")
        self.assertRejected("a/b/c/d", "invalid key")

    def test_uppercase_resource(self):
        """Resources are lowercase plurals, as upstream insists."""
        self.assertRejected("apps/v1/Deployments", "lowercase plural")

    def test_bad_values(self):
        """A value must be a boolean."""
        self.assertRejected("api/all=yes please", "invalid value of api/all")
        self.assertRejected("apps/v1=2", "invalid value of apps/v1")
        self.assertRejected("=true", "missing key")


class ParseTests(SynchronousTestCase):
    """The flag's text as key/value pairs."""

    def test_pairs(self):
        """Omitted values are true, spaces and empty items ignored, later repeats win."""
        self.assertEqual(parse_runtime_config(" api/beta , apps/v1=FALSE,,apps/v1=1 "),
                         {"api/beta": True, "apps/v1": True})
