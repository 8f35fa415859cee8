"""
Tests for L{orchd.app.config} and the flag parsing of L{orchd.app.tap}.

Flags are parsed the way C{twistd} does it: C{Options().parseOptions(argv)}.
"""

import io
import ipaddress
import os
import sys

import attr
import yaml
from twisted.application.service import Service
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.features import FeatureGates
from orchd.app import collector, tap
from orchd.app.config import (
    AUTHORIZATION_MODES, BOOLEAN_FLAGS, SETTINGS, Config, ConfigError, load_config,
    parse_bool, parse_duration,
)
from orchd.app.tap import Options, _expand_boolean_flags

CONF_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "conf", "orchd.yaml")


def parse(*argv):
    """Parse C{argv} as twistd would and return the resulting L{Config}."""
    options = Options()
    options.parseOptions(list(argv))
    return Config.load(options)


class OptionsTests(SynchronousTestCase):
    """The Options class only collects text; every default means "not given"."""

    def test_every_default_is_none(self):
        """Nothing parsed yet: every option is None, so YAML values can show through."""
        self.assertEqual({value for value in Options().values()}, {None})

    def test_every_setting_has_a_flag(self):
        """Each Config field has a flag of the same name with dashes."""
        flags = {parameter[0] for parameter in Options.optParameters}
        fields = {field.name.replace("_", "-") for field in attr.fields(Config)}
        self.assertEqual(flags, fields)

    def test_equals_and_space_forms(self):
        """C{--flag=value} and C{--flag value} mean the same."""
        self.assertEqual(parse("--secure-port=7443").secure_port, 7443)
        self.assertEqual(parse("--secure-port", "7443").secure_port, 7443)

    def test_settings_kept_on_options(self):
        """parseOptions leaves the checked Config on the options for makeService."""
        options = Options()
        options.parseOptions(["--orchlet-port", "0"])
        self.assertEqual(options.settings.orchlet_port, 0)
        self.assertEqual(options["orchlet-port"], "0")

    def test_make_service_passes_config(self):
        """makeService hands the loaded Config to orchd.app.service.make_service and paces
        the garbage collector beside the service it makes."""
        received, service = [], Service()
        self.patch(tap, "make_service", lambda config: received.append(config) or service)
        self.patch(tap, "gc", _RecordingGC())
        options = Options()
        options.parseOptions(["--secure-port=0"])
        (top, paced) = tap.makeService(options)
        self.assertIs(top, service)
        self.assertIsInstance(paced, collector.PacedCollections)
        self.assertEqual(received[0].secure_port, 0)

    def test_make_service_collects_garbage_less_often(self):
        """makeService freezes what is loaded, raises the young threshold and freezes after
        full collections, once."""
        self.patch(tap, "make_service", lambda config: Service())
        self.patch(tap, "gc", _RecordingGC())
        options = Options()
        options.parseOptions(["--secure-port=0"])
        tap.makeService(options)
        tap.makeService(options)
        self.assertEqual(tap.gc.calls, [("freeze",), ("set_threshold", collector.THRESHOLDS)] * 2)
        self.assertEqual([type(hook) for hook in tap.gc.callbacks],
                         [collector.FreezeAfterFullCollections])
        young, middle, full = collector.THRESHOLDS
        self.assertGreater(young, 700)


class _RecordingGC:
    """Stands in for the gc module, so that tests leave the test process's collector alone."""

    def __init__(self):
        self.calls = []
        self.callbacks = []

    def freeze(self):
        self.calls.append(("freeze",))

    def set_threshold(self, *thresholds):
        self.calls.append(("set_threshold", thresholds))


