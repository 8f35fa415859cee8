#!/usr/bin/env python3
"""
Hostile requests against a real orchd, over raw TLS sockets.

Starts ``twistd orchd`` on free ports (bench/common.py), then:

- ``hostile``: several thousand hostile requests from a few threads, most
  with the admin client certificate and some without any: malformed HTTP
  (request lines, versions, bare LF, header folding, NULs, huge headers,
  header floods, conflicting Content-Length and Transfer-Encoding, bad
  chunk sizes, pipelining), path tricks, hostile YAML/JSON/protobuf bodies
  on create, update, every patch type and apply, huge and invalid values of
  every query parameter the API reads, and, meanwhile, slowloris
  connections (trickled headers and bodies, idle TLS handshakes) and a
  canary client timing a small GET. Each request records its status code,
  its time to answer, and whether the connection closed without the answer
  that was due; orchd's RSS is sampled from /proc.
- ``bombs``: GET latency of one client (p50, p99) alone, then while another
  sends a decoding bomb every 100 ms.
- ``schemathesis``: schemathesis against the served ``/openapi/v3``
  documents, fetched with the admin certificate (``pip install
  schemathesis``; it is a bench tool, not a dependency of orchd).

Prints a summary and exits 1 when any answer was >= 500, any request went
unanswered for --timeout seconds, or (``bombs``) the p99 with bombs was
over 100 ms.

Usage: python bench/fuzz.py [--modes hostile,bombs,schemathesis] [--requests 4000]
           [--threads 6] [--timeout 15] [--slow 40] [--bomb-secs 30]
           [--schemathesis-secs 180] [--seed 1] [--json FILE]
"""

import argparse
import base64
import json
import os
import random
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

from common import Orchd, rss_mb

NS = "fuzz"
CM = f"/api/v1/namespaces/{NS}/configmaps"
#: What the canary, the pipelines and the bombs' GET client read: an object
#: no hostile request writes or deletes.
QUIET = "/api/v1/namespaces/fuzz-quiet/configmaps/quiet"
DEPLOY = f"/apis/apps/v1/namespaces/{NS}/deployments"


# -- one exchange over raw TLS ----------------------------------------------------------

class Case:
    """
    One hostile exchange: the bytes to send (in parts, with pauses), with or
    without the client certificate, and how many answers are due.
    """

    __slots__ = ("kind", "parts", "cert", "answers", "label")

    def __init__(self, kind, data, cert=True, answers=1, label=None, parts=None):
        self.kind = kind
        self.parts = parts or [(data, 0)]
        self.cert = cert
        self.answers = answers
        self.label = label or _label(data if parts is None else parts[0][0])


def _label(data, lines=1):
    head = b"\n".join(data.split(b"\n")[:lines])
    text = head.decode("latin-1").encode("unicode_escape").decode("ascii")
    return text if len(text) <= 220 else text[:200] + f"...({len(data)} bytes)"


class Result:
    __slots__ = ("case", "codes", "seconds", "closed", "error", "hung")

    def __init__(self, case):
        self.case = case
        self.codes = []
        self.seconds = None
        self.closed = False
        self.error = None
        self.hung = False

    @property
    def dropped(self):
        """Closed without an answer that was due."""
        return self.closed and len(self.codes) < self.case.answers and not self.hung


class Target:
    """Where orchd listens, with TLS contexts with and without the admin certificate."""

    def __init__(self, port, cert, key, ca):
        self.port = port
        self.with_cert = self._context(ca, (cert, key))
        self.without_cert = self._context(ca, None)

    @staticmethod
    def _context(ca, identity):
        context = ssl.create_default_context(cafile=ca)
        context.check_hostname = False
        if identity:
            context.load_cert_chain(*identity)
        return context

    def connect(self, cert=True, timeout=15):
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        context = self.with_cert if cert else self.without_cert
        return context.wrap_socket(raw)


def exchange(target, case, timeout):
    """Send a case and read the answers due, within C{timeout} seconds in all."""
    result = Result(case)
    start = time.monotonic()
    deadline = start + timeout
    try:
        sock = target.connect(case.cert, timeout)
    except (OSError, ssl.SSLError) as e:
        result.error = f"connect: {e}"
        result.closed = True
        return result
    try:
        for data, pause in case.parts:
            if pause:
                time.sleep(pause)
            if data:
                sock.sendall(data)
        reader = _Reader(sock, deadline)
        while len(result.codes) < case.answers:
            code = reader.response()
            if code is None:
                result.closed, result.hung = reader.closed, reader.timed_out
                break
            if result.seconds is None:
                result.seconds = time.monotonic() - start
            result.codes.append(code)
    except (OSError, ssl.SSLError) as e:
        result.error = str(e) or type(e).__name__
        result.closed = True
    finally:
        try:
            sock.close()
        except OSError:
            pass
    return result


