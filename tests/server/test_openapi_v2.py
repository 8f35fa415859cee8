"""Serving C{/openapi/v2} as JSON or as gnostic's protobuf (L{orchd.server.discovery})."""

import hashlib

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.test.requesthelper import DummyRequest

from orchd.registry.kinds.builtin import KINDS
from orchd.server.discovery import DiscoveryRoutes
from tests.api.test_openapiproto import field, one
from tests.support import APIHarness, _result

#: What kubectl sends when it reads the v2 document.
KUBECTL_ACCEPT = b"application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
PROTOBUF = b"application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
STABLE = [k for k in KINDS if k.stage == "stable"]


class ServingTests(SynchronousTestCase):
    """The negotiation, ETag and 304 of the v2 document through the resource tree."""

    def setUp(self):
        self.api = APIHarness()

    def get(self, accept=None, **headers):
        headers = {k.encode(): v for k, v in headers.items()}
        if accept is not None:
            headers[b"accept"] = accept
        return self.api.call("GET", "/openapi/v2", headers=headers)

    def test_kubectl_accept_gets_protobuf(self):
        """kubectl's Accept gets the protobuf Document, named with the current media type."""
        code, body, headers = self.get(KUBECTL_ACCEPT)
        self.assertEqual(code, 200)
        self.assertEqual(headers.getRawHeaders(b"content-type"), [PROTOBUF])
        self.assertEqual(one(body, 1), b"2.0")
        self.assertTrue(field(one(body, 9), 1), "definitions are encoded")
        self.assertEqual(headers.getRawHeaders(b"vary"), [b"Accept"])

    def test_both_spellings_and_preference(self):
        """Both spellings give the same bytes; JSON stays the default and wins its own ranking."""
        _, first, _ = self.get(KUBECTL_ACCEPT)
        _, second, _ = self.get(PROTOBUF)
        self.assertEqual(first, second)
        code, document, headers = self.get()
        self.assertEqual((code, document["swagger"]), (200, "2.0"))
        _, _, headers = self.get(b"application/json, " + PROTOBUF + b";q=0.5")
        self.assertEqual(headers.getRawHeaders(b"content-type"), [b"application/json"])
        _, _, headers = self.get(b"application/json;q=0.5, " + PROTOBUF)
        self.assertEqual(headers.getRawHeaders(b"content-type"), [PROTOBUF])

    def test_etag_of_the_json(self):
        """Both forms carry the quoted upper-case SHA-512 of the JSON form as their ETag."""
        _, json_body, headers = self.get_raw()
        etag = b'"%s"' % hashlib.sha512(json_body).hexdigest().upper().encode()
        self.assertEqual(headers.getRawHeaders(b"etag"), [etag])
        _, _, headers = self.get(KUBECTL_ACCEPT)
        self.assertEqual(headers.getRawHeaders(b"etag"), [etag])

    def get_raw(self):
        """The JSON form's exact bytes."""
        response = _result(self.api.treq.get("https://orchd/openapi/v2"))
        body = _result(self.api.treq.content(response))
        self.api.treq.flush()
        return response.code, body, response.headers

    def test_if_none_match(self):
        """A request naming the current ETag (or *) gets 304 without a body; another gets 200."""
        _, _, headers = self.get(KUBECTL_ACCEPT)
        [etag] = headers.getRawHeaders(b"etag")
        code, body, headers = self.get(KUBECTL_ACCEPT, **{"if-none-match": b'"other", ' + etag})
        self.assertEqual((code, body), (304, ""))
        self.assertEqual(headers.getRawHeaders(b"etag"), [etag])
        self.assertEqual(self.get(**{"if-none-match": b"*"})[0], 304)
        self.assertEqual(self.get(KUBECTL_ACCEPT, **{"if-none-match": b'"other"'})[0], 200)

    def test_unacceptable(self):
        """An Accept naming neither form is 406 with a Status."""
        code, status, _ = self.get(b"application/vnd.kubernetes.protobuf")
        self.assertEqual((code, status["reason"]), (406, "NotAcceptable"))

    def test_write_method(self):
        """Writing to the document is 405."""
        code, _, _ = self.api.call("POST", "/openapi/v2", {}, headers={b"accept": KUBECTL_ACCEPT})
        self.assertEqual(code, 405)


class FakeCatalog:
    def __init__(self, kinds):
        self.served_kinds = list(kinds)
        self.listeners = []

    def subscribe(self, listener):
        self.listeners.append(listener)


class CachingTests(SynchronousTestCase):
    """The protobuf form is encoded once per kind set, by the offload function."""

    def setUp(self):
        self.catalog = FakeCatalog(STABLE)
        self.runs = []
        self.routes = DiscoveryRoutes(self.catalog, offload=self.offload)

    def offload(self, f, *args):
        """Hold each run until the test fires it."""
        d = Deferred()
        self.runs.append((d, f, args))
        return d

    def finish(self, index):
        d, f, args = self.runs[index]
        d.callback(f(*args))

    def request(self):
        request = DummyRequest([b"openapi", b"v2"])
        request.requestHeaders.setRawHeaders(b"accept", [KUBECTL_ACCEPT])
        served = Deferred.fromCoroutine(self.routes.serve(request, ["openapi", "v2"]))
        return request, served

    def test_one_encoding_for_concurrent_requests(self):
        """Requests arriving while the document is encoded wait for that one run."""
        first, first_done = self.request()
        second, second_done = self.request()
        self.assertEqual(len(self.runs), 1)
        self.assertNoResult(first_done)
        self.finish(0)
        self.assertTrue(self.successResultOf(first_done))
        self.assertTrue(self.successResultOf(second_done))
        self.assertEqual(b"".join(first.written), b"".join(second.written))
        self.assertTrue(first.written)
        third, _ = self.request()
        self.assertEqual(len(self.runs), 1, "the bytes are kept")
        self.assertEqual(third.written, first.written)

    def test_kind_change_encodes_again(self):
        """A change of the served kinds drops the bytes; the next request encodes the new set."""
        self.request()
        self.finish(0)
        self.catalog.served_kinds = [k for k in STABLE if k.kind != "Secret"]
        self.routes.kind_unregistered(None)
        request, done = self.request()
        self.assertEqual(len(self.runs), 2)
        self.finish(1)
        self.successResultOf(done)
        self.assertNotIn(b"/api/v1/secrets", b"".join(request.written))

    def test_failed_encoding_is_retried(self):
        """A failed run fails its waiters, and the next request starts a new one."""
        _, first = self.request()
        _, second = self.request()
        self.runs[0][0].errback(MemoryError())
        self.failureResultOf(first, MemoryError)
        self.failureResultOf(second, MemoryError)
        self.request()
        self.assertEqual(len(self.runs), 2)

    def test_client_gone_while_encoding(self):
        """A client that left while the document was encoded gets nothing written."""
        request, done = self.request()
        request._disconnected = True
        self.finish(0)
        self.assertTrue(self.successResultOf(done))
        self.assertEqual(request.written, [])

    def test_synchronous_offload(self):
        """Without an offload thread (the default) the document is encoded in the call."""
        routes = DiscoveryRoutes(FakeCatalog(STABLE))
        request = DummyRequest([b"openapi", b"v2"])
        request.requestHeaders.setRawHeaders(b"accept", [PROTOBUF])
        self.assertTrue(self.successResultOf(
            Deferred.fromCoroutine(routes.serve(request, ["openapi", "v2"]))))
        self.assertEqual(one(b"".join(request.written), 1), b"2.0")
