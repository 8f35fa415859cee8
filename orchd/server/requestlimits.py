# -*- test-case-name: tests.server.test_channel -*-
"""
The bounds every HTTPS request meets before a handler sees it, in one place.

Both listeners, the API server's and the node agent's, apply them through
L{orchd.server.channel}; README.rst ("Request limits") lists each with the
answer it gets. The sizes are generous for real clients (kubectl's longest
request lines and header blocks are a few KiB, bearer tokens one or two)
and small enough that a connection that has not sent a whole request holds
a few tens of KiB at most; the times follow the API server upstream (32 s
to read a request's headers, 90 s for an idle keep-alive connection).
"""

import resource

KiB = 1024

#: The request line (method, target with its query, version): longer is
#: 414; and each header field line: longer is 431.
MAX_LINE = 16 * KiB
#: The request line and all header field lines together, line ends not
#: counted; more: 431.
MAX_HEAD = 32 * KiB
#: Header fields in one request; more: 431.
MAX_HEADERS = 100
#: Query parameters in the request target (separators C{&} and C{;} plus
#: one); more: 400, counted before anything parses them.
MAX_QUERY_PARAMS = 1000
#: A request body, after any chunked framing; more: 413, as soon as a
#: Content-Length says so or a chunked body crosses it.
MAX_BODY = 3 * 1024 * 1024

#: Seconds from accepting a connection to the end of its TLS handshake.
TLS_HANDSHAKE_TIMEOUT = 10.0
#: Seconds from a request's first byte (or from the handshake, for the
#: first request of a connection) to the end of its header block; then 408.
HEADER_TIMEOUT = 10.0
#: Seconds from the end of the headers to the end of the body; then 408.
BODY_TIMEOUT = 60.0
#: Seconds a body may pause (no byte of it arriving) before its end; then
#: 408: a body announced and never sent is answered this soon.
BODY_PAUSE_TIMEOUT = 10.0
#: Seconds a keep-alive connection may wait for its next request's first
#: byte, and a finished response for a slow reader to take more of it.
IDLE_TIMEOUT = 90.0
#: Seconds a connection being closed may take to go (a response draining, a
#: TLS close alert unanswered) before it is aborted.
CLOSE_TIMEOUT = 15.0
#: Connections of one listener that have no request being handled (in the
#: TLS handshake, sending a request, idle or closing); past this the oldest
#: is dropped. Also at most half the open-file limit. Every node keeps a
#: connection that is idle between its Lease renewals, so a cluster of
#: 5,000 nodes has 5,000 such connections and more.
MAX_PENDING_CONNECTIONS = 16384
#: Connections the kernel may queue for a listener before it accepts them
#: (capped by net.core.somaxconn): a burst of clients, a thousand nodes
#: coming back at once, waits instead of having its SYNs dropped.
LISTEN_BACKLOG = 1024


class RequestLimits:
    """
    The limits one listener applies; the defaults are the constants above.

    Tests shrink them; the servers use the defaults.
    """

    __slots__ = ("max_line", "max_head", "max_headers", "max_query_params", "max_body",
                 "tls_handshake_timeout", "header_timeout", "body_timeout",
                 "body_pause_timeout", "idle_timeout", "close_timeout",
                 "max_pending_connections")

    def __init__(self, max_line=MAX_LINE, max_head=MAX_HEAD, max_headers=MAX_HEADERS,
                 max_query_params=MAX_QUERY_PARAMS, max_body=MAX_BODY,
                 tls_handshake_timeout=TLS_HANDSHAKE_TIMEOUT, header_timeout=HEADER_TIMEOUT,
                 body_timeout=BODY_TIMEOUT, body_pause_timeout=BODY_PAUSE_TIMEOUT,
                 idle_timeout=IDLE_TIMEOUT, close_timeout=CLOSE_TIMEOUT,
                 max_pending_connections=None):
        """
        @param max_pending_connections: None: L{MAX_PENDING_CONNECTIONS}, or
            half the process's open-file limit if that is lower.
        """
        self.max_line = max_line
        self.max_head = max_head
        self.max_headers = max_headers
        self.max_query_params = max_query_params
        self.max_body = max_body
        self.tls_handshake_timeout = tls_handshake_timeout
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.body_pause_timeout = body_pause_timeout
        self.idle_timeout = idle_timeout
        self.close_timeout = close_timeout
        if max_pending_connections is None:
            max_pending_connections = pending_bound(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        self.max_pending_connections = max_pending_connections


def pending_bound(open_files):
    """
    The pending-connection bound for an open-file limit of C{open_files}.

    Half the descriptors per listener leaves the rest to requests being
    served (watches above all), the store and outgoing connections,
    whatever idle or half-sent connections arrive; a quarter (5,000 of
    the usual 20,000) would drop the idle connections of a 5,000-node
    cluster, which then reconnect, handshake and drop others in turn.
    """
    if open_files == resource.RLIM_INFINITY:
        return MAX_PENDING_CONNECTIONS
    return max(16, min(MAX_PENDING_CONNECTIONS, open_files // 2))