class _Reader:
    """Just enough of an HTTP/1.1 client to find each response's status and end."""

    def __init__(self, sock, deadline):
        self.sock = sock
        self.deadline = deadline
        self.buffer = b""
        self.closed = False
        self.timed_out = False

    def _more(self, idle=None):
        left = self.deadline - time.monotonic()
        if idle is not None:
            left = min(left, idle)
        if left <= 0:
            self.timed_out = idle is None
            return False
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            self.timed_out = idle is None
            return False
        except (ConnectionResetError, ssl.SSLError, OSError):
            data = b""
        if not data:
            self.closed = True
            return False
        self.buffer += data
        return True

    def response(self):
        """The status code of the next response (its body skipped), or None."""
        while b"\r\n\r\n" not in self.buffer:
            if not self._more():
                return None
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        try:
            code = int(lines[0].split(b" ", 2)[1])
        except (IndexError, ValueError):
            return 999  # not HTTP at all
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip().lower()
        if b"content-length" in headers:
            length = int(headers[b"content-length"])
            while len(self.buffer) < length and self._more():
                pass
            self.buffer = self.buffer[length:]
        elif headers.get(b"transfer-encoding") == b"chunked":
            # Watches stream: the answer is the status; stop once idle.
            while b"\r\n0\r\n\r\n" not in b"\r\n" + self.buffer and self._more(idle=1.0):
                pass
            self.buffer = b""
        return code


# -- the hostile corpus --------------------------------------------------------------------

def request(method, target, headers=(), body=None, version=b"HTTP/1.1", end=b"\r\n"):
    lines = [method + b" " + target + b" " + version, b"Host: 127.0.0.1"]
    lines += list(headers)
    if body is not None:
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return end.join(lines) + end + end + (body or b"")


def laughs(levels=9, width=9):
    """The "billion laughs" YAML of CVE-2019-11253 (some 600 bytes)."""
    lines = ['apiVersion: v1', 'kind: ConfigMap', 'metadata: {name: bomb}',
             'data: {a: "1"}', 'x0: &x0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        lines.append(f"x{level}: &x{level} [" + ",".join([f"*x{level - 1}"] * width) + "]")
    return ("\n".join(lines) + "\n").encode()


def _protobuf_bodies(rng):
    # A ConfigMap envelope by hand (magic, Unknown{typeMeta, raw}), then mutated.
    type_meta = b"\x0a\x02v1\x12\x09ConfigMap"
    raw = b"\x0a\x05\x0a\x03pbx"  # ConfigMap{metadata{name: "pbx"}}
    envelope = b"k8s\x00" + b"\x0a" + bytes([len(type_meta)]) + type_meta + b"\x12" \
        + bytes([len(raw)]) + raw
    bodies = [envelope, b"k8s\x00", b"k8s\x00" + b"\xff" * 64, b"k8s\x00\x0a\xff\xff\xff\xff\x0f",
              b"k8s\x00" + b"\x0a\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",
              b"k8s\x00" + b"\x12" + b"\x0a\x00" * 2000]
    for _ in range(30):
        mutated = bytearray(envelope)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(mutated))
            mutated[at] = rng.randrange(256)
        bodies.append(bytes(mutated))
    return bodies


def hostile_bodies(rng):
    """(label, content type, body) triples for writes."""
    bomb = laughs()
    deep_json = b'{"metadata":{"name":"deep"},"data":' + b'{"a":' * 10000 + b"1" \
        + b"}" * 10000 + b"}"
    bodies = [
        ("billion laughs yaml", b"application/yaml", bomb),
        ("billion laughs as json", b"application/json", bomb),
        ("recursive alias", b"application/yaml", b"a: &a [*a]\n"),
        ("deep yaml", b"application/yaml", b"a: " + b"[" * 10000 + b"]" * 10000 + b"\n"),
        ("deep yaml block", b"application/yaml",
         "".join("  " * i + "a:\n" for i in range(3000)).encode()),
        ("deep json", b"application/json", deep_json),
        ("deep json arrays", b"application/json", b"[" * 100000 + b"]" * 100000),
        ("huge int json", b"application/json",
         b'{"metadata":{"name":"n"},"data":{"a":"1"},"x":' + b"9" * 5000 + b"}"),
        ("huge float json", b"application/json", b'{"metadata":{"name":"n"},"x":1e400}'),
        ("huge int yaml", b"application/yaml", b"metadata: {name: n}\nx: " + b"9" * 5000),
        ("hex int yaml", b"application/yaml", b"metadata: {name: n}\nx: 0x" + b"f" * 5000),
        ("empty tagged int", b"application/yaml", b"metadata: {name: n}\nx: !!int ''\n"),
        ("python tag", b"application/yaml", b"!!python/object/apply:os.system ['true']\n"),
        ("binary tag", b"application/yaml", b"metadata: {name: n}\ndata: {a: !!binary aGk=}\n"),
        ("huge string 2.9MB", b"application/json",
         b'{"metadata":{"name":"big"},"data":{"a":"' + b"x" * (2900 * 1024) + b'"}}'),
        ("huge string 3.1MB", b"application/json",
         b'{"metadata":{"name":"big"},"data":{"a":"' + b"x" * (3100 * 1024) + b'"}}'),
        ("many keys", b"application/json",
         json.dumps({"metadata": {"name": "many"},
                     "data": {f"k{i}": "v" for i in range(100000)}}).encode()),
        ("wrong types", b"application/json",
         b'{"metadata":{"name":1,"labels":[1],"annotations":"x"},"data":[1,{}]}'),
        ("wrong top type", b"application/json", b"[1,2,3]"),
        ("null body", b"application/json", b"null"),
        ("nul bytes", b"application/json", b'{"metadata":{"name":"a\\u0000b"}}'),
        ("invalid utf-8", b"application/json", b'{"metadata":{"name":"\xff\xfe"}}'),
        ("invalid utf-8 yaml", b"application/yaml", b"metadata: {name: \xff}\n"),
        ("replicas int32 overflow", b"application/json",
         b'{"metadata":{"name":"d"},"spec":{"replicas":99999999999}}'),
        ("duplicate keys", b"application/json",
         b'{"metadata":{"name":"a","name":"b"},"data":{"a":"1","a":"2"}}'),
        ("empty", b"application/json", b""),
        ("text/plain", b"text/plain", b"hello"),
    ]
    bodies += [(f"protobuf {i}", b"application/vnd.kubernetes.protobuf", data)
               for i, data in enumerate(_protobuf_bodies(rng))]
    return bodies


