"""The orchlet's webhooks against a real API server: TokenReview and SubjectAccessReview."""

from twisted.internet import reactor
from twisted.trial.unittest import TestCase

from orchd.app.config import Config
from orchd.app.orchletsettings import orchlet_settings
from orchd.orchlet.server import OrchletEndpoint
from orchd.orchlet.simulated import SimulatedRuntime
from tests.integration.support import RunningControlPlane
from tests.integration.test_orchlet_endpoint import TLSEndpoint
from tests.orchlet.test_endpoint import pki


class ServerAPI:
    """The C{api} the endpoint needs, as the admin of a running control plane."""

    def __init__(self, server):
        self.server = server

    async def request(self, method, path, body=None):
        return await self.server.call(method, path, body)


class RealWebhookTests(TLSEndpoint, TestCase):
    timeout = 60

    async def test_real_access_review(self):
        """The API server's RBAC decides: anonymous may not read node stats."""
        server = await RunningControlPlane(self).start()
        config = orchlet_settings(Config(data_dir=self.mktemp(), orchlet_port=0,
                                         orchlet_authorization_mode="Webhook"))
        keys = pki()
        self.endpoint = OrchletEndpoint(reactor, config, SimulatedRuntime(reactor), "n1",
                                        *keys["serving"], [keys["ca"]], api=ServerAPI(server))
        self.endpoint.startService()
        self.addCleanup(self.endpoint.stopService)
        self.assertEqual(await self.call("GET", "/stats/summary"),
                         (403, "Forbidden (user=system:anonymous, verb=get, resource=nodes, "
                               "subresource=stats)"))