class BooleanFlagTests(SynchronousTestCase):
    """Booleans are written C{--flag}, C{--flag=false}, C{--flag=1} ..."""

    def test_bare_flag_is_true(self):
        """A bare boolean flag sets it true."""
        config = parse("--no-orchlet", "--enable-bootstrap-token-auth")
        self.assertIs(config.no_orchlet, True)
        self.assertIs(config.enable_bootstrap_token_auth, True)

    def test_explicit_false(self):
        """C{--anonymous-auth=false} turns off a setting that defaults to true."""
        self.assertIs(parse().anonymous_auth, True)
        self.assertIs(parse("--anonymous-auth=false").anonymous_auth, False)

    def test_spellings(self):
        """true/false/1/0 in any case are accepted."""
        for text, expected in [("TRUE", True), ("False", False), ("1", True), ("0", False)]:
            self.assertIs(parse(f"--authentication-token-webhook={text}")
                          .authentication_token_webhook, expected)

    def test_upstream_group_names(self):
        """--upstream-group-names alone turns the upstream spellings on; =false keeps them off."""
        self.assertIs(parse("--upstream-group-names").upstream_group_names, True)
        self.assertIs(parse("--upstream-group-names=false").upstream_group_names, False)

    def test_yaml_native(self):
        """YAML booleans are read as they are."""
        self.assertIs(parse_bool(True), True)
        self.assertIs(parse_bool(False), False)

    def test_boolean_flags(self):
        """Exactly the boolean settings are rewritten."""
        self.assertEqual(BOOLEAN_FLAGS, {"no-orchlet", "orchlet-only", "anonymous-auth",
                                         "enable-bootstrap-token-auth",
                                         "authentication-token-webhook",
                                         "orchlet-anonymous-auth",
                                         "orchlet-authentication-token-webhook",
                                         "leader-elect", "enable-metrics",
                                         "audit-log-compress", "upstream-group-names"})

    def test_value_of_previous_flag_left_alone(self):
        """The value after C{--flag} and anything after C{--} are not rewritten."""
        self.assertEqual(_expand_boolean_flags(["--etcd-prefix", "--no-orchlet", "--no-orchlet"]),
                         ["--etcd-prefix", "--no-orchlet", "--no-orchlet=true"])
        self.assertEqual(_expand_boolean_flags(["--", "--no-orchlet"]), ["--", "--no-orchlet"])


class DefaultTests(SynchronousTestCase):
    """With no flags and no file, the contract's defaults apply."""

    def test_defaults(self):
        """Every documented default, converted to its stored type."""
        config = parse()
        self.assertEqual(config.data_dir, "./orchd-data")
        self.assertEqual(config.bind_address, "127.0.0.1")
        self.assertEqual((config.secure_port, config.orchlet_port), (6443, 10250))
        self.assertEqual(config.storage_backend, "leveldb")
        self.assertEqual(config.etcd_servers, ())
        self.assertEqual(config.etcd_prefix, "/registry")
        self.assertEqual(config.service_cluster_ip_range, ipaddress.ip_network("10.96.0.0/12"))
        self.assertEqual(config.authorization_mode, ("Node", "RBAC"))
        self.assertEqual(config.controllers, ("*",))
        self.assertEqual((config.livez_grace_period, config.shutdown_delay_duration), (0.0, 0.0))
        self.assertEqual(config.node_monitor_grace_period, 40.0)
        self.assertEqual(config.horizontal_pod_autoscaler_sync_period, 15.0)
        self.assertEqual(config.pod_eviction_timeout, 300.0)
        self.assertEqual((config.max_requests_inflight, config.max_mutating_requests_inflight,
                          config.min_request_timeout), (400, 200, 1800))
        self.assertEqual(config.root_dir, os.path.join("./orchd-data", "orchlet"))
        self.assertIs(config.upstream_group_names, False)
        self.assertEqual(config.feature_gates, FeatureGates.defaults())
        self.assertEqual(config.runtime_config, "")
        self.assertIsNone(config.client_ca_file)
        self.assertIsNone(config.config)

    def test_root_dir_follows_data_dir(self):
        """Without C{--root-dir}, the node agent lives in C{<data-dir>/orchlet}."""
        self.assertEqual(parse("--data-dir=/srv/o").root_dir, "/srv/o/orchlet")
        self.assertEqual(parse("--data-dir=/srv/o", "--root-dir=/r").root_dir, "/r")

    def test_frozen(self):
        """A Config cannot be changed after it is built."""
        config = Config()
        self.assertRaises(attr.exceptions.FrozenInstanceError, setattr, config, "secure_port", 1)

    def test_direct_construction_checks_combinations(self):
        """Building a Config directly applies the same cross-field rules."""
        self.assertRaises(ConfigError, Config, no_orchlet=True, orchlet_only=True)

    def test_node_name(self):
        """The node name is the lowered override, else the host name."""
        self.assertEqual(parse("--hostname-override=Node-1.Example").node_name, "node-1.example")
        self.assertEqual(Config().node_name, Config().node_name.lower())
        self.assertTrue(Config().node_name)


