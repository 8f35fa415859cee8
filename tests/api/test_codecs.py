"""Bodies in and out: JSON and YAML decoding, Accept parsing and negotiation."""

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


class AcceptTests(SynchronousTestCase):
    def test_order_by_quality_then_position(self):
        """Ranges are ordered by q, then by their place in the header."""
        ranges = codecs.parse_accept(b"text/plain;q=0.5, application/yaml, application/json")
        self.assertEqual([r.full for r in ranges],
                         ["application/yaml", "application/json", "text/plain"])

    def test_quoted_parameters(self):
        """Commas and semicolons inside quotes do not split."""
        (first, second) = codecs.parse_accept('a/b;x="1,2;3", c/d')
        self.assertEqual((first.params, second.full), ({"x": "1,2;3"}, "c/d"))

    def test_negotiate(self):
        """Wildcards pick the first offer; q=0 excludes; nothing acceptable is 406."""
        self.assertEqual(codecs.negotiate(b"*/*"), codecs.JSON)
        self.assertEqual(codecs.negotiate(b"application/yaml;q=0.9, application/json;q=0"),
                         codecs.YAML)
        error = self.assertRaises(StatusError, codecs.negotiate, b"text/html")
        self.assertEqual(error.code, 406)
