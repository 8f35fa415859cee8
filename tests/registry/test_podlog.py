"""The C{pods/log} connector, asked directly: PodLogOptions in, the orchlet's Location out."""

from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from orchd.api.errors import StatusError
from orchd.registry.catalog import IStreamConnector
from orchd.registry.context import RequestContext
from orchd.registry.podlog import PodLog
from orchd.registry.streams import ORCHLET_CLIENT, PodLogOptions
from tests.server.test_proxy import add_node, node, pod
from tests.support import ADMIN, APIHarness


class PodLogTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        add_node(self.api, node())
        code, body, _ = self.api.call("POST", "/api/v1/namespaces/default/pods",
                                      pod(containers=("a", "b")))
        self.assertEqual(code, 201, body)
        self.log = PodLog(self.api.catalog)

    def locate(self, **options):
        ctx = RequestContext(ADMIN, "default")
        return self.api.run(self.log.locate(ctx, "p", PodLogOptions(**options)))

    def test_provides(self):
        """It is a stream connector for get, taking PodLogOptions."""
        self.assertTrue(verifyObject(IStreamConnector, self.log))
        self.assertEqual((self.log.verbs, self.log.options), (("get",), PodLogOptions))

    def test_location(self):
        """The orchlet's containerLogs path, asked with GET as the orchlet client, as text."""
        location = self.locate(container="b")
        self.assertEqual(location.url, "https://10.0.0.1:10250/containerLogs/default/p/b")
        self.assertEqual((location.method, location.identity, location.content_type,
                          location.check_status), ("GET", ORCHLET_CLIENT, "text/plain", True))

    def test_options_passed_on(self):
        """Set flags and numbers are passed on in upstream's order; unset ones are left out."""
        location = self.locate(container="a", limit_bytes=10, tail_lines=0, follow=True,
                               since_time="2024-05-01T10:00:00Z", previous=False)
        self.assertEqual(location.query, "follow=true&sinceTime=2024-05-01T10%3A00%3A00Z"
                                         "&tailLines=0&limitBytes=10")

    def test_option_minimums(self):
        """Numbers below their minimum are 400s, worded as before."""
        for options, message in [
            ({"since_seconds": 0}, "sinceSeconds: must be positive, got 0"),
            ({"tail_lines": -1}, "tailLines: must be non-negative, got -1"),
            ({"limit_bytes": -5}, "limitBytes: must be positive, got -5"),
        ]:
            error = self.assertRaises(StatusError, self.locate, container="a", **options)
            self.assertEqual((error.code, error.message), (400, message), options)

    def test_container_required(self):
        """A pod of several containers needs one named."""
        error = self.assertRaises(StatusError, self.locate)
        self.assertEqual(error.message,
                         "a container name must be specified for pod p, choose one of: [a b]")