class ValueTests(SynchronousTestCase):
    """Values are converted to the types the rest of orchd uses."""

    def test_durations(self):
        """Go durations become float seconds."""
        cases = {"300ms": 0.3, "40s": 40.0, "5m0s": 300.0, "1h2m3s": 3723.0, "0": 0.0,
                 "1.5s": 1.5, "-2s": -2.0, "1us": 1e-6, "2h": 7200.0}
        for text, seconds in cases.items():
            self.assertAlmostEqual(parse_duration(text), seconds, msg=text)

    def test_bad_durations(self):
        """Go's error wording for durations without units or with junk."""
        for text, message in [("40", "missing unit"), ("abc", "invalid duration"),
                              ("", "invalid duration"), ("5x", 'unknown unit "x"'),
                              ("s", "invalid duration")]:
            with self.assertRaises(ValueError) as caught:
                parse_duration(text)
            self.assertIn(message, str(caught.exception))

    def test_duration_flags(self):
        """Duration flags are stored in seconds."""
        config = parse("--livez-grace-period=1m30s", "--node-monitor-grace-period", "500ms")
        self.assertEqual(config.livez_grace_period, 90.0)
        self.assertEqual(config.node_monitor_grace_period, 0.5)

    def test_authorization_modes_in_order(self):
        """The mode list keeps the order given."""
        self.assertEqual(parse("--authorization-mode=RBAC,Node").authorization_mode,
                         ("RBAC", "Node"))
        policy, webhook = self.mktemp(), self.mktemp()
        for path in (policy, webhook):
            with open(path, "w") as f:
                f.write("\n")
        config = parse("--authorization-mode=" + ",".join(AUTHORIZATION_MODES),
                       "--authorization-policy-file", policy,
                       "--authorization-webhook-config-file", webhook)
        self.assertEqual(config.authorization_mode, AUTHORIZATION_MODES)

    def test_ipv6(self):
        """IPv6 bind addresses and service ranges are accepted."""
        config = parse("--bind-address=::1", "--service-cluster-ip-range=fd00:10:96::/112")
        self.assertEqual(config.bind_address, "::1")
        self.assertEqual(config.service_cluster_ip_range.version, 6)

    def test_etcd(self):
        """etcd servers are a tuple of URLs."""
        config = parse("--storage-backend=etcd",
                       "--etcd-servers=http://127.0.0.1:2379,https://e2:2379")
        self.assertEqual(config.etcd_servers, ("http://127.0.0.1:2379", "https://e2:2379"))

    def test_etcd_tls_files(self):
        """--etcd-cafile/--etcd-certfile/--etcd-keyfile name existing files; cert and key go together."""
        path = self.mktemp()
        with open(path, "w") as f:
            f.write("pem")
        config = parse("--storage-backend=etcd", "--etcd-servers=https://e1:2379",
                       f"--etcd-cafile={path}", f"--etcd-certfile={path}", f"--etcd-keyfile={path}")
        self.assertEqual((config.etcd_cafile, config.etcd_certfile, config.etcd_keyfile),
                         (path, path, path))
        self.assertRaises(ConfigError, Config, etcd_certfile=path)
        self.assertRaises(ConfigError, Config, etcd_cafile="/nonexistent/ca.pem")

    def test_feature_gates(self):
        """Feature gates become a FeatureGates object."""
        gates = parse("--feature-gates=WatchList=false,ContainerCheckpoint=true").feature_gates
        self.assertFalse(gates.enabled("WatchList"))
        self.assertTrue(gates.enabled("ContainerCheckpoint"))

    def test_runtime_config_kept(self):
        """A valid runtime config is kept as text for orchd.api.versions."""
        self.assertEqual(parse("--runtime-config=api/beta=true").runtime_config, "api/beta=true")

    def test_controllers(self):
        """Controllers are a tuple of names, '*' and '-name' forms."""
        self.assertEqual(parse("--controllers=*,tokencleaner,-nodelifecycle").controllers,
                         ("*", "tokencleaner", "-nodelifecycle"))

    def test_given_files(self):
        """Given files that exist are kept as paths."""
        path = self.mktemp()
        with open(path, "w") as stream:
            stream.write("x")
        config = parse(f"--tls-cert-file={path}", f"--tls-private-key-file={path}")
        self.assertEqual((config.tls_cert_file, config.tls_private_key_file), (path, path))


