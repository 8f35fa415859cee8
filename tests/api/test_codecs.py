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

    def test_json_depth_of_objects_and_lists(self):
        """JSON nested past the limit is 400 whether it nests objects, lists or both; at the limit it decodes."""
        from orchd.api.bounded import MAX_DEPTH
        half = MAX_DEPTH // 2
        at_limit = [b'{"a":' * (MAX_DEPTH - 1) + b"{}" + b"}" * (MAX_DEPTH - 1),
                    b'{"a":' + b"[" * (MAX_DEPTH - 2) + b"{}" + b"]" * (MAX_DEPTH - 2) + b"}"]
        too_deep = [b'{"a":' * MAX_DEPTH + b"{}" + b"}" * MAX_DEPTH,
                    b'{"a":' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}",
                    b'{"a":' * half + b"[" * (half + 1) + b"1" + b"]" * (half + 1) + b"}" * half]
        for body in at_limit:
            self.assertIsInstance(codecs.loads_json(body), dict)
            self.assertIsInstance(codecs.loads_json(body.decode()), dict)
        for body in too_deep:
            for data in (body, body.decode()):
                error = self.assertRaises(StatusError, codecs.loads_json, data)
                self.assertEqual(error.code, 400)
                self.assertIn(f"max depth of {MAX_DEPTH}", error.message)
