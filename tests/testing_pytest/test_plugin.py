"""
orchd's pytest plugin (L{orchd.testing.pytest_plugin}): the parsing of its
options and markers, and a real pytest run in a subprocess using its
fixtures, options and markers against real control planes.
"""

import json
import os
import subprocess
import sys
import textwrap

from twisted.trial.unittest import SkipTest, SynchronousTestCase

try:
    import pytest
except ImportError:     # pytest is in the test extra
    pytest = None
else:
    from orchd.testing import pytest_plugin as plugin

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Marker:
    """The part of a pytest Mark the plugin reads."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class Config:
    """The part of a pytest Config the plugin reads: options, and ini values."""

    def __init__(self, options=(), ini=(), unset=None):
        self.options, self.ini, self.unset = dict(options), dict(ini), unset

    def getoption(self, name):
        return self.options.get(name)

    def getini(self, name):
        return self.ini.get(name, self.unset)


class ParsingTests(SynchronousTestCase):
    """Option and marker values become ControlPlane arguments, or a UsageError."""

    def setUp(self):
        if pytest is None:
            raise SkipTest("pytest is not installed")

    def test_controllers(self):
        """A comma list becomes a tuple of names; '' and 'none' mean no controllers."""
        self.assertEqual(plugin.parse_controllers("namespace, garbagecollector"),
                         ("namespace", "garbagecollector"))
        self.assertEqual(plugin.parse_controllers("*"), ("*",))
        self.assertIsNone(plugin.parse_controllers(""))
        self.assertIsNone(plugin.parse_controllers("none"))
        self.assertEqual(plugin.parse_controllers(["a"]), ("a",))

    def test_booleans(self):
        """The usual spellings of true and false are accepted; anything else is a usage error."""
        self.assertIs(plugin.parse_bool("False"), False)
        self.assertIs(plugin.parse_bool("on"), True)
        self.assertRaises(pytest.UsageError, plugin.parse_bool, "maybe")

    def test_simulated_nodes(self):
        """A node count is a non-negative integer."""
        self.assertEqual(plugin.parse_simulated_nodes("3"), 3)
        self.assertRaises(pytest.UsageError, plugin.parse_simulated_nodes, "-1")
        self.assertRaises(pytest.UsageError, plugin.parse_simulated_nodes, "three")

    def test_session_settings(self):
        """The command line wins over the ini file; unset ini options (None, or "" before
        pytest 9) leave the defaults."""
        for unset in (None, ""):
            settings = plugin.session_settings(Config(
                options={"orchd_simulated_nodes": "2"},
                ini={"orchd_simulated_nodes": "5", "orchd_controllers": "namespace"},
                unset=unset))
            self.assertEqual(settings, dict(plugin.DEFAULTS, simulated_nodes=2,
                                            controllers=("namespace",)))

    def test_marker_over_base(self):
        """A marker's keywords replace the options' values; the others stay."""
        base = dict(plugin.DEFAULTS, feature_gates="A=true")
        settings = plugin.marker_settings(base, Marker(controllers="*", simulated_nodes=2))
        self.assertEqual((settings["controllers"], settings["simulated_nodes"],
                          settings["feature_gates"]), (("*",), 2, "A=true"))

    def test_marker_mistakes(self):
        """A positional argument or an unknown setting in the marker is a usage error."""
        self.assertRaises(pytest.UsageError, plugin.marker_settings, plugin.DEFAULTS,
                          Marker("*"))
        self.assertRaises(pytest.UsageError, plugin.marker_settings, plugin.DEFAULTS,
                          Marker(nodes=3))

    def test_one_key_per_configuration(self):
        """Equal configurations share a key (lists or tuples, dict order); different ones do not."""
        one = dict(plugin.DEFAULTS, controllers=("a", "b"), feature_gates={"X": True, "Y": False})
        two = dict(plugin.DEFAULTS, controllers=["a", "b"], feature_gates={"Y": False, "X": True})
        self.assertEqual(plugin.settings_key(one), plugin.settings_key(two))
        hash(plugin.settings_key(one))
        self.assertNotEqual(plugin.settings_key(one), plugin.settings_key(plugin.DEFAULTS))

    def test_id(self):
        """A marked configuration's test id names what differs from the defaults."""
        self.assertEqual(plugin.settings_id(dict(plugin.DEFAULTS, simulated_nodes=1)),
                         "orchd:simulated_nodes=1")
        self.assertEqual(plugin.settings_id(plugin.DEFAULTS), "orchd:default")


