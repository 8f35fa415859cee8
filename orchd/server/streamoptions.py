# -*- test-case-name: tests.server.test_streamoptions -*-
"""
The options of a streamed subresource, read from its request.

Each options class of L{orchd.registry.streams} has its reader here, as
upstream converts a query into C{NodeProxyOptions} or C{PodLogOptions}
before the registry sees them: values are read by their types with the
shared query reader (L{orchd.api.query}), so a value of the wrong type is
a 400 naming the parameter; whether a well-typed value is allowed is the
registry's to say.
"""

from orchd.api.query import query_bool, query_int, query_text
from orchd.registry.streams import PodLogOptions, ProxyOptions

def proxy_options(request, info):
    """
    C{nodes/<name>/proxy/<path>}: the path after C{proxy}, the query as sent
    and the method.

    @param info: the request's L{orchd.server.requestinfo.RequestInfo};
        C{parts[3:]} is the path after the subresource.
    """
    path = "/" + "/".join(info.parts[3:])
    if len(info.parts) > 3 and info.path.endswith("/"):
        path += "/"
    # The request line is ASCII (the channel refuses anything else).
    query = request.uri.partition(b"?")[2].decode("latin-1")
    return ProxyOptions(path, query, request.method.decode("latin-1"))


def log_options(request, info):
    """
    C{pods/<name>/log}: container, flags and limits from the query.

    @raise StatusError: 400 for a value that is not UTF-8, holds a NUL, or
        is not a 64-bit integer where one is wanted.
    """
    args = request.args
    return PodLogOptions(
        container=query_text(args, "container"),
        follow=query_bool(args, "follow"),
        previous=query_bool(args, "previous"),
        timestamps=query_bool(args, "timestamps"),
        since_seconds=query_int(args, "sinceSeconds", None),
        since_time=query_text(args, "sinceTime"),
        tail_lines=query_int(args, "tailLines", None),
        limit_bytes=query_int(args, "limitBytes", None),
    )


_READERS = {ProxyOptions: proxy_options, PodLogOptions: log_options}


def read_options(options, request, info):
    """
    An instance of the options class C{options} for C{request}.

    @raise StatusError: 400 for a query value of the wrong type.
    """
    return _READERS[options](request, info)
