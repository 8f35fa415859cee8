"""Locating a node's orchlet: name forms, address preference, port, the proxy's Location."""

from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from orchd.api.errors import StatusError
from orchd.registry.catalog import IStreamConnector
from orchd.registry.context import RequestContext
from orchd.registry.nodeproxy import (
    NodeProxy, node_address, orchlet_port, split_scheme_name_port,
)
from orchd.registry.streams import ORCHLET_CLIENT, ProxyOptions
from tests.server.test_proxy import add_node, node
from tests.support import ADMIN, APIHarness


class SplitTests(SynchronousTestCase):
    def test_forms(self):
        self.assertEqual(split_scheme_name_port("n1"), ("", "n1", ""))
        self.assertEqual(split_scheme_name_port("n1:10250"), ("", "n1", "10250"))
        self.assertEqual(split_scheme_name_port("https:n1:10250"), ("https", "n1", "10250"))

    def test_malformed(self):
        for text in ("a:b:c:d", ":80", "ftp:n1:21", ""):
            self.assertIsNone(split_scheme_name_port(text), text)


class AddressTests(SynchronousTestCase):
    def node(self, *addresses, port=None):
        status = {"addresses": [{"type": t, "address": a} for t, a in addresses]}
        if port is not None:
            status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": port}}
        return {"status": status}

    def test_internal_ip_first(self):
        """InternalIP wins over Hostname (see the module docstring), then upstream's order."""
        node = self.node(("Hostname", "h"), ("ExternalIP", "1.2.3.4"), ("InternalIP", "10.0.0.1"))
        self.assertEqual(node_address(node), "10.0.0.1")
        self.assertEqual(node_address(self.node(("ExternalIP", "1.2.3.4"), ("Hostname", "h"))),
                         "h")
        self.assertEqual(node_address(self.node(("ExternalIP", "1.2.3.4"))), "1.2.3.4")
        self.assertIsNone(node_address({}))

    def test_port(self):
        self.assertEqual(orchlet_port(self.node(port=10250)), 10250)
        self.assertEqual(orchlet_port(self.node()), 0)
        self.assertEqual(orchlet_port(self.node(port="10250")), 0)


class NodeProxyTests(SynchronousTestCase):
    """The C{nodes/proxy} connector, asked directly: options in, a Location out."""

    def setUp(self):
        self.api = APIHarness()
        add_node(self.api, node())
        self.proxy = NodeProxy(self.api.catalog)

    def locate(self, name, options=None):
        ctx = RequestContext(ADMIN, "")
        return self.api.run(self.proxy.locate(ctx, name, options or ProxyOptions()))

    def test_provides(self):
        """It is a stream connector for the proxy verbs, taking ProxyOptions."""
        self.assertTrue(verifyObject(IStreamConnector, self.proxy))
        self.assertIs(self.proxy.options, ProxyOptions)

    def test_orchlet(self):
        """The node's own port is the orchlet, asked with the orchlet client identity."""
        location = self.locate("n1", ProxyOptions("/stats/a b", "x=%20", "POST"))
        self.assertEqual((location.url, location.method, location.identity),
                         ("https://10.0.0.1:10250/stats/a%20b?x=%20", "POST", ORCHLET_CLIENT))
        self.assertEqual((location.content_type, location.check_status), (None, False))
        self.assertEqual(self.locate("https:n1:10250").identity, ORCHLET_CLIENT)

    def test_other_port(self):
        """Another port is plain HTTP unless the name says https, and has no identity."""
        self.assertEqual((self.locate("n1:8080").url, self.locate("n1:8080").identity),
                         ("http://10.0.0.1:8080/", None))
        self.assertEqual(self.locate("https:n1:8443").url, "https://10.0.0.1:8443/")

    def test_port_not_ascii_digits(self):
        """A port spelled in other digits than ASCII's is a 400, not a 500."""
        for name in ("n1:\u0661\u0662", "n1:\uff18\uff10", "n1:0", "n1:65536", "n1:x"):
            error = self.assertRaises(StatusError, self.locate, name)
            self.assertEqual((error.code, error.message), (400, f"invalid node request {name!r}"))
