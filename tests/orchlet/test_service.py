"""The node agent's settings and its place in the service tree."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.features import FeatureGates
from orchd.app.config import Config, ConfigError, load_config
from orchd.app.orchletsettings import orchlet_settings
from orchd.app.service import ControlPlane, make_service
from orchd.orchlet.service import OrchletService
from orchd.orchlet.settings import OrchletSettings

TOKEN = "abcdef.0123456789abcdef"


class SettingsTests(SynchronousTestCase):
    def test_join_settings(self):
        config = load_config({"orchlet-only": "true", "bootstrap-token": TOKEN,
                              "server": "https://h:6443/"})
        self.assertEqual((config.bootstrap_token, config.server), (TOKEN, "https://h:6443"))

    def test_invalid(self):
        self.assertRaises(ConfigError, Config, orchlet_only=True, bootstrap_token=TOKEN)
        self.assertRaises(ConfigError, Config, bootstrap_token=TOKEN, server="https://h")
        self.assertRaises(ConfigError, load_config, {"orchlet-only": "true",
                                                     "bootstrap-token": "nope", "server": "https://h"})
        self.assertRaises(ConfigError, load_config, {"orchlet-only": "true",
                                                     "bootstrap-token": TOKEN, "server": "http://h"})

    def test_orchlet_settings_from_config(self):
        """The node agent's own settings carry what it needs of Config, auth resolved."""
        gates = FeatureGates.parse("ContainerCheckpoint=true")
        config = Config(data_dir="/d", orchlet_only=True, bootstrap_token=TOKEN, server="https://h",
                        hostname_override="node-7", bind_address="192.0.2.7", orchlet_port=10251,
                        feature_gates=gates, anonymous_auth=False,
                        authentication_token_webhook=True, authorization_mode=("Webhook",))
        self.assertEqual(orchlet_settings(config), OrchletSettings(
            node_name="node-7", root_dir="/d/orchlet", bind_address="192.0.2.7", port=10251,
            orchconfig=None, server="https://h", bootstrap_token=TOKEN, feature_gates=gates,
            anonymous=False, token_webhook=True, authorization_mode="Webhook"))


class TreeTests(SynchronousTestCase):
    def test_default_tree(self):
        """The control plane first, then the node agent (stopped first)."""
        top = make_service(Config(data_dir=self.mktemp(), secure_port=0, orchlet_port=0), Clock())
        self.assertEqual([type(s) for s in top], [ControlPlane, OrchletService])

    def test_no_orchlet(self):
        top = make_service(Config(data_dir=self.mktemp(), no_orchlet=True), Clock())
        self.assertEqual([type(s) for s in top], [ControlPlane])

    def test_orchlet_only(self):
        top = make_service(Config(data_dir=self.mktemp(), orchlet_only=True,
                                  bootstrap_token=TOKEN, server="https://h"), Clock())
        self.assertEqual([type(s) for s in top], [OrchletService])

    def test_orchlet_only_needs_credentials(self):
        self.assertRaises(SystemExit, make_service,
                          Config(data_dir=self.mktemp(), orchlet_only=True), Clock())

    def test_orchlet_only_mode_the_agent_lacks_stops_start(self):
        """--orchlet-only --authorization-mode=RBAC stops start-up before any service exists."""
        config = Config(data_dir=self.mktemp(), orchlet_only=True, bootstrap_token=TOKEN,
                        server="https://h", authorization_mode=("RBAC",))
        self.assertRaises(SystemExit, make_service, config, Clock())
