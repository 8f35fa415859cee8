"""Locating a node's orchlet: name forms, address preference, port."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.registry.nodeproxy import node_address, orchlet_port, split_scheme_name_port


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