class ConfigFileTests(SynchronousTestCase):
    """C{--config FILE}: YAML under flags, over defaults."""

    def write(self, document):
        path = self.mktemp()
        with open(path, "w", encoding="utf-8") as stream:
            stream.write(document if isinstance(document, str) else yaml.safe_dump(document))
        return path

    def test_flags_win(self):
        """A flag overrides the file; the file overrides the default."""
        path = self.write({"secure-port": 7000, "data-dir": "/var/o", "anonymous-auth": False})
        config = parse(f"--config={path}", "--secure-port=8000")
        self.assertEqual(config.secure_port, 8000)
        self.assertEqual(config.data_dir, "/var/o")
        self.assertEqual(config.root_dir, "/var/o/orchlet")
        self.assertIs(config.anonymous_auth, False)
        self.assertEqual(config.config, path)

    def test_yaml_lists_and_mappings(self):
        """Lists and mappings are accepted where the flag takes a list."""
        path = self.write({"authorization-mode": ["Node", "RBAC"],
                           "feature-gates": {"WatchList": False},
                           "runtime-config": {"api/beta": True},
                           "livez-grace-period": "10s"})
        config = parse("--config", path)
        self.assertEqual(config.authorization_mode, ("Node", "RBAC"))
        self.assertFalse(config.feature_gates.enabled("WatchList"))
        self.assertEqual(config.runtime_config, "api/beta=true")
        self.assertEqual(config.livez_grace_period, 10.0)

    def test_null_is_default(self):
        """An empty value in the file means the default."""
        path = self.write("secure-port:\nroot-dir:\n")
        config = parse("--config", path)
        self.assertEqual((config.secure_port, config.root_dir),
                         (6443, os.path.join("./orchd-data", "orchlet")))

    def test_load_config_function(self):
        """load_config takes a plain dict of flags and a file path."""
        path = self.write({"orchlet-port": 0})
        config = load_config({"secure-port": "0", "help": None}, path)
        self.assertEqual((config.secure_port, config.orchlet_port), (0, 0))

    def test_shipped_file_is_the_defaults(self):
        """conf/orchd.yaml names every setting and changes none of them."""
        with open(CONF_FILE, encoding="utf-8") as stream:
            keys = set(yaml.safe_load(stream))
        self.assertEqual(keys, {setting.flag for setting in SETTINGS} - {"config"})
        self.assertEqual(attr.evolve(load_config({}, CONF_FILE), config=None), Config())