_PATCHES = [
    (b"application/json-patch+json", b'[{"op":"add","path":"/metadata/labels/a","value":"b"}]'),
    (b"application/json-patch+json", b'[{"op":"move","from":"/metadata","path":"/metadata/x"}]'),
    (b"application/json-patch+json", b'[{"op":"add","path":"/data/99999999999999999999"}]'),
    (b"application/json-patch+json", json.dumps([{"op": "test", "path": "/a", "value": 1}]
                                                * 20000).encode()),
    (b"application/json-patch+json", b'{"op":"add"}'),
    (b"application/merge-patch+json", b'{"metadata":{"labels":{"a":null}},"data":null}'),
    (b"application/merge-patch+json", b'{"metadata":' + b'{"a":' * 5000 + b"1" + b"}" * 5001),
    (b"application/strategic-merge-patch+json",
     b'{"spec":{"template":{"spec":{"containers":[{"$patch":"bogus"}]}}}}'),
    (b"application/strategic-merge-patch+json",
     b'{"metadata":{"$setElementOrder/finalizers":[{"a":1},[2]],"finalizers":["b"]}}'),
    (b"application/strategic-merge-patch+json",
     b'{"spec":{"template":{"spec":{"containers":[[1]]}}}}'),
    (b"application/strategic-merge-patch+json", b'{"$retainKeys":"x","data":{}}'),
    (b"application/apply-patch+yaml",
     b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, finalizers: [a, a]}\n"),
    (b"application/apply-patch+yaml",
     b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n"
     b"    spec:\n      containers: [{image: x}, {name: a}, {name: a}]\n"),
    (b"application/apply-patch+yaml",
     b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, managedFields: [{}]}\n"),
]

_PARAMETERS = ["labelSelector", "fieldSelector", "limit", "continue", "resourceVersion",
               "resourceVersionMatch", "timeoutSeconds", "watch", "allowWatchBookmarks",
               "sendInitialEvents", "dryRun", "fieldManager", "fieldValidation", "force",
               "pretty", "propagationPolicy", "gracePeriodSeconds", "orphanDependents",
               "includeObject", "exclude", "verbose", "follow", "tailLines", "container"]
_VALUES = [b"", b"0", b"-1", b"1", b"true", b"99999999999999999999", b"-99999999999999999999",
           b"1e3", b"%00", b"%ff", b"%ff%fe", b"a%00b", b"%", b"%zz", b"a=b", b"a%20in%20(b)",
           b"!a", b"All", b"Strict", b"NotOlderThan", b"9" * 5000, b"x" * 20000,
           b"metadata.name%3D%ff", b"%C0%AF", b"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTF9",
           base64.urlsafe_b64encode(b'{"v":"meta.k8s.io/v1","rv":99999999999999999999999,'
                                    b'"start":"a"}').rstrip(b"=")]
_QUERY_PATHS = [CM, CM + b"/c".decode(), DEPLOY + "/d", "/api/v1/pods", "/api/v1/nodes",
                f"/api/v1/namespaces/{NS}/pods/p/log", "/openapi/v3", "/readyz", "/api/v1"]


def corpus(count, rng):
    """C{count} hostile cases, of every kind in turn."""
    makers = [_malformed, _paths, _bodies, _queries, _headers, _pipelines]
    bodies = hostile_bodies(rng)
    cases = []
    while len(cases) < count:
        maker = makers[len(cases) % len(makers)]
        cases.append(maker(rng, bodies))
    for case in cases:
        if rng.random() < 0.15:
            case.cert = False  # anonymous: authentication and authorization run first
    return cases


