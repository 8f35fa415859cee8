"""
Request limits over real TLS: raw sockets (Python's C{ssl}, in threads)
against a running control plane, with its deadlines shortened.
"""

import select
import socket
import ssl
import time

import orjson
import treq
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from orchd.server.requestlimits import RequestLimits
from tests.integration.support import RunningControlPlane, sleep

#: Shortened deadlines, seconds.
SHORT = 0.5


def _tls():
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _read_to_end(conn):
    """Everything until the server closes (cleanly or not)."""
    chunks = []
    while True:
        try:
            data = conn.recv(65536)
        except (OSError, ssl.SSLError):
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)


def talk(port, data, trickle=None):
    """
    Send C{data} over TLS (a byte every C{trickle} seconds, until the server
    answers), then read until it closes: C{(what came back, seconds)}.
    """
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=20) as raw:
        conn = _tls().wrap_socket(raw)
        try:
            if trickle is None:
                conn.sendall(data)
            else:
                for byte in data:
                    conn.sendall(bytes([byte]))
                    if select.select([conn], [], [], trickle)[0]:
                        break
        except OSError:
            pass        # the server has closed: read what it said first
        answer = _read_to_end(conn)
    return answer, time.monotonic() - start


def no_handshake(port):
    """Connect, send nothing: seconds until the server hangs up."""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=20) as raw:
        try:
            raw.recv(1)
        except OSError:
            pass
    return time.monotonic() - start


def linger(port):
    """
    Read a C{Connection: close} response, then neither answer the server's
    TLS close alert nor hang up: seconds until the server drops the socket.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=20) as raw:
        conn = _tls().wrap_socket(raw)
        conn.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = _read_to_end(conn)     # up to the server's close alert
        start = time.monotonic()
        # The TCP socket under the TLS one, to see the server go.
        with socket.fromfd(conn.fileno(), socket.AF_INET, socket.SOCK_STREAM) as tcp:
            try:
                tcp.recv(1)
            except OSError:
                pass
        return answer, time.monotonic() - start


def status_of(answer):
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), orjson.loads(body)


class RequestLimitTests(TestCase):
    timeout = 60

    async def start(self, **limits):
        self.server = await RunningControlPlane(self).start()
        self.port = self.server.plane.port.getHost().port
        if limits:
            self.server.plane.site.limits = RequestLimits(**limits)

    async def test_oversized_heads(self):
        """A 100 KiB URL is 414, a 20 KiB header or a 200 KiB header block 431, at once."""
        await self.start()
        cases = [
            (b"GET /api/" + b"a" * 100 * 1024 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
            (b"GET /api HTTP/1.1\r\nX-Big: " + b"a" * 20 * 1024 + b"\r\n\r\n", 431),
            (b"GET /api HTTP/1.1\r\n"
             + b"".join(b"X-%d: %s\r\n" % (i, b"a" * 100) for i in range(2000)) + b"\r\n", 431),
            (b"GET /api?" + b"a=1&" * 3000 + b" HTTP/1.1\r\n\r\n", 400),
            (b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\n"
             b"Content-Length: 4000000\r\nExpect: 100-continue\r\n\r\n", 413),
        ]
        for data, code in cases:
            answer, seconds = await deferToThread(talk, self.port, data)
            self.assertEqual(status_of(answer)[0], code)
            self.assertEqual(status_of(answer)[1]["code"], code)
            self.assertLess(seconds, 5)
        # The server still answers everyone else.
        code, _ = await self.server.call("GET", "/api/v1/namespaces/default")
        self.assertEqual(code, 200)

    async def test_slow_clients_cut_off(self):
        """
        A stalled handshake, trickled headers, an idle keep-alive and a client
        that never hangs up after its last response are each cut off.
        """
        await self.start(tls_handshake_timeout=SHORT, header_timeout=SHORT,
                         idle_timeout=SHORT, close_timeout=SHORT)
        seconds = await deferToThread(no_handshake, self.port)
        self.assertTrue(SHORT * 0.8 < seconds < 5, seconds)

        answer, seconds = await deferToThread(
            talk, self.port, b"GET /api HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100, 0.05)
        self.assertEqual(status_of(answer)[0], 408)
        self.assertLess(seconds, 5)

        answer, seconds = await deferToThread(
            talk, self.port, b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(answer.startswith(b"HTTP/1.1 "), answer[:100])
        self.assertTrue(SHORT * 0.8 < seconds < 5, seconds)

        answer, seconds = await deferToThread(linger, self.port)
        self.assertTrue(answer.startswith(b"HTTP/1.1 "), answer[:100])
        self.assertTrue(seconds < 5, seconds)

    async def test_watch_outlives_deadlines(self):
        """A watch that hears nothing for three times every deadline still gets its events."""
        await self.start(header_timeout=SHORT, idle_timeout=SHORT, body_timeout=SHORT,
                         close_timeout=SHORT)
        server = self.server
        response = await server.client.get(
            server.url + "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=4")
        self.assertEqual(response.code, 200)
        chunks = []
        done = treq.collect(response, chunks.append)
        await sleep(SHORT * 3)
        self.assertFalse(done.called)
        code, _ = await server.call("POST", "/api/v1/namespaces/default/configmaps",
                                    {"metadata": {"name": "late"}})
        self.assertEqual(code, 201)
        for _ in range(100):
            if b'"late"' in b"".join(chunks):
                break
            await sleep(0.05)
        self.assertIn(b'"ADDED"', b"".join(chunks))
        self.assertFalse(done.called)
        await done      # at timeoutSeconds
