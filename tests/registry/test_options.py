"""Continue tokens: what this server hands out reads back; anything else is a 400."""

import base64
import json

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.registry.options import decode_continue, encode_continue


def token(data):
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def made(**fields):
    return token(dict({"v": "meta.k8s.io/v1", "rv": 5, "start": "default/b"}, **fields))


class ContinueTokenTests(SynchronousTestCase):
    def test_round_trip(self):
        """A token reads back as the revision, start key and count it was made with."""
        self.assertEqual(decode_continue(encode_continue(12, "default/b\x00", 3)),
                         (12, "default/b\x00", 3))
        self.assertEqual(decode_continue(encode_continue(2 ** 63 - 1, "x")),
                         (2 ** 63 - 1, "x", None))

    def test_malformed_tokens_are_400(self):
        """Tokens that are not base64 JSON objects of the right shape are 400 BadRequest."""
        hostile = [
            "!!!", "\u00ff", "a", "====", "%ff", token(b"not json"), token(b"[]"), token(b"1"),
            token(b"null"), token(b'{"v": "meta.k8s.io/v1", "rv": 1e400, "start": "a"}'),
            made(v="other"), made(v=None), made(rv="1"), made(rv=1.5), made(rv=-1), made(rv=True),
            made(rv=None), made(start=5), made(start=None), made(start=["a"]),
            made(remaining=-5), made(remaining="3"), made(remaining=False),
            token({"v": "meta.k8s.io/v1", "start": "a"}), token({"v": "meta.k8s.io/v1", "rv": 1}),
        ]
        for value in hostile:
            error = self.assertRaises(StatusError, decode_continue, value)
            self.assertEqual((error.code, error.reason), (400, "BadRequest"), value)
            self.assertTrue(error.message.startswith("continue key is not valid: "), value)

    def test_numbers_beyond_int64_are_400(self):
        """A revision or count no store can take (past int64) is a 400, not a store failure."""
        for value in (made(rv=10 ** 30), made(rv=2 ** 63), made(remaining=10 ** 25),
                      made(remaining=2 ** 63)):
            error = self.assertRaises(StatusError, decode_continue, value)
            self.assertEqual(error.code, 400, value)

    def test_start_keys_that_escape_are_400(self):
        """A start key that climbs out of the resource's keys is refused."""
        for start in ("../secrets/x", "default/../../secrets", "/registry/secrets", "..",
                      "a/.."):
            error = self.assertRaises(StatusError, decode_continue, made(start=start))
            self.assertEqual(error.message, "continue key is not valid: invalid start key")
