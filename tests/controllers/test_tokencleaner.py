"""The token cleaner: expired bootstrap-token Secrets are deleted when they expire."""

import base64

import orjson
from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.kinds import key_prefix_of
from orchd.controllers.tokencleaner import TokenCleaner
from tests.auth.bootstraptokens import SECRETS, TOKEN_ID, rfc3339, token_secret
from tests.support import APIHarness

NAME = f"bootstrap-token-{TOKEN_ID}"


class TokenCleanerTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.clock = self.api.clock
        self.now = self.clock.seconds()

    def start(self):
        cleaner = TokenCleaner(self.api.catalog, self.clock)
        cleaner.startService()
        self.addCleanup(cleaner.stopService)
        self.successResultOf(cleaner.started)
        return cleaner

    def create(self, body):
        code, obj, _ = self.api.call("POST", SECRETS, body)
        self.assertEqual(code, 201, obj)
        return obj

    def exists(self, name=NAME):
        return self.api.call("GET", f"{SECRETS}/{name}")[0] == 200

    def test_deleted_at_expiration(self):
        """A token is deleted at its expiration time, not before, and with no periodic sweep."""
        cleaner = self.start()
        self.create(token_secret(expires=self.now + 3600))
        self.create(token_secret("zzzzzz"))
        self.assertEqual(cleaner._queue.delayed(), {NAME})     # asked for later, that token only
        self.clock.advance(3599)
        self.assertTrue(self.exists())
        self.clock.advance(1)
        self.assertFalse(self.exists())
        self.assertTrue(self.exists("bootstrap-token-zzzzzz"))
        self.assertEqual(cleaner._queue.delayed(), set())

    def test_already_expired_at_start(self):
        """Secrets that expired while nothing ran are deleted on start."""
        self.create(token_secret(expires=self.now + 10))
        self.clock.advance(20)
        self.start()
        self.assertFalse(self.exists())

    def test_expiration_changed(self):
        """A later expiration postpones the deletion to the new time."""
        self.start()
        self.create(token_secret(expires=self.now + 10))
        self.api.call("PATCH", f"{SECRETS}/{NAME}",
                      {"stringData": {"expiration": rfc3339(self.now + 100)}},
                      content_type=b"application/merge-patch+json")
        self.clock.advance(50)
        self.assertTrue(self.exists())
        self.clock.advance(50)
        self.assertFalse(self.exists())

    def test_unparseable_expiration(self):
        """A stored expiration that cannot be read counts as expired, as upstream."""
        secret = self.create(token_secret())
        secret["data"]["expiration"] = base64.b64encode(b"tomorrow").decode()
        key = key_prefix_of("", "secrets") + "orch-system/" + NAME
        kv = self.successResultOf(self.api.store.get(key))
        self.successResultOf(self.api.store.update(key, orjson.dumps(secret), kv.mod_revision))
        self.start()
        self.assertFalse(self.exists())

    def test_uid_precondition(self):
        """A Secret recreated under the same name after judgement is not deleted."""
        cleaner = self.start()
        self.create(token_secret(expires=self.now + 10))
        old = self.api.call("GET", f"{SECRETS}/{NAME}")[1]["metadata"]["uid"]
        self.api.call("DELETE", f"{SECRETS}/{NAME}")
        self.create(token_secret(expires=self.now + 1000))
        # Judge the old Secret, as if its events were still being handled.
        cleaner._informer.cache[key_prefix_of("", "secrets") + "orch-system/" + NAME] = (
            old, self.now)
        self.clock.advance(10)
        self.successResultOf(Deferred.fromCoroutine(cleaner._sync(NAME)))
        self.assertTrue(self.exists())



class SelectionTests(SynchronousTestCase):
    def test_off_by_default(self):
        """Both bootstrap-token controllers run only when named in --controllers."""
        from orchd.controllers.manager import selected_controllers

        self.assertNotIn("tokencleaner", selected_controllers(("*",)))
        self.assertNotIn("bootstrapsigner", selected_controllers(("*",)))
        chosen = selected_controllers(("*", "tokencleaner", "bootstrapsigner"))
        self.assertIn("tokencleaner", chosen)
        self.assertIn("bootstrapsigner", chosen)
