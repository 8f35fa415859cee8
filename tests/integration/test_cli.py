"""C{twistd orchd} as users run it: start-up errors, the listener line, kill -9."""

import os
import re
import signal
import sys

from twisted.internet import protocol, reactor
from twisted.internet.defer import Deferred, gatherResults
from twisted.trial.unittest import TestCase
from twisted.web.client import HTTPConnectionPool

from orchd.client.connect import client_from_orchconfig
from tests.integration.support import sleep

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TWISTD = "from twisted.scripts.twistd import run; run()"
LISTENING = re.compile(rb"API server listening on (https://\S+)")


class Twistd(protocol.ProcessProtocol):
    """A C{twistd orchd} child process; collects its output, reports its URL."""

    def __init__(self):
        self.output = b""
        self.errors = b""
        self.listening = Deferred()
        self.ended = Deferred()

    def outReceived(self, data):
        self.output += data
        match = LISTENING.search(self.output)
        if match and not self.listening.called:
            self.listening.callback(match.group(1).decode())

    def errReceived(self, data):
        self.errors += data

    def processEnded(self, reason):
        self.ended.callback(reason.value.exitCode)
        if not self.listening.called:
            self.listening.errback(RuntimeError(self.output + self.errors))


def spawn(*args):
    # The components' health ports are fixed numbers: off, so children can run side by side.
    for flag in ("--scheduler-port", "--controller-manager-port"):
        if not any(arg.startswith(flag) for arg in args):
            args += (f"{flag}=0",)
    child = Twistd()
    env = dict(os.environ, PYTHONPATH=ROOT)
    reactor.spawnProcess(child, sys.executable,
                         [sys.executable, "-c", TWISTD, "--pidfile=", "-n", "orchd", *args],
                         env=env, path=ROOT)
    return child


class StartupErrorTests(TestCase):
    timeout = 60

    async def assert_one_line_error(self, *args):
        child = spawn(*args)
        child.listening.addErrback(lambda _: None)
        code = await child.ended
        self.assertNotEqual(code, 0)
        lines = child.errors.decode().strip().splitlines()
        self.assertEqual(len(lines), 1, child.errors)
        self.assertTrue(lines[0].startswith("twistd orchd: error: "), lines[0])
        return lines[0]

    async def test_unknown_flag(self):
        """An unknown flag stops start-up with one line and a non-zero exit."""
        line = await self.assert_one_line_error("--no-such-flag")
        self.assertIn("no-such-flag", line)

    async def test_invalid_values(self):
        """Invalid values of several kinds stop start-up with one line each."""
        await gatherResults([Deferred.fromCoroutine(self.assert_one_line_error(flag)) for flag in (
            "--secure-port=abc", "--anonymous-auth=maybe", "--livez-grace-period=10",
            "--runtime-config=nope.orch.io/v1", "--feature-gates=NoSuchGate=true",
            "--authorization-mode=Sometimes")])

    async def test_busy_port(self):
        """A port already in use stops start-up with one line naming it."""
        busy = reactor.listenTCP(0, protocol.Factory(), interface="127.0.0.1")
        self.addCleanup(busy.stopListening)
        line = await self.assert_one_line_error(
            "--data-dir", os.path.abspath(self.mktemp()), "--secure-port", str(busy.getHost().port))
        self.assertIn("cannot listen", line)

    async def test_busy_component_port(self):
        """A busy scheduler or controller manager port stops start-up with one line naming it."""
        busy = reactor.listenTCP(0, protocol.Factory(), interface="127.0.0.1")
        self.addCleanup(busy.stopListening)
        port = busy.getHost().port
        for flag in ("--scheduler-port", "--controller-manager-port"):
            line = await self.assert_one_line_error(
                "--data-dir", os.path.abspath(self.mktemp()), "--secure-port", "0",
                "--orchlet-port", "0", f"{flag}={port}")
            self.assertIn(f"cannot listen on 127.0.0.1:{port}", line)


class RunningTests(TestCase):
    timeout = 120

    async def start(self, data_dir):
        child = spawn("--data-dir", data_dir, "--secure-port", "0", "--orchlet-port", "0")
        self.addCleanup(self.kill, child)
        url = await child.listening
        return child, url

    def kill(self, child):
        if not child.ended.called:
            os.kill(child.transport.pid, signal.SIGKILL)
        return child.ended

    async def test_acknowledged_writes_survive_kill_9(self):
        """Every create answered 201 is there after kill -9 and a restart."""
        data_dir = os.path.abspath(self.mktemp())
        child, url = await self.start(data_dir)
        self.assertIn(b"API server listening on https://127.0.0.1:", child.output)
        pool = HTTPConnectionPool(reactor)
        self.addCleanup(pool.closeCachedConnections)
        client, _ = client_from_orchconfig(os.path.join(data_dir, "admin.orchconfig"),
                                           reactor, pool)
        path = url + "/api/v1/namespaces/default/configmaps"
        for _ in range(50):
            response = await client.get(url + "/readyz")
            await response.content()
            if response.code == 200:
                break
            await sleep(0.1)
        acked = []

        async def create(name):
            response = await client.post(path, json={"metadata": {"name": name}})
            await response.content()
            if response.code == 201:
                acked.append(name)

        await gatherResults([Deferred.fromCoroutine(create(f"cm-{i}")) for i in range(60)])
        self.assertEqual(len(acked), 60)
        await pool.closeCachedConnections()
        os.kill(child.transport.pid, signal.SIGKILL)
        await child.ended
        child, url = await self.start(data_dir)
        client, _ = client_from_orchconfig(os.path.join(data_dir, "admin.orchconfig"),
                                           reactor, pool)
        response = await client.get(url + "/api/v1/namespaces/default/configmaps")
        listed = await response.json()
        names = {item["metadata"]["name"] for item in listed["items"]}
        self.assertEqual(set(acked) - names, set())
