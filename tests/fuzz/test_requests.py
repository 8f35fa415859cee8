"""
Request parsing on hostile input: continue tokens, request info, Accept
headers, and a whole L{APISite} (over a memory store) fed hostile bytes:
request lines, paths, queries, headers and bodies. Every complete request
gets one well-formed HTTP answer below 500.
"""

import base64
import json
import re
from urllib.parse import quote, quote_from_bytes

from hypothesis import example, given
from hypothesis import strategies as st
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from orchd.api import codecs
from orchd.registry.options import decode_continue, encode_continue
from orchd.server.negotiation import negotiate, parse_accept
from orchd.server.requestinfo import RequestInfo, parse_request_info
from orchd.server.site import APISite
from tests.fuzz.support import bounded, fuzz, json_values
from tests.fuzz.test_decoders import laughs, yaml_documents
from tests.support import APIHarness

# -- continue tokens --------------------------------------------------------------

_KEYS = st.one_of(st.text(max_size=20), st.sampled_from(["default/a", "a", "", "../x", "/x",
                                                          "a/../b", "..", "a/..", "\x00"]))


def _token_of(data):
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


_payloads = st.fixed_dictionaries(
    {"v": st.one_of(st.just("meta.k8s.io/v1"), json_values(2))},
    optional={"rv": st.one_of(st.integers(-5, 1 << 70), json_values(2)),
              "start": st.one_of(_KEYS, json_values(2)),
              "remaining": st.one_of(st.integers(-5, 1 << 70), json_values(2))})


class ContinueTokenTests(SynchronousTestCase):
    @fuzz(300)
    @given(st.one_of(st.text(max_size=60), st.binary(max_size=60).map(_token_of),
                     json_values(8).map(lambda v: _token_of(json.dumps(v).encode())),
                     _payloads.map(lambda v: _token_of(json.dumps(v).encode()))))
    @example("\udcff")
    @example("====")
    def test_any_token(self, token):
        """Any continue value is a (revision, start, remaining) triple or a 400."""
        outcome = bounded(self, decode_continue, token)
        if outcome.error is None:
            revision, start, remaining = outcome.value
            self.assertIsInstance(revision, int)
            self.assertGreaterEqual(revision, 0)
            self.assertIsInstance(start, str)
            self.assertTrue(remaining is None or remaining >= 0)

    @fuzz(200)
    @given(st.integers(0, (1 << 63) - 1), _KEYS, st.one_of(st.none(), st.integers(0, 1 << 40)))
    def test_round_trip(self, revision, key, remaining):
        """A token this server makes decodes to what it was made of (or is refused for its key)."""
        token = encode_continue(revision, key, remaining)
        self.assertRegex(token, r"^[A-Za-z0-9_-]*$")
        outcome = bounded(self, decode_continue, token)
        if outcome.error is None:
            self.assertEqual(outcome.value, (revision, key, remaining))
        else:
            self.assertTrue(key.startswith(("/", "..")) or "/.." in key, key)


# -- request info and Accept ------------------------------------------------------

_SEGMENTS = st.sampled_from(
    ["api", "apis", "v1", "apps", "namespaces", "default", "configmaps", "pods", "deployments",
     "status", "scale", "proxy", "log", "watch", "nodes", "finalize", "c", "d", "..", ".", "",
     "%2e%2e", "%2F", "%00", "%ff", "%", "%zz", "é", "a" * 300, "orch.io", "apps.orch.io",
     "rbac.authorization.k8s.io", "\x00", "selfsubjectaccessreviews", "openapi", "v3",
     "healthz", "readyz", "livez", "version", "serviceaccounts", "token", "eviction"])
_NAMES = st.sampled_from(["c", "d", "..", ".", "%2e%2e", "%2E%2e", "a%2Fb", "%00", "a%00b",
                          "%ff", "%c3%28", "%", "%zz", "a" * 300, "a" * 10000, "é", "\x00",
                          "a b", "..%2F..", "%252e%252e", ""])
_TEMPLATES = st.sampled_from([
    "/api/v1/namespaces/{}/configmaps/{}", "/api/v1/namespaces/{}/pods/{}/log",
    "/apis/apps/v1/namespaces/{}/deployments/{}/scale", "/api/v1/{}/{}",
    "/apis/{}/v1/namespaces/default/{}", "/api/v1/namespaces/{}/{}", "/api/{}/{}",
    "/api/v1/nodes/{}/proxy/{}", "/api/v1/watch/namespaces/{}/configmaps/{}",
    "/openapi/v3/{}/{}", "/{}/{}", "/healthz/{}/{}"])
