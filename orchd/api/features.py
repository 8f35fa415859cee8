# -*- test-case-name: tests.api.test_features -*-
"""
Feature gates: named switches for behaviour that is still maturing.

A gate has a stage and a default: alpha gates are off until switched on, beta
gates are on but may be switched off, GA gates are locked on (the gate stays
only so old command lines keep parsing). C{--feature-gates} is parsed once at
start-up into an immutable L{FeatureGates}; code asks
C{gates.enabled("Name")} instead of reading flags.
"""

from types import MappingProxyType

ALPHA = "ALPHA"
BETA = "BETA"
GA = "GA"


class FeatureSpec:
    """
    What is known about one gate: its default, its stage and whether it is locked.

    @ivar locked: a locked gate can only be set to its default.
    """

    __slots__ = ("default", "stage", "locked")

    def __init__(self, default, stage, locked=False):
        self.default = default
        self.stage = stage
        self.locked = locked

    def __repr__(self):
        lock = ", locked" if self.locked else ""
        return f"<FeatureSpec {self.stage} default={self.default}{lock}>"


#: Every gate orchd knows, with upstream's stage and default for release 1.36.
#: C{RemainingItemCount} is GA upstream; here it is beta so that lists can be
#: served without C{remainingItemCount} when a client chokes on it.
KNOWN_FEATURES = MappingProxyType({
    "ContainerCheckpoint": FeatureSpec(False, ALPHA),
    "NodeOutOfServiceVolumeDetach": FeatureSpec(True, GA, locked=True),
    "ProxyTerminatingEndpoints": FeatureSpec(True, BETA),
    "RemainingItemCount": FeatureSpec(True, BETA),
    "ServerSideApply": FeatureSpec(True, GA, locked=True),
    "ServiceIPStaticSubrange": FeatureSpec(True, GA, locked=True),
    "WatchBookmark": FeatureSpec(True, GA, locked=True),
    "WatchList": FeatureSpec(True, BETA),
})

_TRUE = frozenset({"1", "t", "true"})
_FALSE = frozenset({"0", "f", "false"})


def _parse_bool(name, text):
    """Read a gate's value the way Go's C{strconv.ParseBool} does."""
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"invalid value of {name}={text}, err: expected true or false")


class FeatureGates:
    """
    The effective value of every known gate; immutable once built.

    Build it with L{parse} (the flag's text), L{from_mapping} (a YAML mapping)
    or L{defaults}.
    """

    __slots__ = ("_values", "_known")

    def __init__(self, overrides=None, known=KNOWN_FEATURES):
        """
        @param overrides: C{{name: bool}}; every name must be known and may
            not move a locked gate off its default.
        @raise ValueError: for an unknown or locked gate.
        """
        values = {name: spec.default for name, spec in known.items()}
        for name, value in (overrides or {}).items():
            spec = known.get(name)
            if spec is None:
                raise ValueError(f"unrecognized feature gate: {name}")
            if not isinstance(value, bool):
                raise ValueError(f"invalid value of {name}={value}, err: expected true or false")
            if spec.locked and value != spec.default:
                raise ValueError(
                    f"cannot set feature gate {name} to {str(value).lower()}, "
                    f"feature is locked to {str(spec.default).lower()}")
            values[name] = value
        object.__setattr__(self, "_values", MappingProxyType(values))
        object.__setattr__(self, "_known", known)

    def __setattr__(self, name, value):
        raise AttributeError("FeatureGates is immutable")

    @classmethod
    def defaults(cls, known=KNOWN_FEATURES):
        """Every gate at its default."""
        return cls({}, known)

    @classmethod
    def parse(cls, text, known=KNOWN_FEATURES):
        """
        Read C{Name=true|false,...}; an empty text means the defaults.

        @raise ValueError: with upstream's wording for a missing value, a value
            that is not a boolean, an unknown gate or a locked one.
        """
        overrides = {}
        for item in (text or "").split(","):
            item = item.strip()
            if not item:
                continue
            name, sep, value = item.partition("=")
            name = name.strip()
            if not sep:
                raise ValueError(f"missing bool value for {name}")
            overrides[name] = _parse_bool(name, value)
        return cls(overrides, known)

    @classmethod
    def from_mapping(cls, mapping, known=KNOWN_FEATURES):
        """Read a YAML mapping C{{Name: true}}; other values are read as in L{parse}."""
        overrides = {}
        for name, value in mapping.items():
            if not isinstance(value, bool):
                value = _parse_bool(name, str(value))
            overrides[str(name)] = value
        return cls(overrides, known)

    def enabled(self, name):
        """
        Whether gate C{name} is on.

        @raise KeyError: for a name that is not a known gate (a programming error).
        """
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(f"unrecognized feature gate: {name}") from None

    def as_dict(self):
        """A copy of every gate's effective value."""
        return dict(self._values)

    def known(self):
        """The gate table this object was built against."""
        return self._known

    def __eq__(self, other):
        if not isinstance(other, FeatureGates):
            return NotImplemented
        return dict(self._values) == dict(other._values)

    def __hash__(self):
        return hash(frozenset(self._values.items()))

    def __repr__(self):
        changed = ",".join(f"{name}={str(value).lower()}"
                           for name, value in sorted(self._values.items())
                           if value != self._known[name].default)
        return f"<FeatureGates {changed or 'defaults'}>"


def describe_gates(known=KNOWN_FEATURES):
    """One C{Name=true|false (STAGE - default=...)} entry per gate, for C{--help}."""
    return ", ".join(
        f"{name}=true|false ({spec.stage} - default={str(spec.default).lower()})"
        for name, spec in sorted(known.items()))
