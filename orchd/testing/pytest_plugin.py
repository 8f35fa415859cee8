# -*- test-case-name: tests.testing_pytest.test_plugin -*-
"""
The pytest plugin of L{orchd.testing}: a real control plane for pytest tests.

Installed with orchd through the C{pytest11} entry point, so a test only asks
for the fixtures:

    def test_configmap(orchd, orchd_namespace):
        api = kubernetes.client.CoreV1Api(orchd.api_client())
        ...

C{orchd} (session) is a started L{ControlPlane}; C{orchd_namespace}
(function) is the name of a fresh namespace, deleted after the test. The
control plane's reactor runs in a background thread, so blocking clients (the
official client, kopf) work from the test's thread.

Its configuration comes from, in order of precedence: the closest
C{@pytest.mark.orchd(...)} marker (on the test, its class or its module),
the C{--orchd-*} command-line options, the C{orchd_*} ini options, and the
defaults (no controllers, no simulated nodes, upstream group names on, as
operators such as kopf look their groups up by the C{*.k8s.io} names). Each
distinct configuration gets its own control plane, started once and cached
for the session, so a module with a marker does not restart anything for the
modules after it.
"""

import pytest

#: The ControlPlane arguments a marker or an option may set, and the options' names.
SETTINGS = ("controllers", "feature_gates", "runtime_config", "upstream_group_names",
            "simulated_nodes", "crds")

_HELP = {
    "controllers": "Controllers the orchd fixture runs: a comma list of names, '*' for all, "
                   "'none' for none (the default).",
    "feature_gates": "Feature gates of the orchd fixture: a comma list of Name=true|false.",
    "runtime_config": "--runtime-config of the orchd fixture: a comma list of "
                      "<group/version>[=true|false].",
    "upstream_group_names": "Also serve the renamed groups by their *.k8s.io names "
                            "(true|false, default true: operators need them).",
    "simulated_nodes": "Simulated nodes of the orchd fixture (default 0).",
    "crds": "Files or folders of CustomResourceDefinition YAML installed into the orchd "
            "fixture before the first test (comma list).",
}

#: The defaults: the fastest control plane that still serves what operators look for.
DEFAULTS = {"controllers": None, "feature_gates": None, "runtime_config": None,
            "upstream_group_names": True, "simulated_nodes": 0, "crds": ()}


def pytest_addoption(parser):
    """The C{--orchd-*} options and their C{orchd_*} ini twins."""
    group = parser.getgroup("orchd", "orchd.testing control plane")
    for name in SETTINGS:
        flag = "--orchd-" + name.replace("_", "-")
        group.addoption(flag, dest="orchd_" + name, default=None, help=_HELP[name])
        parser.addini("orchd_" + name, _HELP[name], default=None)


def pytest_configure(config):
    """Declare the marker, so that C{--strict-markers} accepts it."""
    config.addinivalue_line(
        "markers",
        "orchd(controllers=None, feature_gates=None, runtime_config=None, "
        "upstream_group_names=True, simulated_nodes=0, crds=()): run the tests on a control "
        "plane of this configuration (one per configuration, cached for the session).")
    config._orchd_planes = {}


def pytest_unconfigure(config):
    """Stop every control plane the session started."""
    planes = getattr(config, "_orchd_planes", {})
    while planes:
        _, plane = planes.popitem()
        plane.stop()