paths = st.one_of(
    st.lists(_SEGMENTS, max_size=8).map(lambda s: "/" + "/".join(s)),
    st.tuples(_TEMPLATES, _NAMES, _NAMES).map(lambda t: t[0].format(t[1], t[2])),
    st.text(max_size=40))
_QUERY_KEYS = [b"watch", b"fieldSelector", b"labelSelector", b"limit", b"continue",
               b"resourceVersion", b"timeoutSeconds", b"dryRun", b"fieldManager"]
_ARGS = st.dictionaries(st.one_of(st.sampled_from(_QUERY_KEYS), st.binary(max_size=6)),
                        st.lists(st.binary(max_size=20), max_size=2), max_size=4)


class RequestInfoTests(SynchronousTestCase):
    @fuzz(400)
    @given(st.one_of(st.sampled_from([b"GET", b"HEAD", b"POST", b"PUT", b"PATCH", b"DELETE"]),
                     st.binary(max_size=8)), paths, _ARGS)
    @example(b"GET", "/api/v1/namespaces/default/configmaps",
             {b"fieldSelector": [b"metadata.name=\xff\x00"]})
    def test_any_request(self, method, path, args):
        """Any method, path and query give a RequestInfo."""
        outcome = bounded(self, parse_request_info, method, path, args)
        self.assertIsInstance(outcome.value, RequestInfo)
        repr(outcome.value)


_MEDIA = st.sampled_from(["application/json", "application/yaml", "*/*", "application/*",
                          "application/vnd.kubernetes.protobuf", "text/html", "*/json", "/",
                          "application/json;as=Table;v=v1;g=meta.k8s.io", ";", ",", "q=0.5",
                          "application/json;q=abc", "application/json;q=nan", "a/b;q=1e400",
                          "application/json;stream=watch", '"a,b"/c', 'a/b;x="\\"', "\x00"])
accept_headers = st.one_of(
    st.lists(_MEDIA, max_size=4).map(", ".join), st.text(max_size=40),
    st.binary(max_size=40), st.just("application/json;" + "a=b;" * 2000))


class AcceptTests(SynchronousTestCase):
    @fuzz(300)
    @given(accept_headers)
    @example('a/b;q="' + "\\" * 1000)
    def test_any_header(self, header):
        """Any Accept header yields ranges best first, and negotiates an offer or a 406."""
        ranges = bounded(self, parse_accept, header).value
        qualities = [r.quality for r in ranges]
        self.assertEqual(qualities, sorted(qualities, reverse=True))
        outcome = bounded(self, negotiate, header)
        if outcome.error is None:
            self.assertIn(outcome.value, (codecs.JSON, codecs.YAML))
        else:
            self.assertEqual(outcome.error.code, 406)


# -- a whole site -----------------------------------------------------------------

_STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d{3}) ")


class Connection:
    """One connection to an L{APISite}, in memory: bytes in, answers out."""

    def __init__(self, site):
        self.transport = StringTransport()
        self.protocol = site.buildProtocol(None)
        self.protocol.makeConnection(self.transport)

    def send(self, data):
        self.protocol.dataReceived(data)
        return self.transport.value()

    def close(self):
        if not self.transport.disconnecting:
            self.protocol.connectionLost(Failure(ConnectionDone()))