class ErrorTests(SynchronousTestCase):
    """Every invalid input ends in one line on stderr and exit status 2."""

    def setUp(self):
        self.stderr = io.StringIO()
        self.patch(sys, "stderr", self.stderr)

    def assertFails(self, *argv, says):
        """Parsing C{argv} exits 2 with one line that contains C{says}."""
        with self.assertRaises(SystemExit) as caught:
            parse(*argv)
        self.assertEqual(caught.exception.code, 2)
        lines = self.stderr.getvalue().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertTrue(lines[0].startswith("twistd orchd: error: "), lines[0])
        self.assertIn(says, lines[0])
        self.stderr.seek(0)
        self.stderr.truncate()

    def write(self, text):
        path = self.mktemp()
        with open(path, "w", encoding="utf-8") as stream:
            stream.write(text)
        return path

    def test_ports(self):
        """Ports must be integers from 0 to 65535."""
        self.assertFails("--secure-port=65536", says="--secure-port")
        self.assertFails("--secure-port=abc", says="not an integer")
        self.assertFails("--orchlet-port=-1", says="--orchlet-port")

    def test_cidr(self):
        """The service range must be a CIDR of at most 20 host bits."""
        self.assertFails("--service-cluster-ip-range=banana", says="--service-cluster-ip-range")
        self.assertFails("--service-cluster-ip-range=10.96.0.0/33", says="CIDR")
        self.assertFails("--service-cluster-ip-range=10.96.0.1", says="CIDR")
        self.assertFails("--service-cluster-ip-range=10.0.0.0/8", says="too large")

    def test_durations(self):
        """Durations need Go syntax and may not be negative."""
        self.assertFails("--livez-grace-period=40", says="missing unit")
        self.assertFails("--pod-eviction-timeout=5x", says="--pod-eviction-timeout")
        self.assertFails("--shutdown-delay-duration=-1s", says="negative")

    def test_leader_election_timing(self):
        """Lease duration > renew deadline > retry period, unless election is off."""
        config = parse()
        self.assertEqual((config.leader_elect, config.leader_elect_lease_duration,
                          config.leader_elect_renew_deadline,
                          config.leader_elect_retry_period), (True, 12.0, 8.0, 2.0))
        self.assertFails("--leader-elect-renew-deadline=12s", says="--leader-elect-lease-duration")
        self.assertFails("--leader-elect-retry-period=0s", says="--leader-elect-retry-period")
        self.assertFalse(parse("--leader-elect=false", "--leader-elect-retry-period=0s")
                         .leader_elect)

    def test_booleans(self):
        """A boolean that is not true/false/1/0 is rejected."""
        self.assertFails("--anonymous-auth=maybe", says="--anonymous-auth")

    def test_authorization_mode(self):
        """Unknown or repeated authorization modes are rejected."""
        self.assertFails("--authorization-mode=RBAC,Magic", says="'Magic'")
        self.assertFails("--authorization-mode=RBAC,RBAC", says="more than once")
        self.assertFails("--authorization-mode=", says="--authorization-mode")

    def test_authorization_mode_files(self):
        """ABAC and Webhook need their file, and their files need the mode."""
        self.assertFails("--authorization-mode=RBAC,ABAC", says="needs --authorization-policy-file")
        self.assertFails("--authorization-mode=Webhook",
                         says="needs --authorization-webhook-config-file")
        policy = self.write("\n")
        self.assertFails("--authorization-policy-file", policy, says="only used with")
        self.assertFails("--authorization-mode=ABAC", "--authorization-policy-file=/nonexistent",
                         says="no such file")
        self.assertFails("--authorization-webhook-version=v2", says="'v2'")

    def test_runtime_config(self):
        """Unknown API names and non-boolean values are rejected."""
        self.assertFails("--runtime-config=foo.orch.io/v1", says="unknown API group")
        self.assertFails("--runtime-config=apps/v7", says="apps/v7")
        self.assertFails("--runtime-config=apps/v1/widgets", says="widgets")
        self.assertFails("--runtime-config=apps/v1=maybe", says="invalid value")

    def test_feature_gates(self):
        """Unknown and locked gates are rejected with upstream's words."""
        self.assertFails("--feature-gates=Nope=true", says="unrecognized feature gate: Nope")
        self.assertFails("--feature-gates=WatchBookmark=false",
                         says="cannot set feature gate WatchBookmark to false, "
                              "feature is locked to true")

    def test_exclusive_agent_flags(self):
        """--no-orchlet and --orchlet-only exclude each other."""
        self.assertFails("--no-orchlet", "--orchlet-only", says="exclude each other")

    def test_storage(self):
        """etcd needs servers; only known backends are accepted."""
        self.assertFails("--storage-backend=etcd", says="--etcd-servers")
        self.assertFails("--storage-backend=mysql", says="--storage-backend")
        self.assertFails("--storage-backend=etcd", "--etcd-servers=127.0.0.1:2379",
                         says="--etcd-servers")

    def test_other_values(self):
        """Addresses, counts, names and given files are checked."""
        self.assertFails("--bind-address=localhost", says="not an IP address")
        self.assertFails("--max-requests-inflight=-1", says="--max-requests-inflight")
        self.assertFails("--hostname-override=bad_name", says="node name")
        self.assertFails("--client-ca-file=/nonexistent/ca.crt", says="no such file")
        self.assertFails("--controllers=Bad Name", says="--controllers")

    def test_pairs(self):
        """A certificate needs its key."""
        path = self.write("x")
        self.assertFails(f"--tls-cert-file={path}", says="--tls-private-key-file")
        self.assertFails(f"--orchlet-client-key={path}", says="--orchlet-client-certificate")

    def test_unknown_flag_and_arguments(self):
        """Unknown flags and stray arguments are usage errors, still one line."""
        self.assertFails("--bogus", says="--bogus")
        self.assertFails("stray", says="arguments")

    def test_config_file(self):
        """A missing, invalid or foreign config file is rejected."""
        self.assertFails("--config=/nonexistent/orchd.yaml", says="cannot read")
        self.assertFails("--config", self.write("a: [1,\n  b: }\n"), says="invalid YAML")
        self.assertFails("--config", self.write("colour: blue\n"), says="unknown setting 'colour'")
        self.assertFails("--config", self.write("- a\n- b\n"), says="mapping")
        self.assertFails("--config", self.write("config: other.yaml\n"), says="'config'")
        self.assertFails("--config", self.write("secure-port: http\n"),
                         says="secure-port in ")
