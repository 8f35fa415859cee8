"""The data of streamed subresources: a Location's URL."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.registry.streams import Location


class LocationTests(SynchronousTestCase):
    def test_url(self):
        """The URL joins scheme, host, port, path and a query when there is one."""
        self.assertEqual(Location("https", "10.0.0.1", 10250, "/a%20b", "x=1").url,
                         "https://10.0.0.1:10250/a%20b?x=1")
        self.assertEqual(Location("http", "node-a", 8080, "/").url, "http://node-a:8080/")

    def test_ipv6(self):
        """An IPv6 address is put in brackets."""
        self.assertEqual(Location("https", "fd00::1", 10250, "/healthz").url,
                         "https://[fd00::1]:10250/healthz")
