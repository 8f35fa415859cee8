# -*- test-case-name: tests.api.test_versions -*-
"""
Which group/versions and resources the server serves: C{--runtime-config}.

Stable versions are served by default, alpha and beta versions are not
(but for the few in C{_ON_BY_DEFAULT}, as upstream's clusters serve them). The
flag is a comma list of C{<key>[=<value>]} (an omitted value means C{true})
applied in upstream's order, whatever the order written: first the stage
keys C{api/all}, C{api/ga}, C{api/beta}, C{api/alpha} (in that order), then
C{<group>/<version>} keys, then C{<group>/<version>/<resource>} keys, so the
most specific key wins. A resource key decides for that resource alone, so
enabling one resource of a disabled version serves just that resource.

The core group is written C{v1}, C{/v1} or C{api/v1} (and C{api/v1/<resource>}
or C{v1/<resource>} for one of its resources). Names the table does not
have are errors, so a typo cannot silently leave an API off.
"""

import re

API_ALL = "api/all"
API_GA = "api/ga"
API_BETA = "api/beta"
API_ALPHA = "api/alpha"

_GA = re.compile(r"^v\d+\Z")
_BETA = re.compile(r"^v\d+beta\d+\Z")
_ALPHA = re.compile(r"^v\d+alpha\d+\Z")

#: The stage keys, in the order they are applied, with the versions they match.
_STAGE_MATCHERS = (
    (API_ALL, lambda version: True),
    (API_GA, lambda version: bool(_GA.match(version))),
    (API_BETA, lambda version: bool(_BETA.match(version))),
    (API_ALPHA, lambda version: bool(_ALPHA.match(version))),
)

_STAGE_KEYS = frozenset(key for key, _ in _STAGE_MATCHERS)

#: Names the core group goes by in keys.
_CORE_NAMES = ("", "api")

#: Non-stable group/versions served unless switched off: the resource metrics
#: API has only a beta version upstream, served whenever metrics-server runs
#: (here, always: the control plane scrapes the nodes itself).
_ON_BY_DEFAULT = frozenset({("metrics.orch.io", "v1beta1")})

_TRUE = frozenset({"1", "t", "true"})
_FALSE = frozenset({"0", "f", "false"})


def _parse_value(key, value):
    if value is None:
        return True
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"runtime-config: invalid value of {key}: {value!r}, expected true or false")


def parse_runtime_config(text):
    """
    Split the flag's text into C{{key: bool}}, later repeats winning.

    @raise ValueError: for a value that is not a boolean or an empty key.
    """
    overrides = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        key = key.strip()
        if not key:
            raise ValueError(f"runtime-config: missing key in {item!r}")
        overrides.pop(key, None)
        overrides[key] = _parse_value(key, value if sep else None)
    return overrides


class _Table:
    """The group/versions and resources of a kinds table, for resolving keys."""

    def __init__(self, kinds):
        self.groups = {}
        self.resources = {}
        for info in kinds:
            self.groups.setdefault(info.group, set()).add(info.version)
            self.resources.setdefault((info.group, info.version), set()).add(info.resource)

    def group_version(self, key, group, version):
        """Check C{group/version} against the table; return it with core as C{""}."""
        if group in _CORE_NAMES:
            group = ""
        if group not in self.groups:
            raise ValueError(f"runtime-config: unknown API group {group!r} in key {key!r}")
        if version not in self.groups[group]:
            known = ", ".join(sorted(self.groups[group]))
            shown = f"{group}/{version}" if group else version
            raise ValueError(f"runtime-config: unknown group version {shown} in key {key!r} "
                             f"(known versions: {known})")
        return group, version

    def resource(self, key, group_version, resource):
        if resource.lower() != resource:
            raise ValueError(f"runtime-config: invalid key {key}: group/version/resource and "
                             f"resource is always lowercase plural, not {resource!r}")
        if resource not in self.resources[group_version]:
            raise ValueError(f"runtime-config: unknown resource {resource!r} in key {key!r}")
        return group_version + (resource,)

    def resolve(self, key):
        """
        Read a non-stage key: C{("version", (group, version))} or
        C{("resource", (group, version, resource))}.
        """
        tokens = key.split("/")
        if len(tokens) == 1:
            # A bare version names the core group: "v1".
            return "version", self.group_version(key, "", tokens[0])
        if len(tokens) == 2:
            if tokens[0] not in self.groups and tokens[0] not in _CORE_NAMES \
                    and tokens[0] in self.groups.get("", ()):
                # "v1/pods": a resource of the core group.
                core = self.group_version(key, "", tokens[0])
                return "resource", self.resource(key, core, tokens[1])
            return "version", self.group_version(key, tokens[0], tokens[1])
        if len(tokens) == 3:
            group_version = self.group_version(key, tokens[0], tokens[1])
            return "resource", self.resource(key, group_version, tokens[2])
        raise ValueError(f"runtime-config: invalid key {key!r}, expected "
                         "<group>/<version> or <group>/<version>/<resource>")


class ResourceConfig:
    """
    The outcome of C{--runtime-config}: which versions and resources are on.

    @ivar versions: C{{(group, version): bool}} for every version of the table.
    @ivar resources: C{{(group, version, resource): bool}} for the resources
        named explicitly; they override their version.
    """

    def __init__(self, versions, resources):
        self.versions = versions
        self.resources = resources

    def resource_enabled(self, info):
        """Whether the resource of C{KindInfo} C{info} is served."""
        explicit = self.resources.get((info.group, info.version, info.resource))
        if explicit is not None:
            return explicit
        return self.versions.get((info.group, info.version), False)


def resource_config(runtime_config_text, kinds):
    """
    Apply C{--runtime-config} text to the defaults of C{kinds} (the
    L{orchd.api.kinds.KindInfo}s of every kind the server knows).

    @raise ValueError: for an unknown group, version or resource, a malformed
        key or a value that is not a boolean.
    """
    overrides = parse_runtime_config(runtime_config_text)
    table = _Table(kinds)
    versions = {}
    for info in kinds:
        versions[(info.group, info.version)] = (info.stage == "stable"
                                                or (info.group, info.version) in _ON_BY_DEFAULT)

    for stage_key, matches in _STAGE_MATCHERS:
        if stage_key in overrides:
            for group_version in versions:
                if matches(group_version[1]):
                    versions[group_version] = overrides[stage_key]

    version_keys, resource_keys = [], []
    for key, value in overrides.items():
        if key in _STAGE_KEYS:
            continue
        stage_like = key.startswith("api/") and key.count("/") == 1
        if stage_like and key[len("api/"):] not in table.groups.get("", ()):
            raise ValueError(f"runtime-config: unknown key {key!r}, the stage keys are "
                             f"{API_ALL}, {API_GA}, {API_BETA} and {API_ALPHA}")
        form, name = table.resolve(key)
        (version_keys if form == "version" else resource_keys).append((name, value))

    for group_version, value in version_keys:
        versions[group_version] = value
    resources = dict(resource_keys)
    return ResourceConfig(versions, resources)


def enabled_kinds(runtime_config_text, kinds):
    """
    The rows of C{kinds} served under C{--runtime-config}, in table order.

    @param runtime_config_text: the flag's text; empty or C{None} for defaults.
    @raise ValueError: as L{resource_config}.
    """
    config = resource_config(runtime_config_text, kinds)
    return [info for info in kinds if config.resource_enabled(info)]
