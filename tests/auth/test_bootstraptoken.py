"""Reading bootstrap tokens and their Secrets."""

import base64

from twisted.trial.unittest import SynchronousTestCase

from orchd.auth import bootstraptoken as bt


def stored(strings, name="bootstrap-token-abcdef", type=bt.SECRET_TYPE, **meta):
    data = {k: base64.b64encode(v.encode()).decode() for k, v in strings.items()}
    return {"type": type, "metadata": dict(name=name, uid="u1", **meta), "data": data}


GOOD = {"token-id": "abcdef", "token-secret": "0123456789abcdef"}


class ParseTests(SynchronousTestCase):
    def test_parse_token(self):
        """Only C{[a-z0-9]{6}.[a-z0-9]{16}} is a bootstrap token."""
        self.assertEqual(bt.parse_token("abcdef.0123456789abcdef"), ("abcdef", "0123456789abcdef"))
        for text in ("ABCDEF.0123456789abcdef", "abcdef.0123456789abcde", "abcdef0123456789abcdef",
                     "abcdef.0123456789abcdef\n", "eyJhbGciOi.x.y"):
            self.assertIsNone(bt.parse_token(text), text)

    def test_parse_expiration(self):
        """RFC 3339 times with Z or an offset, with or without a fraction."""
        self.assertEqual(bt.parse_expiration("2030-01-01T00:00:00Z"), 1893456000)
        self.assertEqual(bt.parse_expiration("2030-01-01T01:00:00+01:00"), 1893456000)
        self.assertEqual(bt.parse_expiration("2030-01-01T00:00:00.5Z"), 1893456000.5)
        self.assertEqual(bt.parse_expiration("2030-01-01T00:00:00.123456789Z"), 1893456000.123456)
        for text in ("2030-01-01", "2030-01-01T00:00:00", "2030-01-01 00:00:00Z", "soon",
                     "2030-13-01T00:00:00Z"):
            self.assertRaises(ValueError, bt.parse_expiration, text)


class TokenFromSecretTests(SynchronousTestCase):
    def test_fields(self):
        """A well-formed Secret gives its token, usages, groups and expiration."""
        token = bt.token_from_secret(stored(dict(
            GOOD, expiration="2030-01-01T00:00:00Z", **{
                "usage-bootstrap-signing": "true", "usage-bootstrap-authentication": "yes",
                "auth-extra-groups": "system:bootstrappers:a, system:bootstrappers:b"})))
        self.assertEqual(token.token, "abcdef.0123456789abcdef")
        self.assertEqual(token.usages, {"signing"})
        self.assertEqual(token.extra_groups, ("system:bootstrappers:a", "system:bootstrappers:b"))
        self.assertEqual((token.uid, token.deleting), ("u1", False))
        self.assertFalse(token.expired(1893455999))
        self.assertTrue(token.expired(1893456000))
        self.assertEqual(token.ttl(1893455990), 10)

    def test_not_tokens(self):
        """Another type, a name not matching the id, or a malformed id or secret: no token."""
        self.assertIsNone(bt.token_from_secret(stored(GOOD, type="Opaque")))
        self.assertIsNone(bt.token_from_secret(stored(GOOD, name="bootstrap-token-zzzzzz")))
        self.assertIsNone(bt.token_from_secret(stored(dict(GOOD, **{"token-secret": "short"}))))
        self.assertIsNone(bt.token_from_secret(stored({"token-secret": GOOD["token-secret"]})))

    def test_unreadable_expiration_is_expired(self):
        """As upstream, an expiration that cannot be parsed counts as past."""
        secret = stored(dict(GOOD, expiration="tomorrow"))
        self.assertTrue(bt.token_from_secret(secret).expired(0))
        self.assertEqual(bt.secret_expiration(secret), float("-inf"))
        self.assertIsNone(bt.secret_expiration(stored(GOOD)))
        self.assertIsNone(bt.token_from_secret(stored(GOOD)).ttl(0))

    def test_deleting(self):
        """A Secret with a deletionTimestamp is marked as being deleted."""
        secret = stored(GOOD, deletionTimestamp="2030-01-01T00:00:00Z")
        self.assertTrue(bt.token_from_secret(secret).deleting)
