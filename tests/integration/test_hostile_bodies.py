"""Hostile and heavy bodies against a real server: refused, or decoded off the reactor."""

from twisted.internet.defer import Deferred
from twisted.trial.unittest import TestCase

from tests.api.test_yamldecode import BILLION_LAUGHS
from tests.integration.support import RunningControlPlane

CM = "/api/v1/namespaces/default/configmaps"
YAML = {b"content-type": [b"application/yaml"]}


class HostileBodyTests(TestCase):
    timeout = 60

    async def setUp(self):
        self.server = await RunningControlPlane(self).start()

    async def test_billion_laughs(self):
        """The issue's alias bomb is a 400 Status, and the server goes on serving."""
        code, status = await self.server.call("POST", CM, BILLION_LAUGHS, headers=YAML)
        self.assertEqual((code, status["reason"]), (400, "BadRequest"))
        self.assertIn("excessive aliasing", status["message"])
        code, _ = await self.server.call("GET", CM)
        self.assertEqual(code, 200)

    async def test_large_yaml_does_not_hold_other_requests(self):
        """While a 2 MB YAML body is being decoded, another client's GET is answered."""
        settings = self.server.plane.site.resource.settings
        offload, started, decoding = settings.offload, Deferred(), []

        def watched(f, *args):
            def decode():
                try:
                    return f(*args)
                finally:
                    decoding.append("done")
            started.callback(None)
            return offload(decode)
        settings.offload = watched
        lines = b"".join(b"  k%d: value-%d\n" % (i, i) for i in range(90_000))
        body = b"metadata: {name: big}\ndata:\n" + lines
        upload = Deferred.fromCoroutine(self.server.call("POST", CM, body, headers=YAML))
        await started
        code, _ = await self.server.call("GET", "/api/v1/namespaces/default")
        self.assertEqual((code, decoding), (200, []))
        code, _ = await upload
        self.assertEqual((code, decoding), (201, ["done"]))
