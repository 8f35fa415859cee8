"""The node agent's settings and its place in the service tree."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.app.config import Config, ConfigError, load_config
from orchd.app.service import ControlPlane, make_service
from orchd.orchlet.service import OrchletService

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