def _malformed(rng, bodies):
    end = rng.choice([b"\r\n", b"\n"])
    choices = [
        b"GET / HTTP/1.1" + end + end,
        b"GET\x00/ HTTP/1.1\r\n\r\n",
        b"GET /api HTTP/9.9\r\n\r\n",
        b"GET /api HTTP/1.1x\r\nHost: x\r\n\r\n",
        b"GET /api\r\n\r\n",
        b"GET /api HTTP/2.0\r\n\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        b"GET  /api  HTTP/1.1\r\n\r\n",
        b"\r\n\r\nGET /api HTTP/1.1\r\n\r\n",
        b"GET /api HTTP/1.1\r\nHost: x\r\n folded: continuation\r\n\r\n",
        b"GET /api HTTP/1.1\r\nX-A: a\r\n\tfolded\r\n\r\n",
        b"GET /api HTTP/1.1\r\nX-A: \x00\r\n\r\n",
        b"GET /api HTTP/1.1\r\nNoColon\r\n\r\n",
        b"GET /api HTTP/1.1\r\n: empty\r\n\r\n",
        b"GET /api HTTP/1.1\r\nX-Big: " + b"a" * 20 * 1024 + b"\r\n\r\n",
        b"GET /api HTTP/1.1\r\nX-Big: " + b"a" * 200 * 1024 + b"\r\n\r\n",
        b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n",
        b"GET /api/v1?" + b"&".join(b"a%d=b" % i for i in range(10000)) + b" HTTP/1.1\r\n\r\n",
        request(b"GET", b"/api", [b"X-H%d: v" % i for i in range(2000)]),
        request(b"GET", b"/api", [b"Accept: application/json"] * 3000),
        b"POST " + CM.encode() + b" HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n"
        b"Content-Type: application/json\r\n\r\n{}{}{}",
        b"POST " + CM.encode() + b" HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        b"POST " + CM.encode() + b" HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
        b"POST " + CM.encode() + b" HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
        b"POST " + CM.encode() + b" HTTP/1.1\r\nContent-Length: 2\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        b"POST " + CM.encode() + b" HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        b"POST " + CM.encode() + b" HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"zz\r\n{}\r\n0\r\n\r\n",
        b"POST " + CM.encode() + b" HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n\r\n",
        b"POST " + CM.encode() + b" HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"ffffffffffffffffffff\r\n{}\r\n0\r\n\r\n",
        b"POST " + CM.encode() + b" HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3;ext=" + b"x" * 5000 + b"\r\n{}}\r\n0\r\n\r\n",
        b"POST " + CM.encode() + b" HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"1\r\n \r\n" * 20000 + b"0\r\n\r\n",
        b"POST " + CM.encode() + b" HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n"
        b"Content-Type: application/json\r\n\r\n{}",
        bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))) + b"\r\n\r\n",
    ]
    data = rng.choice(choices)
    return Case("malformed", data, label=_label(data, 3))


def _paths(rng, bodies):
    names = ["..", "%2e%2e", "%2E%2e", ".", "%2F", "a%2Fb", "%00", "a%00b", "%ff", "%c3%28",
             "%", "%zz", "a" * 300, "a" * 5000, "%252e%252e", "..%2f..", "é".encode().decode(),
             "c", "CON", "a;b", "a?b", "%0d%0aX-Injected:%20y"]
    templates = ["/api/v1/namespaces/{}/configmaps/{}", "/api/v1/namespaces/{}/pods/{}/log",
                 "/apis/apps/v1/namespaces/{}/deployments/{}/scale", "/api/v1/{}/{}",
                 "/apis/{}/v1/namespaces/fuzz/{}", "/api/v1/namespaces/{}/{}", "/api/{}/{}",
                 "/api/v1/nodes/{}/proxy/{}", "/api/v1/watch/namespaces/{}/configmaps/{}",
                 "/openapi/v3/{}/{}", "/{}/{}", "/healthz/{}/{}", "//api//v1//{}//{}",
                 "/api/v1/namespaces/fuzz/configmaps/{}/../{}"]
    path = rng.choice(templates).format(rng.choice(names), rng.choice(names))
    target = quote(path, safe="/%:@!$&'()*+,;=").encode()
    method = rng.choice([b"GET", b"GET", b"HEAD", b"DELETE", b"PUT", b"POST", b"PATCH",
                         b"OPTIONS", b"TRACE", b"PROPFIND"])
    if method == b"HEAD":
        # A HEAD answer has no body; read only its head.
        return Case("path", request(b"GET", target))
    return Case("path", request(method, target, [b"Content-Type: application/json"], b"{}"))


def _bodies(rng, bodies):
    label, content_type, body = rng.choice(bodies)
    choice = rng.randrange(5)
    if choice == 0:
        method, path = b"POST", CM
    elif choice == 1:
        method, path = b"POST", DEPLOY
    elif choice == 2:
        method, path = b"PUT", CM + "/c"
    elif choice == 3:
        method, path = b"PUT", DEPLOY + "/d"
    else:
        # Every patch type, and apply, with the hostile body or a hostile patch.
        method = b"PATCH"
        path = rng.choice([CM + "/c", DEPLOY + "/d"])
        if rng.random() < 0.5:
            content_type, body = rng.choice(_PATCHES)
            label = "patch " + body[:40].decode("latin-1")
        else:
            content_type = rng.choice([b"application/json-patch+json",
                                       b"application/merge-patch+json",
                                       b"application/strategic-merge-patch+json",
                                       b"application/apply-patch+yaml"])
        path += "?fieldManager=fuzz"
    headers = [b"Content-Type: " + content_type, b"Accept: application/json"]
    data = request(method, path.encode(), headers, body)
    return Case("body", data, label=f"{method.decode()} {path} [{content_type.decode()}] {label}")


