"""Bodies in and out: JSON and YAML decoding."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api import codecs
from orchd.api.errors import StatusError


class DecodeTests(SynchronousTestCase):
    def test_json(self):
        """A JSON body decodes to a dict; a missing Content-Type reads as JSON."""
        self.assertEqual(codecs.decode_body(b"application/json; charset=utf-8", b'{"a": 1}'),
                         {"a": 1})
        self.assertEqual(codecs.decode_body(None, b'{"a": 1}'), {"a": 1})

    def test_yaml_keeps_timestamps_as_strings(self):
        """YAML timestamps stay strings and non-string keys become strings, as JSON has them."""
        obj = codecs.decode_body(b"application/yaml", b"t: 2024-01-01T00:00:00Z\n1: x\n")
        self.assertEqual(obj, {"t": "2024-01-01T00:00:00Z", "1": "x"})

    def test_errors(self):
        """Malformed bodies are 400, non-objects 400, unknown media types 415."""
        for content_type, body, code in ((b"application/json", b"{", 400),
                                         (b"application/yaml", b"a: [", 400),
                                         (b"application/json", b"[1]", 400),
                                         (b"application/xml", b"<a/>", 415)):
            error = self.assertRaises(StatusError, codecs.decode_body, content_type, body)
            self.assertEqual(error.code, code)