class SiteCase(SynchronousTestCase):
    """A whole API server, fed raw bytes over an in-memory connection."""

    def setUp(self):
        self.api = APIHarness()
        self.api.call("POST", "/api/v1/namespaces/default/configmaps",
                      {"metadata": {"name": "c"}, "data": {"a": "1"}})
        self.api.call("POST", "/apis/apps/v1/namespaces/default/deployments", {
            "metadata": {"name": "d"}, "spec": {
                "selector": {"matchLabels": {"app": "a"}},
                "template": {"metadata": {"labels": {"app": "a"}},
                             "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
        self.site = APISite(self.api.resource, reactor=MemoryReactorClock())

    def exchange(self, data, complete=True):
        """
        Send C{data} on a new connection; every answer must be below 500 and,
        when C{complete} (the data ends a request), there must be one.

        @return: the status codes answered.
        """
        connection = Connection(self.site)
        try:
            output = bounded(self, connection.send, data).value
        finally:
            connection.close()
        codes = [int(code) for code in _STATUS_LINE.findall(output)]
        if output:
            self.assertTrue(_STATUS_LINE.match(output), output[:200])
        for code in codes:
            self.assertLess(code, 500, output[:2000])
        if complete and not connection.transport.disconnecting:
            self.assertTrue(codes, f"no answer to {data[:300]!r}")
        return codes


def _request(method, target, headers=(), body=b"", version=b"HTTP/1.1"):
    lines = [method + b" " + target + b" " + version, b"Host: orchd"]
    lines += [name + b": " + value for name, value in headers]
    if body is not None:
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + (body or b"")


def _encoded(path):
    return quote(path, safe="/%:@!$&'()*+,;=").encode("utf-8", "surrogateescape")


_METHODS = st.sampled_from([b"GET", b"HEAD", b"POST", b"PUT", b"PATCH", b"DELETE",
                            b"OPTIONS", b"TRACE", b"CONNECT", b"PROPFIND"])
_RESOURCES = st.sampled_from([
    "/api/v1/namespaces/default/configmaps", "/api/v1/namespaces/default/configmaps/c",
    "/apis/apps/v1/namespaces/default/deployments/d", "/api/v1/pods", "/api/v1/nodes",
    "/apis/apps/v1/namespaces/default/deployments/d/scale", "/api/v1/namespaces/default",
    "/api/v1/namespaces/default/pods/p/log", "/api/v1/namespaces/default/events",
    "/apis/rbac.authorization.k8s.io/v1/clusterroles", "/api/v1/namespaces"])
_PARAMETERS = ["labelSelector", "fieldSelector", "limit", "continue", "resourceVersion",
               "resourceVersionMatch", "timeoutSeconds", "watch", "allowWatchBookmarks",
               "sendInitialEvents", "dryRun", "fieldManager", "fieldValidation", "force",
               "pretty", "propagationPolicy", "gracePeriodSeconds", "orphanDependents",
               "includeObject", "exclude", "verbose", "follow", "tailLines", "container"]
_VALUES = st.one_of(
    st.sampled_from([b"", b"0", b"-1", b"1", b"true", b"false", b"99999999999999999999",
                     b"-99999999999999999999", b"1e3", b"0x10", b"%00", b"%ff", b"%ff%fe",
                     b"a%00b", b"%", b"%zz", b"a=b", b"a in (b)", b"All", b"Strict",
                     b"Foreground", b"NotOlderThan", b"Exact", b"9" * 5000, b"x" * 5000]),
    st.binary(max_size=12).map(quote_from_bytes).map(str.encode))
queries = st.lists(st.tuples(st.sampled_from(_PARAMETERS), _VALUES), max_size=4).map(
    lambda pairs: b"&".join(name.encode() + b"=" + value for name, value in pairs))


class SitePathTests(SiteCase):
    @fuzz(250)
    @given(_METHODS, paths)
    @example(b"GET", "/api/v1/namespaces/%2e%2e/configmaps")
    @example(b"GET", "/api/v1/namespaces/default/configmaps/%ff")
    @example(b"DELETE", "/api/v1/namespaces/default/configmaps/" + "a" * 5000)
    def test_hostile_paths(self, method, path):
        """Any method on any path (dot segments, escapes, NULs, long names) is answered < 500."""
        self.exchange(_request(method, _encoded(path), body=None))


class SiteQueryTests(SiteCase):
    @fuzz(250)
    @given(st.sampled_from([b"GET", b"DELETE", b"PATCH", b"PUT", b"POST"]), _RESOURCES,
           queries)
    def test_hostile_queries(self, method, path, query):
        """Hostile values of every query parameter the API reads are answered below 500."""
        headers = [(b"Content-Type", b"application/merge-patch+json")] \
            if method == b"PATCH" else []
        self.exchange(_request(method, path.encode() + b"?" + query, headers, b"{}"))


def _dump(value):
    return json.dumps(value).encode()  # integers of any size, written out


def _bodies():
    documents = st.one_of(
        json_values(20).map(_dump),
        yaml_documents().map(str.encode),
        st.binary(max_size=100),
        st.integers(2, 9).map(lambda width: laughs(width, 9).encode()),
        st.sampled_from([b"[" * 5000 + b"]" * 5000, b'{"a":' * 200 + b"1" + b"}" * 200,
                         b'{"metadata": {"name": "c"}, "spec": {"replicas": 1e400}}',
                         b'{"metadata": {"name": "c"}, "data": {"a": "' + b"x" * 100000 + b'"}}',
                         b'{"metadata": {"name": "d"}, "spec": {"replicas": 99999999999}}',
                         b"k8s\x00" + b"\xff" * 20, b"!!int ''", b"!!float ''",
                         b'{"metadata": {"name": "c", "managedFields": [{"operation": 1}]}}',
                         b'[{"op": "add", "path": "/metadata/labels/a", "value": 1}]',
                         b'[{"op": "move", "from": "/metadata", "path": "/metadata/x"}]']))
    objects = st.fixed_dictionaries({}, optional={
        "apiVersion": st.sampled_from(["v1", "apps/v1", "x", ""]),
        "kind": st.sampled_from(["ConfigMap", "Deployment", "Status", ""]),
        "metadata": st.fixed_dictionaries({}, optional={
            "name": st.sampled_from(["c", "d", "", "C", "a" * 300]),
            "labels": json_values(3), "annotations": json_values(3),
            "managedFields": json_values(4), "finalizers": json_values(3),
            "resourceVersion": json_values(1), "ownerReferences": json_values(3),
            "generateName": json_values(1)}),
        "data": json_values(4), "binaryData": json_values(3), "spec": json_values(6),
        "status": json_values(4)}).map(_dump)
    return st.one_of(documents, objects)


_CONTENT_TYPES = st.sampled_from([
    b"application/json", b"application/yaml", b"application/vnd.kubernetes.protobuf",
    b"application/json-patch+json", b"application/merge-patch+json",
    b"application/strategic-merge-patch+json", b"application/apply-patch+yaml",
    b"text/plain", b"", b"application/json; charset=utf-16", b"application/x-yaml"])


_COLLECTIONS = ["/api/v1/namespaces/default/configmaps",
                "/apis/apps/v1/namespaces/default/deployments", "/api/v1/namespaces",
                "/api/v1/namespaces/default/secrets", "/api/v1/namespaces/default/pods",
                "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"]
_OBJECTS = ["/api/v1/namespaces/default/configmaps/c",
            "/apis/apps/v1/namespaces/default/deployments/d",
            "/apis/apps/v1/namespaces/default/deployments/d/status",
            "/apis/apps/v1/namespaces/default/deployments/d/scale",
            "/api/v1/namespaces/default", "/api/v1/namespaces/default/configmaps/new"]
_BODY_TYPES = [b"application/json", b"application/yaml", b"application/vnd.kubernetes.protobuf",
               b"text/plain", b"", b"application/json; charset=utf-16", b"application/x-yaml"]
_PATCH_TYPES = [b"application/json-patch+json", b"application/merge-patch+json",
                b"application/strategic-merge-patch+json", b"application/apply-patch+yaml"]
_writes = st.one_of(
    st.tuples(st.just(b"POST"), st.sampled_from(_COLLECTIONS), st.sampled_from(_BODY_TYPES)),
    st.tuples(st.just(b"PUT"), st.sampled_from(_OBJECTS), st.sampled_from(_BODY_TYPES)),
    st.tuples(st.just(b"PATCH"), st.sampled_from(_OBJECTS),
              st.sampled_from(_PATCH_TYPES + [b"application/json"])),
    st.tuples(st.just(b"DELETE"), st.sampled_from(_OBJECTS + _COLLECTIONS),
              st.sampled_from([b"application/json", b"application/yaml"])))


class SiteBodyTests(SiteCase):
    @fuzz(300)
    @given(_writes, _bodies(),
           st.sampled_from([b"", b"?fieldManager=m", b"?fieldManager=m&force=true",
                            b"?fieldValidation=Strict", b"?dryRun=All&fieldManager=m"]))
    @example((b"POST", _COLLECTIONS[0], b"application/yaml"), b"data: !!int ''", b"")
    @example((b"PATCH", _OBJECTS[1], b"application/apply-patch+yaml"),
             b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, finalizers: [a, a]}",
             b"?fieldManager=m")
    def test_hostile_bodies(self, write, body, query):
        """Hostile bodies of creates, updates, patches, applies and deletes are answered < 500."""
        method, path, content_type = write
        headers = [(b"Content-Type", content_type)] if content_type else []
        self.exchange(_request(method, path.encode() + query, headers, body))


_HEADERS = st.lists(st.one_of(
    st.tuples(st.just(b"Accept"), accept_headers.map(
        lambda h: h.encode("utf-8", "surrogateescape") if isinstance(h, str) else h)),
    st.tuples(st.sampled_from([b"Content-Type", b"User-Agent", b"Accept-Encoding",
                               b"Authorization", b"Connection", b"Expect", b"X-Remote-User"]),
              st.binary(max_size=30)),
), max_size=4).map(lambda headers: [(name, value.replace(b"\r", b"").replace(b"\n", b""))
                                    for name, value in headers])

_IMPERSONATION = st.lists(st.tuples(
    st.sampled_from([b"Impersonate-User", b"Impersonate-Group", b"Impersonate-Uid",
                     b"Impersonate-Extra-scopes", b"Impersonate-Extra-%ZZ",
                     b"Impersonate-Extra-"]),
    st.sampled_from([b"alice", b"", b"system:admin", b"%ff", b"\xff", b"a b"])), max_size=3)


class SiteHeaderTests(SiteCase):
    @fuzz(200)
    @given(st.sampled_from([b"GET", b"POST", b"PATCH"]), _RESOURCES, _HEADERS)
    def test_hostile_headers(self, method, path, headers):
        """Hostile Accept, Content-Type and other header values are answered below 500."""
        self.exchange(_request(method, path.encode(), headers, b"{}"))

    @fuzz(100)
    @given(_RESOURCES, _IMPERSONATION)
    def test_impersonation_headers(self, path, headers):
        """Any set of Impersonate-* headers is answered below 500."""
        self.exchange(_request(b"GET", path.encode(), headers, None))


def _malformed():
    line_ends = st.sampled_from([b"\r\n", b"\n", b"\r"])
    request_lines = st.one_of(
        st.tuples(st.sampled_from([b"GET", b"G\x00T", b"", b"get", b"POST", b"GET GET"]),
                  st.sampled_from([b"/api/v1/namespaces", b"", b"*", b"http://x/api",
                                   b"/\x00", b"/ /", b"/" + b"a" * 20000, b"/%ff"]),
                  st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0", b"HTTP/9", b"",
                                   b"HTTP/1.1x", b"http/1.1", b"HTTP/1.1 extra"])).map(
            lambda t: b" ".join(part for part in t if part)),
        st.binary(max_size=40))
    headers = st.lists(st.one_of(
        st.sampled_from([b"Content-Length: 5", b"Content-Length: -1", b"Content-Length: abc",
                         b"Content-Length: 99999999999999999999", b"Content-Length: 5, 6",
                         b"Content-Length:", b"Transfer-Encoding: chunked",
                         b"Transfer-Encoding: gzip, chunked", b"Transfer-Encoding: identity",
                         b" folded continuation", b"\tfolded", b"X-A: \x00", b"No-Colon",
                         b": empty name", b"X-Long: " + b"a" * 20000, b"Host:",
                         b"Expect: 100-continue", b"Connection: close"]),
        st.binary(max_size=20)), max_size=6)
    bodies = st.sampled_from([b"", b"hello", b"5\r\nhello\r\n0\r\n\r\n", b"zz\r\nx\r\n",
                              b"-1\r\n", b"ffffffffffffffffffff\r\nx", b"0\r\n\r\n",
                              b"3\r\nabcdef\r\n0\r\n\r\n",
                              b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"])
    return st.tuples(request_lines, headers, line_ends, bodies).map(
        lambda t: t[2].join([t[0], *t[1]]) + t[2] + t[2] + t[3])


class SiteMalformedTests(SiteCase):
    @fuzz(300)
    @given(_malformed())
    @example(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 3)
    @example(b"POST /api/v1/namespaces HTTP/1.1\r\nContent-Length: 3\r\n"
             b"Transfer-Encoding: chunked\r\n\r\nzz\r\n")
    def test_malformed_http(self, data):
        """Malformed HTTP (request lines, versions, line ends, framing, pipelining) gets no 5xx."""
        self.exchange(data, complete=False)

    @fuzz(30)
    @given(st.integers(1, 3000), st.sampled_from([b"X-H", b"Accept", b"Cookie"]))
    def test_header_floods(self, count, name):
        """Thousands of headers are answered (or the connection closed), never with a 5xx."""
        headers = [(name, b"v%d" % i) for i in range(count)]
        self.exchange(_request(b"GET", b"/api/v1/namespaces", headers, None), complete=False)