def parse_bool(value):
    """C{true}/C{false} (and the usual spellings) as a bool; anything else is an error."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise pytest.UsageError(f"orchd: not a boolean: {value!r}")


def parse_controllers(value):
    """C{''}/C{none} to None (no controllers), else a tuple of names (C{*}: all)."""
    if value is None or isinstance(value, tuple):
        return value
    if isinstance(value, (list, set, frozenset)):
        return tuple(value)
    names = tuple(part.strip() for part in str(value).split(",") if part.strip())
    if not names or names == ("none",):
        return None
    return names


def parse_simulated_nodes(value):
    """A count of simulated nodes: a non-negative integer."""
    try:
        count = int(value)
    except (TypeError, ValueError):
        raise pytest.UsageError(f"orchd: simulated nodes must be an integer, not {value!r}")
    if count < 0:
        raise pytest.UsageError(f"orchd: simulated nodes must be >= 0, not {count}")
    return count


def parse_paths(value):
    """A comma list (or a sequence) of paths, as a tuple."""
    if isinstance(value, (list, tuple)):
        return tuple(str(path) for path in value)
    return tuple(part.strip() for part in str(value).split(",") if part.strip())


def parse_comma_list(value):
    """Feature gates and runtime config stay in their flag spelling; empty means unset."""
    if value is None:
        return None
    if isinstance(value, dict):
        return value
    text = str(value).strip()
    return text or None


_PARSERS = {"controllers": parse_controllers, "feature_gates": parse_comma_list,
            "runtime_config": parse_comma_list, "upstream_group_names": parse_bool,
            "simulated_nodes": parse_simulated_nodes, "crds": parse_paths}


def session_settings(config):
    """The configuration from the command line and the ini file, over the defaults."""
    settings = dict(DEFAULTS)
    for name in SETTINGS:
        value = config.getoption("orchd_" + name)
        if value is None:
            # An unset ini option reads None, or "" before pytest 9: unset either way.
            value = config.getini("orchd_" + name)
        if value is not None and value != "":
            settings[name] = _PARSERS[name](value)
    return settings


def marker_settings(base, marker):
    """C{base} with a C{@pytest.mark.orchd(...)} marker's keyword arguments over it."""
    if marker is None:
        return base
    if marker.args:
        raise pytest.UsageError("orchd marker: use keyword arguments, e.g. "
                                "@pytest.mark.orchd(controllers=('*',))")
    unknown = set(marker.kwargs) - set(SETTINGS)
    if unknown:
        raise pytest.UsageError(f"orchd marker: unknown setting(s) {sorted(unknown)}; "
                                f"known: {list(SETTINGS)}")
    settings = dict(base)
    for name, value in marker.kwargs.items():
        settings[name] = _PARSERS[name](value)
    return settings


def settings_key(settings):
    """A hashable key of a configuration: one control plane per key."""
    def freeze(value):
        if isinstance(value, dict):
            return tuple(sorted((k, freeze(v)) for k, v in value.items()))
        if isinstance(value, (list, tuple, set, frozenset)):
            return tuple(freeze(v) for v in value)
        return value
    return tuple((name, freeze(settings[name])) for name in SETTINGS)


def settings_id(settings):
    """A short test id for a marked configuration: the settings that differ from the defaults."""
    parts = []
    for name in SETTINGS:
        if settings[name] != DEFAULTS[name]:
            value = settings[name]
            if isinstance(value, tuple):
                value = "+".join(value)
            parts.append(f"{name}={value}")
    return "orchd:" + (",".join(parts) or "default")


def pytest_generate_tests(metafunc):
    """
    A test (or class or module) marked C{orchd(...)} that uses the C{orchd}
    fixture is parametrized, at session scope, with its configuration: pytest
    then gives it (and every session or module fixture built on C{orchd},
    such as a running operator) the control plane of that configuration.
    """
    marker = metafunc.definition.get_closest_marker("orchd")
    if marker is None or "orchd_settings" not in metafunc.fixturenames:
        return
    settings = marker_settings(session_settings(metafunc.config), marker)
    metafunc.parametrize("orchd_settings", [settings], indirect=True, scope="session",
                         ids=[settings_id(settings)])


@pytest.fixture(scope="session")
def orchd_settings(request):
    """The configuration of the C{orchd} fixture: options, then the closest marker."""
    return getattr(request, "param", None) or session_settings(request.config)


def control_plane(config, settings):
    """The started control plane of C{settings}, one per configuration for the session."""
    planes = config._orchd_planes
    key = settings_key(settings)
    plane = planes.get(key)
    if plane is None:
        from orchd.testing import ControlPlane   # late: collection must not start reactors
        plane = ControlPlane(
            controllers=settings["controllers"], feature_gates=settings["feature_gates"],
            runtime_config=settings["runtime_config"],
            upstream_group_names=settings["upstream_group_names"],
            simulated_nodes=settings["simulated_nodes"])
        plane.start()
        try:
            if settings["crds"]:
                plane.install_crds(list(settings["crds"]))
        except BaseException:
            plane.stop()
            raise
        planes[key] = plane
    return plane


@pytest.fixture(scope="session")
def orchd(request, orchd_settings):
    """
    A started L{orchd.testing.ControlPlane}, shared by the session (one per
    configuration); stopped when pytest exits.
    """
    return control_plane(request.config, orchd_settings)


@pytest.fixture
def orchd_namespace(orchd):
    """The name of a fresh namespace for this test, deleted after it."""
    name = orchd.create_namespace()
    yield name
    orchd.delete_namespace(name)
