# -*- test-case-name: tests.server.test_requestinfo -*-
"""
What a request is about, read off its method, path and query.

Authorization and dispatch both need to know whether a request names an
API resource, and if so its group, version, namespace, resource, name,
subresource and verb. The rules follow the API's URL layout:
C{/api/v1/...} and C{/apis/<group>/<version>/...}; everything else is a
non-resource request whose verb is the lowercase HTTP method.
"""

from orchd.api.groups import canonical_group
from orchd.api.query import query_bool

_METHOD_VERBS = {
    b"GET": "get",
    b"HEAD": "get",
    b"POST": "create",
    b"PUT": "update",
    b"PATCH": "patch",
    b"DELETE": "delete",
}

# Path segments after /namespaces/<name>/ that address the namespace itself.
_NAMESPACE_SUBRESOURCES = frozenset(("status", "finalize"))


class RequestInfo:
    """
    The parsed request; C{verb} follows the specification's method table.

    @ivar parts: the path segments from the resource on (C{resource, name,
        subresource, ...}), for handlers that need more (e.g. proxy paths).
    @ivar requested_group: the group as the path spelled it; C{api_group} is
        always the served name (see L{orchd.api.groups}).
    """

    __slots__ = (
        "is_resource_request", "path", "verb", "api_prefix", "api_group", "api_version",
        "namespace", "resource", "subresource", "name", "parts", "method", "requested_group",
    )

    def __init__(self, method, path):
        self.method = method
        self.path = path
        self.is_resource_request = False
        self.verb = method.decode("ascii", "replace").lower()
        self.api_prefix = ""
        self.api_group = ""
        self.requested_group = ""
        self.api_version = ""
        self.namespace = ""
        self.resource = ""
        self.subresource = ""
        self.name = ""
        self.parts = ()

    def __repr__(self):
        if not self.is_resource_request:
            return f"<RequestInfo {self.verb} {self.path}>"
        return (
            f"<RequestInfo {self.verb} {self.api_group}/{self.api_version} "
            f"ns={self.namespace!r} {self.resource}/{self.subresource} name={self.name!r}>"
        )


def parse_request_info(method, path, args):
    """
    Build the L{RequestInfo} of a request.

    @param method: the HTTP method (bytes).
    @param path: the decoded URL path (str), without the query.
    @param args: the query as twisted.web parses it (bytes keys, lists of bytes).
    """
    info = RequestInfo(method, path)
    segments = [s for s in path.split("/") if s]
    if len(segments) < 3 or segments[0] not in ("api", "apis"):
        return info
    prefix = segments[0]
    rest = segments[1:]
    if prefix == "apis":
        if len(rest) < 3:
            return info
        # [COMPAT] typed clients write upstream group names; serve the renamed group.
        info.requested_group = rest[0]
        info.api_group = canonical_group(rest[0])
        rest = rest[1:]
    info.api_prefix = prefix
    info.is_resource_request = True
    info.api_version = rest[0]
    rest = rest[1:]

    verb = _METHOD_VERBS.get(method, "")
    if rest and rest[0] == "watch":
        # The legacy /watch/ prefix: a watch on what follows.
        verb = "watch" if method in (b"GET", b"HEAD") else verb
        rest = rest[1:]
    info.verb = verb

    if rest and rest[0] == "namespaces":
        if len(rest) > 1:
            info.namespace = rest[1]
            if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
                rest = rest[2:]
    info.parts = tuple(rest)
    if len(rest) >= 3:
        info.subresource = rest[2]
    if len(rest) >= 2:
        info.name = rest[1]
    if rest:
        info.resource = rest[0]

    if not info.name and info.verb == "get":
        # As upstream, a watch value that is not even text still names a watch.
        info.verb = "watch" if query_bool(args, "watch", strict=False) else "list"
        name = _exact_name(args)
        if name:
            info.name = name
    elif not info.name and info.verb == "delete":
        info.verb = "deletecollection"
    return info


def _exact_name(args):
    """The name a list's field selector pins with C{metadata.name=<name>}, if any."""
    values = args.get(b"fieldSelector")
    if not values:
        return ""
    for term in values[0].decode("utf-8", "replace").split(","):
        for op in ("==", "="):
            key, sep, value = term.partition(op)
            if sep and key.strip() == "metadata.name" and not key.endswith("!"):
                value = value.strip()
                if value and "/" not in value and "%" not in value and value not in (".", ".."):
                    return value
                return ""
    return ""
