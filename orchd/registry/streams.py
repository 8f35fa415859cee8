# -*- test-case-name: tests.registry.test_streams -*-
"""
Streamed subresources (C{nodes/proxy}, C{pods/log}): what the registry
decides, in terms that know no HTTP server.

A stream connector (L{orchd.registry.catalog.IStreamConnector}) takes the
options of its subresource, already read from the request by the HTTP layer
(L{ProxyOptions}, L{PodLogOptions}), checks them against the stored objects
and answers with a L{Location}: where to connect, what to ask there and with
which TLS identity. The HTTP layer (L{orchd.server.proxy}) makes that
request and streams its answer back, so every rule about nodes and pods
stays here and every byte of HTTP stays in C{orchd.server}.
"""

#: The TLS identity of requests to an orchlet's own port: the API server's
#: orchlet client certificate (L{orchd.app.orchletclient}).
ORCHLET_CLIENT = "orchlet-client"


class ProxyOptions:
    """
    The options of C{nodes/<name>/proxy/<path>}, as upstream's C{NodeProxyOptions}.

    @ivar path: the path after C{proxy}, unescaped, always starting with C{/}
        (a trailing slash kept).
    @ivar query: the request's query as it was sent (escaped text, no C{?}),
        passed on unchanged; empty when there is none.
    @ivar method: the request's method (C{"GET"}, C{"POST"}, ...), passed on.
    """

    __slots__ = ("path", "query", "method")

    def __init__(self, path="/", query="", method="GET"):
        self.path = path
        self.query = query
        self.method = method

    def __repr__(self):
        return f"<ProxyOptions {self.method} {self.path!r} {self.query!r}>"


class PodLogOptions:
    """
    The options of C{pods/<name>/log}, as upstream's C{PodLogOptions}: read
    from the query by their types; their rules (which values are allowed)
    are the connector's.

    @ivar container: the container's name, or C{""} for the pod's only one.
    @ivar follow: True to keep streaming as the log grows.
    @ivar previous: True for the previous instance of the container.
    @ivar timestamps: True to prefix every line with its time.
    @ivar since_seconds: only lines newer than this many seconds, or None.
    @ivar since_time: only lines from this RFC 3339 time on (text), or C{""}.
    @ivar tail_lines: only this many lines from the end, or None.
    @ivar limit_bytes: at most this many bytes, or None.
    """

    __slots__ = ("container", "follow", "previous", "timestamps", "since_seconds",
                 "since_time", "tail_lines", "limit_bytes")

    def __init__(self, container="", follow=False, previous=False, timestamps=False,
                 since_seconds=None, since_time="", tail_lines=None, limit_bytes=None):
        self.container = container
        self.follow = follow
        self.previous = previous
        self.timestamps = timestamps
        self.since_seconds = since_seconds
        self.since_time = since_time
        self.tail_lines = tail_lines
        self.limit_bytes = limit_bytes

    def __repr__(self):
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"<PodLogOptions {fields}>"


class Location:
    """
    Where a streamed subresource's answer comes from, and how to ask for it.

    @ivar scheme: C{"https"} or C{"http"}.
    @ivar host: the address to connect to (a name, an IPv4 or an IPv6 address).
    @ivar port: the port (int).
    @ivar path: the path, escaped as it goes on the wire.
    @ivar query: the query, escaped, without C{?}; empty for none.
    @ivar method: the method to ask with (C{"GET"}, ...); a body goes with
        C{POST}, C{PUT} and C{PATCH}.
    @ivar identity: the TLS identity to present: L{ORCHLET_CLIENT}, or None
        for none (a node's other ports).
    @ivar content_type: the content type to answer with instead of the
        backend's, or None.
    @ivar check_status: True to answer a non-2xx reply as a Status carrying
        its text (upstream's C{genericHttpResponseChecker}), False to pass
        it through as it came.
    """

    __slots__ = ("scheme", "host", "port", "path", "query", "method", "identity",
                 "content_type", "check_status")

    def __init__(self, scheme, host, port, path, query="", method="GET", identity=None,
                 content_type=None, check_status=False):
        self.scheme = scheme
        self.host = host
        self.port = port
        self.path = path
        self.query = query
        self.method = method
        self.identity = identity
        self.content_type = content_type
        self.check_status = check_status

    @property
    def url(self):
        """The whole URL (text): IPv6 addresses in brackets, the query if any."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        url = f"{self.scheme}://{host}:{self.port}{self.path}"
        return f"{url}?{self.query}" if self.query else url

    def __repr__(self):
        return f"<Location {self.method} {self.url!r} identity={self.identity!r}>"