def _queries(rng, bodies):
    path = rng.choice(_QUERY_PATHS)
    pairs = [rng.choice(_PARAMETERS).encode() + b"=" + rng.choice(_VALUES)
             for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.3:
        pairs.append(b"watch=true")
    method = rng.choice([b"GET", b"GET", b"GET", b"DELETE", b"POST", b"PATCH"])
    headers = [b"Content-Type: " + (b"application/merge-patch+json" if method == b"PATCH"
                                    else b"application/json")]
    body = b'{"metadata":{"name":"q"}}' if method != b"GET" else None
    if method == b"GET" and path == CM:
        pairs.append(b"timeoutSeconds=1")  # watches among them end by themselves
    return Case("query", request(method, path.encode() + b"?" + b"&".join(pairs), headers, body))


def _headers(rng, bodies):
    accept = rng.choice([b"application/json;as=Table;v=v1;g=meta.k8s.io", b"*/*;q=abc",
                         b"application/vnd.kubernetes.protobuf", b"text/html", b"a/b;q=1e400",
                         b'application/json;x="' + b"\\" * 2000, b"application/json;" * 3000,
                         b"application/yaml", b"\xff\xfe", b"application/json;stream=watch"])
    extra = rng.choice([
        [b"Accept: " + accept],
        [b"Content-Type: " + rng.choice([b"\xff", b"application/json; charset=\x00",
                                         b"application/yaml;" * 1000])],
        [b"Impersonate-Group: system:masters"],
        [b"Impersonate-Uid: 1"],
        [b"Impersonate-Extra-scopes: x"],
        [b"Impersonate-User: alice", b"Impersonate-Extra-%ZZ: x"],
        [b"Impersonate-User: \xff"],
        [b"Authorization: Bearer " + b"x" * 8000],
        [b"Authorization: Bearer a.b.c"],
        [b"Authorization: Basic %%%"],
        [b"User-Agent: " + b"\x00\xff" * 500],
    ])
    method = rng.choice([b"GET", b"POST"])
    path = rng.choice([CM, CM + "/c", DEPLOY + "/d", "/api/v1/namespaces"]).encode()
    body = b'{"metadata":{"name":"h"}}' if method == b"POST" else None
    if b"Content-Type" not in b"".join(extra):
        extra.append(b"Content-Type: application/json")
    label = _label(method + b" " + path + b" | " + b" | ".join(h[:120] for h in extra))
    return Case("header", request(method, path, extra, body), label=label)


def _pipelines(rng, bodies):
    count = rng.randint(2, 20)
    one = request(b"GET", QUIET.encode())
    data = one * count
    if rng.random() < 0.3:
        data += b"GARBAGE\r\n\r\n"
    return Case("pipeline", data, answers=count)


def slow_cases(count):
    """Slowloris connections: trickled heads and bodies, and idle TLS handshakes."""
    cases = []
    head = request(b"GET", CM.encode() + b"/c")
    body = b'{"metadata":{"name":"slow"},"data":{"a":"' + b"x" * 40 + b'"}}'
    post = request(b"POST", CM.encode(), [b"Content-Type: application/json"], body)
    for i in range(count):
        if i % 3 == 0:
            parts = [(head[j:j + 1], 0.5 if j else 0) for j in range(len(head))]
            cases.append(Case("slow head", None, parts=parts, label="head one byte per 0.5 s"))
        elif i % 3 == 1:
            split = post.index(b"\r\n\r\n") + 4
            parts = [(post[:split], 0)] + [(post[j:j + 1], 0.5) for j in range(split, len(post))]
            cases.append(Case("slow body", None, parts=parts, label="body one byte per 0.5 s"))
        else:
            cases.append(Case("idle", None, parts=[(b"", 0)], answers=0,
                              label="TLS handshake, then nothing"))
    return cases


def idle_handshake(target, timeout):
    """A TCP connection that never sends its ClientHello: seconds until orchd closes it."""
    sock = socket.create_connection(("127.0.0.1", target.port), timeout=timeout)
    start = time.monotonic()
    try:
        data = sock.recv(1)
        return time.monotonic() - start if not data else None
    except TimeoutError:
        return None
    except OSError:
        return time.monotonic() - start
    finally:
        sock.close()


# -- running ---------------------------------------------------------------------------

class Sampler(threading.Thread):
    """orchd's RSS every 0.2 s, and a canary GET's latency every 0.5 s."""

    def __init__(self, pid, target):
        super().__init__(daemon=True)
        self.pid = pid
        self.target = target
        self.stopping = threading.Event()
        self.rss = []
        self.canary = []
        self.canary_failures = 0

    def run(self):
        last = 0
        while not self.stopping.wait(0.2):
            value = rss_mb(self.pid)
            if value is not None:
                self.rss.append(value)
            if time.monotonic() - last >= 0.5:
                last = time.monotonic()
                result = exchange(self.target, Case("canary", request(b"GET", QUIET.encode())),
                                  15)
                if result.codes == [200]:
                    self.canary.append(result.seconds)
                else:
                    self.canary_failures += 1


def setup(orchd):
    orchd.request("POST", "/api/v1/namespaces", {"metadata": {"name": "fuzz-quiet"}})
    orchd.request("POST", QUIET.rsplit("/", 1)[0], {"metadata": {"name": "quiet"},
                                                    "data": {"a": "1"}})
    orchd.request("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    orchd.request("POST", CM, {"metadata": {"name": "c"}, "data": {"a": "1"}})
    orchd.request("POST", DEPLOY, {
        "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "a"}},
                 "template": {"metadata": {"labels": {"app": "a"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}}})


def hostile(orchd, target, args):
    rng = random.Random(args.seed)
    cases = corpus(args.requests, rng)
    slow = slow_cases(args.slow)
    sampler = Sampler(orchd.process.pid, target)
    sampler.start()
    started = time.monotonic()
    with ThreadPoolExecutor(args.threads + len(slow)) as pool:
        slow_futures = [pool.submit(exchange, target, case, args.timeout) for case in slow]
        idle_futures = [pool.submit(idle_handshake, target, args.timeout + 5)
                        for _ in range(max(1, args.slow // 4))]
        with ThreadPoolExecutor(args.threads) as workers:
            results = list(workers.map(lambda case: exchange(target, case, args.timeout), cases))
        slow_results = [f.result() for f in slow_futures]
        idle_results = [f.result() for f in idle_futures]
    elapsed = time.monotonic() - started
    sampler.stopping.set()
    sampler.join()
    return report_hostile(results, slow_results, idle_results, sampler, elapsed, args)


def report_hostile(results, slow_results, idle_results, sampler, elapsed, args):
    codes = {}
    by_kind = {}
    for result in results:
        for code in result.codes or ["none"]:
            codes[code] = codes.get(code, 0) + 1
        kind = by_kind.setdefault(result.case.kind, {})
        for code in result.codes or ["none"]:
            kind[code] = kind.get(code, 0) + 1
    errors = [r for r in results if any(c >= 500 for c in r.codes)]
    hung = [r for r in results if r.hung]
    dropped = [r for r in results if r.dropped]
    times = sorted(r.seconds for r in results if r.seconds is not None)
    print(f"\n== hostile: {len(results)} requests in {elapsed:.1f} s from {args.threads} threads"
          f" ({sum(not r.case.cert for r in results)} without a client certificate)")
    print("answers by code:", ", ".join(f"{c}: {n}" for c, n in sorted(codes.items(), key=str)))
    for kind, counts in sorted(by_kind.items()):
        print(f"  {kind:9s}", ", ".join(f"{c}: {n}" for c, n in sorted(counts.items(), key=str)))
    if times:
        print(f"time to answer: p50 {_ms(_pct(times, 50))}, p99 {_ms(_pct(times, 99))}, "
              f"max {_ms(times[-1])}")
    print(f"5xx: {len(errors)}")
    for r in _distinct(errors):
        print(f"  {r.codes} {r.case.kind}: {r.case.label}")
    print(f"no answer within {args.timeout:g} s: {len(hung)}")
    for r in _distinct(hung):
        print(f"  {r.case.kind}: {r.case.label}")
    print(f"closed without the answer due: {len(dropped)}")
    for r in _distinct(dropped):
        print(f"  {r.case.kind} ({len(r.codes)}/{r.case.answers} answers"
              f"{', ' + r.error if r.error else ''}): {r.case.label}")
    slow_summary = {}
    for r in slow_results:
        outcome = ("answered " + "/".join(map(str, r.codes)) if r.codes
                   else "held open" if r.hung else "closed")
        key = (r.case.label, outcome)
        slow_summary[key] = slow_summary.get(key, 0) + 1
    print(f"slow clients ({len(slow_results)}):")
    for (label, outcome), n in sorted(slow_summary.items()):
        print(f"  {label}: {outcome} x{n}")
    closed = [t for t in idle_results if t is not None]
    print(f"idle TCP connections without a TLS handshake: {len(idle_results)}, closed by orchd "
          f"within {args.timeout + 5:g} s: {len(closed)}"
          + (f" (after {min(closed):.1f}-{max(closed):.1f} s)" if closed else ""))
    canary = sorted(sampler.canary)
    if canary:
        print(f"canary GET during the run: {len(canary)} answered, p50 "
              f"{_ms(_pct(canary, 50))}, p99 {_ms(_pct(canary, 99))}, max {_ms(canary[-1])}, "
              f"failed {sampler.canary_failures}")
    peak = max(sampler.rss, default=None)
    print(f"orchd RSS: start {_mb(sampler.rss[0] if sampler.rss else None)}, "
          f"max {_mb(peak)}, end {_mb(sampler.rss[-1] if sampler.rss else None)}")
    return {
        "requests": len(results), "codes": {str(c): n for c, n in codes.items()},
        "by_kind": {k: {str(c): n for c, n in v.items()} for k, v in by_kind.items()},
        "errors_5xx": [[r.codes, r.case.label] for r in errors],
        "hung": [r.case.label for r in hung], "dropped": [r.case.label for r in dropped],
        "slow": {f"{label}: {outcome}": n for (label, outcome), n in slow_summary.items()},
        "idle_closed": len(closed), "idle": len(idle_results),
        "canary_p99_ms": _pct(canary, 99) * 1000 if canary else None,
        "rss_max_mb": peak, "seconds": elapsed,
        "failed": bool(errors or hung) or (peak or 0) > 1024,
    }


def _distinct(results, limit=40):
    seen, out = set(), []
    for r in results:
        if r.case.label not in seen:
            seen.add(r.case.label)
            out.append(r)
    return out[:limit]


def _pct(values, q):
    if not values:
        return None
    return values[min(len(values) - 1, int(len(values) * q / 100))]


def _ms(seconds):
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def _mb(value):
    return "-" if value is None else f"{value:.0f} MB"


# -- bombs and GET latency -----------------------------------------------------------------

def get_latencies(target, seconds, stop=None):
    """GETs of one small object on one keep-alive connection for C{seconds}."""
    sock = target.connect()
    reader = _Reader(sock, time.monotonic() + seconds + 30)
    one = request(b"GET", QUIET.encode())
    latencies, failures = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.monotonic()
        sock.sendall(one)
        code = reader.response()
        if code == 200:
            latencies.append(time.monotonic() - start)
        else:
            failures += 1
            sock.close()
            sock = target.connect()
            reader = _Reader(sock, time.monotonic() + seconds + 30)
        time.sleep(0.01)
    sock.close()
    return sorted(latencies), failures


def bomber(target, stopping, interval, outcomes):
    """A decoding bomb every C{interval} seconds, YAML and the same body as JSON in turn."""
    bomb = laughs()
    turn = 0
    while not stopping.is_set():
        started = time.monotonic()
        media = b"application/yaml" if turn % 2 == 0 else b"application/json"
        case = Case("bomb", request(b"POST", CM.encode(), [b"Content-Type: " + media], bomb))
        result = exchange(target, case, 15)
        code = result.codes[0] if result.codes else "none"
        outcomes[code] = outcomes.get(code, 0) + 1
        turn += 1
        stopping.wait(max(0, interval - (time.monotonic() - started)))


def bombs(orchd, target, args):
    print(f"\n== bombs: GET latency alone for {args.bomb_secs} s, then with a decoding bomb "
          f"every 100 ms for {args.bomb_secs} s")
    quiet, quiet_failed = get_latencies(target, args.bomb_secs)
    stopping, outcomes = threading.Event(), {}
    thread = threading.Thread(target=bomber, args=(target, stopping, 0.1, outcomes), daemon=True)
    rss_before = rss_mb(orchd.process.pid)
    thread.start()
    loud, loud_failed = get_latencies(target, args.bomb_secs)
    stopping.set()
    thread.join()
    rss_after = rss_mb(orchd.process.pid)
    if not quiet or not loud:
        print(f"GET answered no 200 ({quiet_failed} + {loud_failed} failures)")
        return {"failed": True, "get_failures": quiet_failed + loud_failed}
    row = {
        "alone_p50_ms": _pct(quiet, 50) * 1000, "alone_p99_ms": _pct(quiet, 99) * 1000,
        "bombs_p50_ms": _pct(loud, 50) * 1000, "bombs_p99_ms": _pct(loud, 99) * 1000,
        "gets_alone": len(quiet), "gets_with_bombs": len(loud),
        "get_failures": quiet_failed + loud_failed,
        "bomb_answers": {str(k): v for k, v in outcomes.items()},
        "rss_before_mb": rss_before, "rss_after_mb": rss_after,
    }
    print(f"GET alone:      p50 {row['alone_p50_ms']:.1f} ms, p99 {row['alone_p99_ms']:.1f} ms "
          f"({len(quiet)} GETs)")
    print(f"GET with bombs: p50 {row['bombs_p50_ms']:.1f} ms, p99 {row['bombs_p99_ms']:.1f} ms "
          f"({len(loud)} GETs; target p99 < 100 ms)")
    print(f"bombs answered: {row['bomb_answers']}; GET failures: {row['get_failures']}; "
          f"RSS {_mb(rss_before)} -> {_mb(rss_after)}")
    row["failed"] = row["bombs_p99_ms"] >= 100 or bool(row["get_failures"]) \
        or any(k == "none" or int(k) >= 500 for k in row["bomb_answers"])
    return row


# -- schemathesis ----------------------------------------------------------------------------

def schemathesis(orchd, target, args, workdir):
    """schemathesis over every served OpenAPI v3 document, within the time given."""
    st = shutil.which("st") or shutil.which("schemathesis") \
        or os.path.join(os.path.dirname(sys.executable), "st")
    if not os.path.exists(st):
        print("\n== schemathesis: not installed (pip install schemathesis); skipped")
        return {"skipped": True, "failed": False}
    status, data = orchd.request("GET", "/openapi/v3")
    index = json.loads(data)["paths"]
    documents = []
    for name, entry in sorted(index.items()):
        if name.count("/") < 1 or (name.startswith("apis/") and name.count("/") < 2):
            continue  # a group's own document: discovery only
        status, data = orchd.request("GET", entry["serverRelativeURL"])
        if status != 200:
            print(f"  {name}: GET answered {status}")
            continue
        path = os.path.join(workdir, "openapi-" + name.replace("/", "_") + ".json")
        with open(path, "w") as f:
            json.dump(without_streams(json.loads(data)), f)
        documents.append((name, path))
    budget = max(10, args.schemathesis_secs // max(1, len(documents)))
    print(f"\n== schemathesis: {len(documents)} documents, {budget} s each")
    totals = {"documents": len(documents), "server_errors": [], "problems": []}
    for name, path in documents:
        report = os.path.join(workdir, "st-" + name.replace("/", "_") + ".ndjson")
        argv = [st, "run", path, "--url", orchd.url, "--request-cert", orchd.cert,
                "--request-cert-key", orchd.key, "--tls-verify", orchd.ca,
                "--checks", "not_a_server_error", "--max-time", str(budget),
                "--workers", "2", "--request-timeout", "15", "--max-examples", "25",
                "--report", "ndjson", "--report-ndjson-path", report,
                "--generation-deterministic", "--seed", str(args.seed)]
        started = time.monotonic()
        try:
            process = subprocess.run(argv, capture_output=True, text=True,
                                     timeout=budget * 3 + 60, cwd=workdir)
        except subprocess.TimeoutExpired:
            print(f"  {name}: schemathesis still running after {budget * 3 + 60} s; stopped")
            totals["problems"].append([name, "timeout", ""])
            continue
        errors, calls = _server_errors(report)
        totals["server_errors"] += [[name] + e for e in errors]
        tail = (process.stdout.strip().splitlines() or [""])[-1]
        print(f"  {name}: {calls} calls in {time.monotonic() - started:.0f} s, "
              f"{len(errors)} 5xx; exit {process.returncode}; {tail[:120]}")
        if process.returncode not in (0, 1):
            totals["problems"].append([name, process.returncode,
                                       (process.stderr or process.stdout)[-2000:]])
            text = (process.stderr or process.stdout).strip()[-600:]
            print("    " + text.replace("\n", "\n    "))
    print(f"schemathesis 5xx: {len(totals['server_errors'])}")
    for name, method, url, code, body in totals["server_errors"][:40]:
        print(f"  {name}: {method} {url} -> {code} {body[:200]}")
    totals["failed"] = bool(totals["server_errors"])
    return totals


#: Parameters that turn an answer into an endless stream.
_STREAMING = frozenset(("watch", "follow"))


def without_streams(document):
    """
    The document less what streams: the deprecated C{/watch/} paths and the
    C{watch} and C{follow} parameters. schemathesis reads each answer whole
    (its request timeout bounds the wait for each read, which a watch's
    periodic bookmarks keep renewing), so one watch request stalls its
    worker until the watch ends, up to 30 minutes later.
    """
    paths = {}
    for path, item in (document.get("paths") or {}).items():
        if "/watch/" in path:
            continue
        for value in [item] + [v for v in item.values() if isinstance(v, dict)]:
            if isinstance(value.get("parameters"), list):
                value["parameters"] = [p for p in value["parameters"]
                                       if p.get("name") not in _STREAMING]
        paths[path] = item
    document["paths"] = paths
    return document


def _server_errors(report):
    """(method, url, code, body) of every 5xx in a schemathesis ndjson report, and the calls."""
    errors, calls = [], 0
    try:
        with open(report) as f:
            lines = f.readlines()
    except OSError:
        return errors, calls
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        for interactions in _find(event, "interactions"):
            items = interactions.values() if isinstance(interactions, dict) else interactions
            for item in items:
                if not isinstance(item, dict):
                    continue
                response = item.get("response") or {}
                req = item.get("request") or {}
                code = response.get("status_code")
                if code is None:
                    continue
                calls += 1
                if code >= 500:
                    body = response.get("content") or response.get("body") or ""
                    if isinstance(body, dict):
                        body = json.dumps(body)
                    errors.append([req.get("method"), req.get("uri") or req.get("url"), code,
                                   str(body)])
    return errors, calls


def _find(value, key):
    if isinstance(value, dict):
        for k, v in value.items():
            if k == key:
                yield v
            else:
                yield from _find(v, key)
    elif isinstance(value, list):
        for item in value:
            yield from _find(item, key)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="hostile,bombs,schemathesis")
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--threads", type=int, default=6)
    parser.add_argument("--timeout", type=float, default=15)
    parser.add_argument("--slow", type=int, default=40, help="slowloris connections")
    parser.add_argument("--bomb-secs", type=int, default=30)
    parser.add_argument("--schemathesis-secs", type=int, default=180)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (orchd.log)")
    args = parser.parse_args()
    modes = args.modes.split(",")
    workdir = tempfile.mkdtemp(prefix="orchd-fuzz-")
    orchd = Orchd(workdir)
    figures = {}
    try:
        setup(orchd)
        target = Target(orchd.port, orchd.cert, orchd.key, orchd.ca)
        if "hostile" in modes:
            figures["hostile"] = hostile(orchd, target, args)
        if "bombs" in modes:
            figures["bombs"] = bombs(orchd, target, args)
        if "schemathesis" in modes:
            figures["schemathesis"] = schemathesis(orchd, target, args, workdir)
        alive = orchd.process.poll() is None
        figures["orchd_alive"] = alive
        print(f"\norchd {'still running' if alive else 'EXITED'}; log: "
              f"{os.path.join(workdir, 'orchd.log') if args.keep else '(removed; --keep)'}")
    finally:
        orchd.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2, default=str)
    failed = [mode for mode, row in figures.items() if isinstance(row, dict) and row["failed"]]
    if failed or not figures.get("orchd_alive"):
        print("FAILED:", ", ".join(failed) or "orchd exited")
        sys.exit(1)


if __name__ == "__main__":
    main()
