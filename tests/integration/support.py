"""Real servers for integration tests: TLS on a free port, LevelDB in a temp dir."""

import shutil

import orjson
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from treq.client import HTTPClient
from twisted.web.client import Agent, HTTPConnectionPool

from orchd.app.config import Config
from orchd.app.service import make_service
from orchd.client.connect import client_from_orchconfig
from orchd.client.orchconfig import load_orchconfig
from orchd.tls.client import ClientTLSPolicy


class RunningControlPlane:
    """A started control plane and an admin client for it."""

    def __init__(self, test, data_dir=None, **settings):
        self.test = test
        self.data_dir = data_dir or test.mktemp()
        # No node agent unless a test asks for one (no_orchlet=False): most
        # tests do not need it, and it would only slow them down.
        settings.setdefault("no_orchlet", True)
        settings.setdefault("orchlet_port", 0)
        # The components' health ports are fixed numbers: off unless a test asks.
        settings.setdefault("scheduler_port", 0)
        settings.setdefault("controller_manager_port", 0)
        self.config = Config(data_dir=self.data_dir, secure_port=0, **settings)
        self.top = make_service(self.config, reactor)
        self.plane = next(iter(self.top))
        self.pool = HTTPConnectionPool(reactor, persistent=True)
        self.client = None
        self.url = None
        self.stopped = False

    async def start(self, ready=True):
        """
        Start, and wait for readiness (or, with C{ready=False}, only for the
        listener and the system namespaces).
        """
        self.top.privilegedStartService()
        self.top.startService()
        self.test.addCleanup(self.stop)
        if ready:
            await self.plane.ready
        else:
            while not self.plane._namespaces_hook.done:
                await sleep(0.05)
        self.url = self.plane.url
        self.client, _ = client_from_orchconfig(self.plane.pki.admin_orchconfig_path, reactor,
                                                self.pool)
        return self

    async def stop(self):
        if self.stopped:
            return
        self.stopped = True
        await self.pool.closeCachedConnections()
        await self.top.stopService()

    def user_client(self, name, *groups):
        """
        A treq client holding a certificate for C{name} in C{groups}, issued
        by the cluster CA; its connections are closed at the test's clean-up.
        """
        cert, key = self.plane.pki.issue_client_certificate(name, list(groups))
        ca = load_orchconfig(self.plane.pki.admin_orchconfig_path).ca_pem
        pool = HTTPConnectionPool(reactor, persistent=True)
        self.test.addCleanup(pool.closeCachedConnections)
        return HTTPClient(Agent(reactor, contextFactory=ClientTLSPolicy(ca, cert, key),
                                pool=pool))

    async def call(self, method, path, body=None, headers=None, client=None):
        """One request; returns C{(code, decoded body)}."""
        return await call(client or self.client, self.url, method, path, body, headers)


async def call(client, url, method, path, body=None, headers=None):
    """
    One request with C{client} (a treq client) to the server at C{url};
    returns C{(code, decoded body)}: JSON decoded, anything else as text.
    """
    all_headers = {b"content-type": [b"application/json"]}
    all_headers.update(headers or {})
    data = orjson.dumps(body) if body is not None and not isinstance(body, bytes) else body
    response = await client.request(method, url + path, data=data, headers=all_headers)
    raw = await response.content()
    ctype = (response.headers.getRawHeaders(b"content-type") or [b""])[0]
    if ctype.startswith(b"application/json") and raw:
        return response.code, orjson.loads(raw)
    return response.code, raw.decode("utf-8", "replace")


def kubectl():
    """The kubectl binary, or None (tests that need it skip)."""
    return shutil.which("kubectl")


def sleep(seconds):
    d = Deferred()
    reactor.callLater(seconds, d.callback, None)
    return d
