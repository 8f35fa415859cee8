"""Reading a streamed subresource's options from its request, with the shared query reader."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.api.query import parse_query
from orchd.registry.streams import PodLogOptions, ProxyOptions
from orchd.server.requestinfo import parse_request_info
from orchd.server.streamoptions import read_options


class Request:
    """The three things the readers look at: method, raw URI and parsed query."""

    def __init__(self, method, uri):
        self.method = method
        self.uri = uri
        self.args = parse_query(uri.partition(b"?")[2])


def read(options, uri, method=b"GET"):
    request = Request(method, uri)
    path = uri.partition(b"?")[0].decode("ascii")
    return read_options(options, request, parse_request_info(method, path, request.args))


class ProxyOptionsTests(SynchronousTestCase):
    def test_path_query_method(self):
        """The path after proxy (trailing slash kept), the query as sent, the method."""
        options = read(ProxyOptions, b"/api/v1/nodes/n1/proxy/pods/?a=1&b=x%20y", b"PUT")
        self.assertEqual((options.path, options.query, options.method),
                         ("/pods/", "a=1&b=x%20y", "PUT"))

    def test_root(self):
        """Without a path after proxy, the path is the root and the query empty."""
        options = read(ProxyOptions, b"/api/v1/nodes/n1/proxy")
        self.assertEqual((options.path, options.query), ("/", ""))


class PodLogOptionsTests(SynchronousTestCase):
    URI = b"/api/v1/namespaces/default/pods/p/log?"

    def test_types(self):
        """Text, flags (upstream's rule: anything but 0/false is true) and 64-bit integers
        are read by type; absent ones keep their defaults."""
        options = read(PodLogOptions, self.URI + b"container=c&follow=True&previous=1"
                                                 b"&timestamps=yes&tailLines=%2B05&limitBytes=")
        self.assertEqual((options.container, options.follow, options.previous,
                          options.timestamps, options.tail_lines, options.limit_bytes,
                          options.since_seconds, options.since_time),
                         ("c", True, True, True, 5, None, None, ""))

    def test_wrong_types(self):
        """A value that is not UTF-8, holds a NUL or is no int64 is a 400 naming it."""
        for query, message in [
            (b"tailLines=99999999999999999999",
             '"tailLines": "99999999999999999999" is out of range for a 64-bit integer'),
            (b"limitBytes=1e9", '"limitBytes": "1e9" is not an integer'),
            (b"follow=%ff", '"follow": not valid UTF-8'),
            (b"sinceTime=a%00", '"sinceTime": must not contain a NUL character'),
        ]:
            error = self.assertRaises(StatusError, read, PodLogOptions, self.URI + query)
            self.assertEqual((error.code, error.message),
                             (400, "invalid value for query parameter " + message), query)
