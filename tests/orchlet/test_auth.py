"""The orchlet's path/verb mapping, flag resolution and webhook caching, with a Clock."""

from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase

from orchd.app.config import Config, ConfigError
from orchd.app.orchletsettings import settings_from_config
from orchd.app.tap import Options
from orchd.auth.user import UserInfo
from orchd.orchlet.auth import (
    ACCESS_REVIEWS, AuthorizationError, OrchletAuth, request_verb, subresource_for,
)


class FakeAPI:
    """Answers SubjectAccessReviews and TokenReviews from tables, recording the bodies."""

    def __init__(self, allowed=True, users=None, fail=False):
        self.allowed = allowed
        self.users = users or {}
        self.fail = fail
        self.calls = []

    async def request(self, method, path, body=None):
        self.calls.append((method, path, body))
        if self.fail:
            raise ConnectionRefusedError("no API server")
        if path == ACCESS_REVIEWS:
            return 201, dict(body, status={"allowed": self.allowed})
        user = self.users.get(body["spec"]["token"])
        status = {"authenticated": True, "user": user} if user else {"authenticated": False}
        return 201, dict(body, status=status)


class MappingTests(TestCase):
    def test_verbs(self):
        self.assertEqual([request_verb(m) for m in (b"GET", b"POST", b"PUT", b"PATCH",
                                                    b"DELETE")],
                         ["get", "create", "update", "patch", "delete"])

    def test_subresources(self):
        """The specification's table: stats, metrics, log, spec, else proxy."""
        cases = {"/stats/summary": "stats", "/stats": "stats", "/metrics/resource": "metrics",
                 "/logs/": "log", "/logs/pods/x": "log", "/spec/": "spec", "/pods": "proxy",
                 "/healthz": "proxy", "/containerLogs/a/b/c": "proxy",
                 "/checkpoint/a/b/c": "proxy", "/statsx": "proxy",
                 "/pods/../stats/summary": "stats", "//logs": "log"}
        self.assertEqual({path: subresource_for(path) for path in cases}, cases)


class SettingsTests(TestCase):
    def settings(self, **values):
        return settings_from_config(Config(data_dir=self.mktemp(), **values))

    def parsed(self, *argv):
        """The settings of a command line, parsed as twistd does."""
        options = Options()
        options.parseOptions(["--data-dir", self.mktemp(), *argv])
        return settings_from_config(Config.load(options))

    def test_defaults(self):
        """Nothing given: anonymous access on, no token webhook, AlwaysAllow."""
        self.assertEqual(self.settings(), (True, False, "AlwaysAllow"))
        self.assertEqual(self.parsed(), (True, False, "AlwaysAllow"))

    def test_anonymous_off_closes_the_node_agent_too(self):
        """With an API server in the process, --anonymous-auth=false turns the orchlet's off too."""
        self.assertEqual(self.parsed("--anonymous-auth=false"), (False, False, "AlwaysAllow"))
        self.assertEqual(self.settings(anonymous_auth=False), (False, False, "AlwaysAllow"))

    def test_anonymous_off_from_the_config_file(self):
        """anonymous-auth: false in the --config file closes the orchlet as the flag does."""
        path = self.mktemp()
        with open(path, "w") as f:
            f.write("anonymous-auth: false\n")
        self.assertEqual(self.parsed("--config", path)[0], False)

    def test_orchlet_anonymous_given_wins(self):
        """An explicit --orchlet-anonymous-auth wins over --anonymous-auth, either way."""
        self.assertEqual(self.parsed("--anonymous-auth=false", "--orchlet-anonymous-auth")[0],
                         True)
        self.assertEqual(self.settings(anonymous_auth=False, orchlet_anonymous_auth=True)[0],
                         True)
        self.assertEqual(self.parsed("--orchlet-anonymous-auth=false")[0], False)

    def test_api_server_webhook_and_mode_left_alone(self):
        """With an API server in the process, its token webhook and modes stay its own."""
        self.assertEqual(self.settings(authentication_token_webhook=True,
                                       authorization_mode=("RBAC",)),
                         (True, False, "AlwaysAllow"))

    def test_prefixed(self):
        """The orchlet- settings are the orchlet's."""
        self.assertEqual(self.settings(orchlet_anonymous_auth=False,
                                       orchlet_authentication_token_webhook=True,
                                       orchlet_authorization_mode="Webhook"),
                         (False, True, "Webhook"))

    def test_orchlet_only_reads_unprefixed(self):
        """With --orchlet-only the unprefixed settings are the node agent's."""
        self.assertEqual(self.settings(orchlet_only=True, anonymous_auth=False,
                                       authentication_token_webhook=True,
                                       authorization_mode=("Webhook",)),
                         (False, True, "Webhook"))

    def test_orchlet_only_rejects_api_server_modes(self):
        """An authorization mode the node agent lacks is a configuration error."""
        with self.assertRaises(ConfigError):
            self.settings(orchlet_only=True, authorization_mode=("RBAC",))


class WebhookTests(TestCase):
    def setUp(self):
        self.clock = Clock()
        self.user = UserInfo("alice", ("devs",), "u-1", {"scopes": ["a"]})

    async def test_access_review_body_and_cache(self):
        """One review per distinct request, reused for 5 minutes when allowed."""
        api = FakeAPI(allowed=True)
        auth = OrchletAuth(self.clock, "n1", mode="Webhook", api=api)
        attributes = auth.attributes(self.user, b"GET", "/stats/summary")
        self.assertTrue(await auth.authorize(attributes))
        self.assertTrue(await auth.authorize(attributes))
        [(method, path, body)] = api.calls
        self.assertEqual((method, path), ("POST", ACCESS_REVIEWS))
        self.assertEqual(body["spec"], {
            "user": "alice", "groups": ["devs"], "uid": "u-1", "extra": {"scopes": ["a"]},
            "resourceAttributes": {"verb": "get", "resource": "nodes", "subresource": "stats",
                                   "name": "n1", "namespace": "", "group": "",
                                   "version": "v1"}})
        self.clock.advance(301)
        await auth.authorize(attributes)
        self.assertEqual(len(api.calls), 2)

    async def test_denials_cached_briefly(self):
        api = FakeAPI(allowed=False)
        auth = OrchletAuth(self.clock, "n1", mode="Webhook", api=api)
        attributes = auth.attributes(self.user, b"POST", "/checkpoint/a/b/c")
        self.assertFalse(await auth.authorize(attributes))
        self.clock.advance(29)
        self.assertFalse(await auth.authorize(attributes))
        self.assertEqual(len(api.calls), 1)
        self.clock.advance(2)
        await auth.authorize(attributes)
        self.assertEqual(len(api.calls), 2)

    async def test_unreachable_api(self):
        auth = OrchletAuth(self.clock, "n1", mode="Webhook", api=FakeAPI(fail=True))
        with self.assertRaises(AuthorizationError):
            await auth.authorize(auth.attributes(self.user, b"GET", "/pods"))

    def test_webhooks_need_api(self):
        self.assertRaises(ValueError, OrchletAuth, self.clock, "n1", mode="Webhook")
        self.assertRaises(ValueError, OrchletAuth, self.clock, "n1", token_webhook=True)
        self.assertRaises(ValueError, OrchletAuth, self.clock, "n1", mode="RBAC")
