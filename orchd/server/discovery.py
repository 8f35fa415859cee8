# -*- test-case-name: tests.api.test_openapi,tests.api.test_groups,tests.server.test_handlers,tests.server.test_openapi_v2,tests.server.test_upstream_names -*-
"""
Serving discovery and OpenAPI: C{/version}, C{/api}, C{/apis/...}, C{/openapi/...}.

The documents depend only on the served kinds, so each is built once on
first use and kept encoded, until the catalog starts or stops serving a
kind. The OpenAPI v2 document is also served as gnostic's protobuf
(L{orchd.api.openapiproto}), the only form kubectl asks it in; encoding
it takes tens of milliseconds, so it runs on the offload thread, once
per change of the kinds, and requests meanwhile wait for that one run.
"""

import hashlib

from twisted.internet.defer import Deferred, maybeDeferred
from zope.interface import implementer

from orchd.api import codecs, discovery, openapi, openapiproto
from orchd.api.errors import StatusError
from orchd.api.groups import with_upstream_names
from orchd.registry.definitions import IKindListener
from orchd.server.errors import request_gone
from orchd.server.negotiation import negotiate, wants_aggregated
from orchd.server.response import write_body, write_object

_JSON = b"application/json"
_READ_METHODS = (b"GET", b"HEAD")

#: [COMPAT] The media types of the protobuf OpenAPI v2 document, as
#: kube-openapi spells them: kubectl asks for the first (deprecated) one;
#: the answer always names the second.
OPENAPI_V2_PROTOBUF_DEPRECATED = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
_V2_OFFERS = (codecs.JSON, OPENAPI_V2_PROTOBUF_DEPRECATED, OPENAPI_V2_PROTOBUF)
_V2 = ("openapi", "v2")
_V2_PROTOBUF = ("openapi", "v2", "protobuf")
_V2_ETAG = ("openapi", "v2", "etag")


def _encode_v2(kinds):
    return openapiproto.encode_document(openapi.openapi_v2(kinds))


@implementer(IKindListener)
class DiscoveryRoutes:
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}, whose served kinds
        the documents describe; they follow its changes.
    @param offload: C{offload(f, *args)}, a Deferred of C{f(*args)} computed
        off the reactor thread (L{orchd.server.offload.Offload}).
    @param upstream_group_names: C{--upstream-group-names}: the documents
        also list every renamed group under its upstream spelling
        (L{orchd.api.groups.with_upstream_names}), after the served name.
    """

    def __init__(self, catalog, offload=maybeDeferred, upstream_group_names=False):
        self._catalog = catalog
        self._offload = offload
        self._upstream_group_names = upstream_group_names
        self._kinds = self._described_kinds()
        self._cache = {}
        catalog.subscribe(self)

    def _described_kinds(self):
        kinds = list(self._catalog.served_kinds)
        return with_upstream_names(kinds) if self._upstream_group_names else kinds

    def _changed(self):
        self._kinds = self._described_kinds()
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
        if key == _V2:
            await self._serve_v2(request)
            return True
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
        if segments == _V2:
            return _V2, lambda: openapi.openapi_v2(kinds), _JSON
        if segments == ("openapi", "v3"):
            return segments, lambda: openapi.openapi_v3_index(kinds), _JSON
        if segments[:2] == ("openapi", "v3"):
            path = "/".join(segments[2:])
            return segments, lambda: openapi.openapi_v3_document(kinds, path), _JSON
        return None

    async def _serve_v2(self, request):
        """
        The v2 document in the form the Accept header picks, JSON or protobuf.

        [COMPAT] As kube-openapi: the ETag (a SHA-512 of the JSON form, in
        upper-case hex) is the same for both forms, the answer varies on
        Accept, and a request whose If-None-Match names the ETag gets 304.
        """
        media_type = negotiate(request.getHeader(b"accept"), _V2_OFFERS)
        cache = self._cache
        json_body = self._cached(_V2, lambda: openapi.openapi_v2(self._kinds))
        etag = cache.get(_V2_ETAG)
        if etag is None:
            etag = cache[_V2_ETAG] = b'"%s"' % hashlib.sha512(json_body).hexdigest().upper().encode()
        request.setHeader(b"vary", b"Accept")
        request.setHeader(b"etag", etag)
        tags = _entity_tags(request.getHeader(b"if-none-match"))
        if etag in tags or b"*" in tags:
            request.setResponseCode(304)
            request.finish()
            return
        if media_type == codecs.JSON:
            write_body(request, 200, _JSON, json_body)
        else:
            body = await self._protobuf_v2()
            if request_gone(request):
                return
            write_body(request, 200, OPENAPI_V2_PROTOBUF.encode("ascii"), body)

    async def _protobuf_v2(self):
        """The protobuf v2 document: encoded once per kind set, off the reactor thread."""
        cache = self._cache
        entry = cache.get(_V2_PROTOBUF)
        if type(entry) is bytes:
            return entry
        if entry is not None:
            waiter = Deferred()
            entry.append(waiter)
            return await waiter
        waiters = cache[_V2_PROTOBUF] = []
        try:
            body = await self._offload(_encode_v2, self._kinds)
        except BaseException as error:
            if cache.get(_V2_PROTOBUF) is waiters:
                del cache[_V2_PROTOBUF]
            for waiter in waiters:
                waiter.errback(error)
            raise
        if cache.get(_V2_PROTOBUF) is waiters:
            cache[_V2_PROTOBUF] = body
        for waiter in waiters:
            waiter.callback(body)
        return body


def _entity_tags(header):
    """The entity tags of an If-None-Match header, weak ones compared as strong (as Go does)."""
    if not header:
        return ()
    return [tag.strip().removeprefix(b"W/") for tag in header.split(b",")]


def _server_address(request):
    host = request.getHost()
    address = getattr(host, "host", "127.0.0.1")
    if ":" in address:
        address = f"[{address}]"
    return f"{address}:{getattr(host, 'port', 0)}"
