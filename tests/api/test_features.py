"""Tests for L{orchd.api.features}."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.features import ALPHA, BETA, GA, KNOWN_FEATURES, FeatureGates, FeatureSpec


class DefaultsTests(SynchronousTestCase):
    """Without overrides every gate has its documented default."""

    def test_specification_defaults(self):
        """The checkpoint gate is alpha and off; the GA gates are locked on."""
        gates = FeatureGates.defaults()
        self.assertFalse(gates.enabled("ContainerCheckpoint"))
        self.assertEqual(KNOWN_FEATURES["ContainerCheckpoint"].stage, ALPHA)
        for name in ("ServiceIPStaticSubrange", "NodeOutOfServiceVolumeDetach", "WatchBookmark",
                     "ServerSideApply"):
            self.assertTrue(gates.enabled(name), name)
            self.assertEqual(KNOWN_FEATURES[name].stage, GA)
            self.assertTrue(KNOWN_FEATURES[name].locked, name)

    def test_beta_gates_on(self):
        """Beta gates default to on and are not locked."""
        gates = FeatureGates.defaults()
        for name in ("RemainingItemCount", "ProxyTerminatingEndpoints", "WatchList"):
            self.assertTrue(gates.enabled(name), name)
            self.assertEqual(KNOWN_FEATURES[name].stage, BETA)
            self.assertFalse(KNOWN_FEATURES[name].locked)

    def test_empty_text(self):
        """An empty flag is the defaults."""
        self.assertEqual(FeatureGates.parse(""), FeatureGates.defaults())
        self.assertEqual(FeatureGates.parse(None), FeatureGates.defaults())

    def test_unknown_name_lookup(self):
        """Asking for a gate that does not exist is a programming error."""
        self.assertRaises(KeyError, FeatureGates.defaults().enabled, "Nope")


class ParseTests(SynchronousTestCase):
    """C{Name=true|false,...} as the flag is written."""

    def test_overrides(self):
        """Gates named in the text take its values; others keep their default."""
        gates = FeatureGates.parse("ContainerCheckpoint=true, WatchList=False,RemainingItemCount=0")
        self.assertTrue(gates.enabled("ContainerCheckpoint"))
        self.assertFalse(gates.enabled("WatchList"))
        self.assertFalse(gates.enabled("RemainingItemCount"))
        self.assertTrue(gates.enabled("ProxyTerminatingEndpoints"))

    def test_later_wins(self):
        """A gate named twice takes the later value."""
        self.assertTrue(FeatureGates.parse("WatchList=false,WatchList=true").enabled("WatchList"))

    def test_locked_to_default_allowed(self):
        """Setting a locked gate to its locked value is accepted."""
        self.assertTrue(FeatureGates.parse("ServerSideApply=true").enabled("ServerSideApply"))

    def test_errors(self):
        """Upstream's messages for each kind of mistake."""
        cases = {
            "Nope=true": "unrecognized feature gate: Nope",
            "ServiceIPStaticSubrange=false": "cannot set feature gate ServiceIPStaticSubrange "
                                             "to false, feature is locked to true",
            "WatchList": "missing bool value for WatchList",
            "WatchList=perhaps": "invalid value of WatchList=perhaps",
        }
        for text, message in cases.items():
            with self.assertRaises(ValueError) as caught:
                FeatureGates.parse(text)
            self.assertIn(message, str(caught.exception))

    def test_mapping(self):
        """A YAML mapping works like the text form."""
        gates = FeatureGates.from_mapping({"ContainerCheckpoint": True, "WatchList": "false"})
        self.assertEqual(gates, FeatureGates.parse("ContainerCheckpoint=true,WatchList=false"))
        self.assertRaises(ValueError, FeatureGates.from_mapping, {"WatchBookmark": False})

    def test_custom_table(self):
        """The gate table can be replaced, as tests of new gates need."""
        known = {"Shiny": FeatureSpec(False, ALPHA)}
        self.assertTrue(FeatureGates.parse("Shiny=true", known).enabled("Shiny"))
        self.assertRaises(ValueError, FeatureGates.parse, "WatchList=false", known)


class ImmutabilityTests(SynchronousTestCase):
    """Feature gates cannot change once built."""

    def test_no_assignment(self):
        """Attributes cannot be set."""
        gates = FeatureGates.defaults()
        self.assertRaises(AttributeError, setattr, gates, "_values", {})

    def test_copy_is_detached(self):
        """as_dict returns a copy; changing it changes nothing."""
        gates = FeatureGates.defaults()
        values = gates.as_dict()
        values["ContainerCheckpoint"] = True
        self.assertFalse(gates.enabled("ContainerCheckpoint"))

    def test_hashable(self):
        """Equal gates hash alike, so a frozen Config holding them is hashable."""
        self.assertEqual(hash(FeatureGates.parse("WatchList=true")), hash(FeatureGates.defaults()))
