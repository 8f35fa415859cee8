"""The orchlet's container-log options (L{orchd.orchlet.logs}), read without a server."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.query import parse_query
from orchd.orchlet.logs import LogError, LogRequest, trim


def asked(query):
    return LogRequest(parse_query(query))


class LogRequestTests(SynchronousTestCase):
    def test_follow_is_upstreams_bool(self):
        """follow is true bare or with any value but 0/false (any case), as the kubelet reads it."""
        for query, follow in ((b"follow", True), (b"follow=true", True), (b"follow=yes", True),
                              (b"follow=%ff", True), (b"follow=0", False),
                              (b"follow=FALSE", False), (b"follow=False", False), (b"", False),
                              (b"follow=0&follow=1", False)):
            self.assertIs(asked(query).follow, follow, query)

    def test_numbers(self):
        """tailLines and limitBytes are read as numbers; a bad or negative one is a 400."""
        request = asked(b"tailLines=2&limitBytes=7")
        self.assertEqual((request.tail_lines, request.limit_bytes), (2, 7))
        for query, text in ((b"tailLines=x", "tailLines: invalid value 'x'"),
                            (b"tailLines=-1", "tailLines: must be greater than or equal to 0"),
                            (b"limitBytes=0", "limitBytes: must be greater than 0")):
            error = self.assertRaises(LogError, asked, query)
            self.assertEqual((error.code, error.text), (400, text))

    def test_trim(self):
        """trim keeps the last tailLines lines, then at most limitBytes of them."""
        log = b"a\nb\nc\n"
        self.assertEqual(trim(log, 2), b"b\nc\n")
        self.assertEqual(trim(log, 0), b"")
        self.assertEqual(trim(log, 2, 3), b"b\nc")
        self.assertEqual(trim(log), log)