#: A test module as users write them; each test records what it saw.
USER_TESTS = '''
import json, os

import kubernetes
import pytest


def record(orchd, **seen):
    with open(os.environ["ORCHD_RECORD"], "a") as f:
        f.write(json.dumps(dict(url=orchd.url, **seen)) + "\\n")


def nodes(orchd):
    return len(kubernetes.client.CoreV1Api(orchd.api_client()).list_node().items)


def upstream_served(orchd):
    try:
        kubernetes.client.ApiextensionsV1Api(orchd.api_client()).get_api_resources()
    except kubernetes.client.ApiException as error:
        assert error.status == 404
        return False
    return True


def test_default(orchd):
    record(orchd, test="default", nodes=nodes(orchd), upstream=upstream_served(orchd))


@pytest.mark.orchd(simulated_nodes=1)
def test_marked(orchd):
    record(orchd, test="marked", nodes=nodes(orchd), upstream=upstream_served(orchd))


def test_namespace(orchd, orchd_namespace):
    core = kubernetes.client.CoreV1Api(orchd.api_client())
    assert core.read_namespace(orchd_namespace).status.phase == "Active"
    record(orchd, test="namespace", namespace=orchd_namespace)


def test_namespace_after(orchd, orchd_namespace):
    core = kubernetes.client.CoreV1Api(orchd.api_client())
    with open(os.environ["ORCHD_RECORD"]) as f:
        [earlier] = [json.loads(line)["namespace"] for line in f if '"namespace"' in line]
    assert earlier != orchd_namespace
    # No namespace controller here: the deleted namespace stays Terminating.
    assert core.read_namespace(earlier).metadata.deletion_timestamp is not None
    record(orchd, test="namespace after")
'''

#: A second module, marked as a whole with the same configuration as test_marked.
MARKED_MODULE = '''
import pytest

from test_user import nodes, record

pytestmark = pytest.mark.orchd(simulated_nodes=1)


@pytest.fixture(scope="module")
def module_fixture(orchd):
    return orchd.url


def test_module_marked(orchd, module_fixture):
    assert module_fixture == orchd.url
    record(orchd, test="module marked", nodes=nodes(orchd))
'''


class PytestRunTests(SynchronousTestCase):
    """pytest with the plugin: the options set the default plane, markers get planes of their own."""

    def setUp(self):
        if pytest is None:
            raise SkipTest("pytest is not installed")

    def run_pytest(self, *options):
        """Run the user's modules in a pytest subprocess; its records, by test."""
        directory = os.path.abspath(self.mktemp())
        os.makedirs(directory)
        for name, text in (("test_user.py", USER_TESTS), ("test_marked.py", MARKED_MODULE)):
            with open(os.path.join(directory, name), "w") as f:
                f.write(textwrap.dedent(text))
        record = os.path.abspath(os.path.join(directory, "record.jsonl"))
        env = dict(os.environ, ORCHD_RECORD=record,
                   PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "-p", "orchd.testing.pytest_plugin", "--strict-markers", *options, directory],
            capture_output=True, text=True, env=env, cwd=directory, timeout=240)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        with open(record) as f:
            return {line["test"]: line for line in map(json.loads, f)}

    def test_options_and_markers(self):
        """
        The command line turns the upstream names off for the default plane; a
        test and a module marked alike share one other plane (with its node),
        a module-scoped fixture included; namespaces are fresh and deleted.
        """
        seen = self.run_pytest("--orchd-upstream-group-names=false")
        self.assertEqual(len(seen), 5, seen)
        self.assertEqual((seen["default"]["nodes"], seen["default"]["upstream"]), (0, False))
        self.assertEqual((seen["marked"]["nodes"], seen["marked"]["upstream"]), (1, False))
        self.assertNotEqual(seen["default"]["url"], seen["marked"]["url"])
        self.assertEqual(seen["module marked"]["url"], seen["marked"]["url"])
        self.assertEqual(seen["namespace"]["url"], seen["default"]["url"])

    def test_ini_option(self):
        """An ini option sets the default plane when the command line does not."""
        seen = self.run_pytest("-o", "orchd_upstream_group_names=true")
        self.assertIs(seen["default"]["upstream"], True)
