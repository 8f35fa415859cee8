"""
The orchlet's endpoint over real TLS: what only a handshake can show.

A client certificate is read off the TLS connection, so the x509 user is
tested here, on a real listener on port 0; everything else about the
endpoint is driven in memory in L{tests.orchlet.test_endpoint}.
"""

import os

import orjson
from treq.client import HTTPClient
from twisted.internet import reactor
from twisted.trial.unittest import TestCase
from twisted.web.client import Agent, HTTPConnectionPool

from orchd.api.features import FeatureGates
from orchd.app.config import Config
from orchd.app.orchletsettings import orchlet_settings
from orchd.tls.client import ClientTLSPolicy
from orchd.orchlet.server import OrchletEndpoint
from orchd.orchlet.simulated import SimulatedRuntime
from tests.orchlet.test_auth import FakeAPI
from tests.orchlet.test_endpoint import pki
from tests.orchlet.test_simulated import pod


class TLSEndpoint:
    """Start an orchlet endpoint on a real TLS port; call it with treq."""

    timeout = 30

    def start(self, api=None, gates="", runtime=None, **settings):
        self.root = os.path.abspath(self.mktemp())
        config = orchlet_settings(Config(data_dir=self.mktemp(), orchlet_port=0,
                                         root_dir=self.root,
                                         feature_gates=FeatureGates.parse(gates), **settings))
        self.runtime = runtime or SimulatedRuntime(reactor, root=self.root)
        self.runtime.sync_pod(pod())
        keys = pki()
        self.endpoint = OrchletEndpoint(reactor, config, self.runtime, "n1", *keys["serving"],
                                        [keys["ca"]], api=api)
        self.endpoint.startService()
        self.addCleanup(self.endpoint.stopService)

    async def request(self, method, path, certificate=False, token=None):
        keys = pki()
        cert, key = keys["client"] if certificate else (None, None)
        pool = HTTPConnectionPool(reactor, persistent=False)
        client = HTTPClient(Agent(reactor, contextFactory=ClientTLSPolicy(keys["ca"], cert, key),
                                  pool=pool))
        headers = {b"authorization": [b"Bearer " + token.encode()]} if token else {}
        return await client.request(method, f"https://127.0.0.1:{self.endpoint.port}{path}",
                                    headers=headers)

    async def call(self, method, path, certificate=False, token=None):
        response = await self.request(method, path, certificate, token)
        body = await response.content()
        ctype = (response.headers.getRawHeaders(b"content-type") or [b""])[0]
        if ctype.startswith(b"application/json"):
            return response.code, orjson.loads(body)
        return response.code, body.decode()


class CertificateTests(TLSEndpoint, TestCase):
    async def test_certificate_passes_with_anonymous_off(self):
        """With anonymous access off, a client certificate from the CA gets through."""
        self.start(orchlet_anonymous_auth=False)
        self.assertEqual(await self.call("GET", "/healthz"), (401, "Unauthorized"))
        self.assertEqual(await self.call("GET", "/healthz", certificate=True), (200, "ok"))

    async def test_x509_user_in_access_review(self):
        """The certificate's CN and O values are the user and groups the webhook is asked about."""
        api = FakeAPI(allowed=True)
        self.start(api=api, orchlet_authorization_mode="Webhook")
        code, _ = await self.call("GET", "/stats/summary", certificate=True)
        self.assertEqual(code, 200)
        spec = api.calls[0][2]["spec"]
        self.assertEqual((spec["user"], spec["groups"]), ("bob", ["ops", "system:authenticated"]))
        self.assertEqual(spec["resourceAttributes"]["subresource"], "stats")
