"""The node agent's endpoint under the shared request limits, over real TLS."""

import os

import treq
from treq.client import HTTPClient
from twisted.internet import reactor
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase
from twisted.web.client import Agent, HTTPConnectionPool

from orchd.app.config import Config
from orchd.app.orchletsettings import orchlet_settings
from orchd.tls.client import ClientTLSPolicy
from orchd.orchlet import logs
from orchd.orchlet.server import OrchletEndpoint
from orchd.orchlet.simulated import SimulatedRuntime
from orchd.server.requestlimits import RequestLimits
from tests.integration.test_request_limits import talk
from tests.orchlet.test_endpoint import pki
from tests.orchlet.test_simulated import pod

SHORT = 0.3


class OrchletLimitTests(TestCase):
    timeout = 30

    def setUp(self):
        root = os.path.abspath(self.mktemp())
        config = orchlet_settings(Config(data_dir=self.mktemp(), orchlet_port=0, root_dir=root))
        self.runtime = SimulatedRuntime(reactor, root=root)
        self.runtime.sync_pod(pod())
        keys = pki()
        self.endpoint = OrchletEndpoint(reactor, config, self.runtime, "n1", *keys["serving"],
                                        [keys["ca"]])
        self.endpoint.site.limits = RequestLimits(header_timeout=SHORT, idle_timeout=SHORT,
                                                  body_timeout=SHORT, close_timeout=SHORT)
        self.endpoint.startService()
        self.addCleanup(self.endpoint.stopService)

    async def test_oversized_header_is_431_in_text(self):
        """A 20 KiB header gets the node agent's plain-text 431, as the API server's limits say."""
        answer, _ = await deferToThread(
            talk, self.endpoint.port, b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 20 * 1024
            + b"\r\n\r\n")
        head, _, body = answer.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 431 "), head)
        self.assertIn(b"content-type: text/plain; charset=utf-8", head.lower())
        self.assertEqual(body, b"a request header field is longer than 16384 bytes\n")

    async def test_followed_log_outlives_deadlines(self):
        """C{containerLogs?follow=true} stays open well past every deadline and keeps streaming."""
        self.patch(logs, "FOLLOW_INTERVAL", 0.02)
        keys = pki()
        pool = HTTPConnectionPool(reactor, persistent=False)
        client = HTTPClient(Agent(reactor, contextFactory=ClientTLSPolicy(keys["ca"], None, None),
                                  pool=pool))
        response = await client.get(f"https://127.0.0.1:{self.endpoint.port}"
                                    "/containerLogs/default/web/app?follow=true")
        self.assertEqual(response.code, 200)
        chunks = []
        done = treq.collect(response, chunks.append)
        await deferLater(reactor, SHORT * 4, lambda: None)
        self.assertFalse(done.called)
        self.runtime.print_line("default", "web", "app", "after a quiet while")
        for _ in range(100):
            if b"after a quiet while" in b"".join(chunks):
                break
            await deferLater(reactor, 0.02, lambda: None)
        self.assertIn(b"after a quiet while", b"".join(chunks))
        self.assertFalse(done.called)
        self.runtime.kill_pod("default", "web")
        await done
