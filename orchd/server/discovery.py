# -*- test-case-name: tests.api.test_openapi,tests.api.test_groups,tests.server.test_handlers -*-
"""
Serving discovery and OpenAPI: C{/version}, C{/api}, C{/apis/...}, C{/openapi/...}.

The documents depend only on the served kinds, so each is built once on
first use and kept encoded, until the catalog starts or stops serving a
kind.
"""

from zope.interface import implementer

from orchd.api import codecs, discovery, openapi
from orchd.api.errors import StatusError
from orchd.registry.definitions import IKindListener
from orchd.server.negotiation import negotiate, wants_aggregated
from orchd.server.response import write_body, write_object

_JSON = b"application/json"
_READ_METHODS = (b"GET", b"HEAD")


@implementer(IKindListener)
class DiscoveryRoutes:
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}, whose served kinds
        the documents describe; they follow its changes.
    """

    def __init__(self, catalog):
        self._catalog = catalog
        self._kinds = list(catalog.served_kinds)
        self._cache = {}
        catalog.subscribe(self)

    def _changed(self):
        self._kinds = list(self._catalog.served_kinds)
        self._cache = {}

    def kind_registered(self, definition):
        self._changed()

    def kind_unregistered(self, definition):
        self._changed()

    def _cached(self, key, build):
        body = self._cache.get(key)
        if body is None:
            document = build()
            body = self._cache[key] = None if document is None else codecs.dumps_json(document)
        return body

    async def serve(self, request, segments):
        """
        Answer C{request} if C{segments} name a discovery document.

        @return: False when the path is not one of these documents.
        """
        route = self._route(request, tuple(segments))
        if route is None:
            return False
        if request.method not in _READ_METHODS:
            raise StatusError(405, "MethodNotAllowed",
                              f"{request.method.decode()} is not supported on {request.path.decode()}")
        key, build, content_type = route
        if key is None:
            write_object(request, 200, build())
            return True
        body = self._cached(key, build)
        if body is None:
            return False
        write_body(request, 200, content_type, body)
        return True

    def _route(self, request, segments):
        kinds = self._kinds
        if segments == ("version",):
            return "version", discovery.version_info, _JSON
        if segments in (("api",), ("apis",)):
            core = segments == ("api",)
            if wants_aggregated(request.getHeader(b"accept") or b""):
                return (("aggregated", core), lambda: discovery.aggregated_discovery(kinds, core),
                        discovery.AGGREGATED_MEDIA_TYPE.encode("ascii"))
            if core:
                address = _server_address(request)
                return None, lambda: discovery.api_versions(address), _JSON
            return "apis", lambda: discovery.api_group_list(kinds), _JSON
        if segments == ("api", "v1"):
            return segments, lambda: discovery.api_resource_list(kinds, "", "v1"), _JSON
        if len(segments) == 2 and segments[0] == "apis":
            return segments, lambda: discovery.api_group(kinds, segments[1]), _JSON
        if len(segments) == 3 and segments[0] == "apis":
            return (segments,
                    lambda: discovery.api_resource_list(kinds, segments[1], segments[2]), _JSON)
        if segments == ("openapi", "v2"):
            # kubectl asks for v2 only as protobuf, and falls back cleanly on 406.
            negotiate(request.getHeader(b"accept"), (codecs.JSON,))
            return segments, lambda: openapi.openapi_v2(kinds), _JSON
        if segments == ("openapi", "v3"):
            return segments, lambda: openapi.openapi_v3_index(kinds), _JSON
        if segments[:2] == ("openapi", "v3"):
            path = "/".join(segments[2:])
            return segments, lambda: openapi.openapi_v3_document(kinds, path), _JSON
        return None


def _server_address(request):
    host = request.getHost()
    address = getattr(host, "host", "127.0.0.1")
    if ":" in address:
        address = f"[{address}]"
    return f"{address}:{getattr(host, 'port', 0)}"
