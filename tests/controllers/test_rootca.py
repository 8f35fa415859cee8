"""The root-CA publisher: C{orch-root-ca.crt} in every active namespace, kept right."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.rootca import _OTHER_MAP, DESCRIPTION_ANNOTATION, RootCAPublisher
from orchd.storage.interfaces import CompactedError
from tests.support import APIHarness

CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def map_path(namespace):
    return f"/api/v1/namespaces/{namespace}/configmaps/orch-root-ca.crt"


class RootCAPublisherTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        controller = self.controller = RootCAPublisher(self.api.catalog, self.api.clock, CA)
        controller.startService()
        self.addCleanup(controller.stopService)
        self.successResultOf(controller.started)
        self.api.clock.advance(1)

    def call(self, method, path, body=None, **kwargs):
        code, obj, _ = self.api.call(method, path, body, **kwargs)
        self.api.clock.advance(1)
        return code, obj

    def assertPublished(self, namespace):
        code, config_map = self.call("GET", map_path(namespace))
        self.assertEqual(code, 200)
        self.assertEqual(config_map["data"], {"ca.crt": CA.decode()})
        self.assertIn(DESCRIPTION_ANNOTATION, config_map["metadata"]["annotations"])

    def test_every_namespace(self):
        """Namespaces present at start and created later get the map."""
        self.assertPublished("default")
        self.assertPublished("orch-system")
        self.call("POST", "/api/v1/namespaces", {"metadata": {"name": "team-a"}})
        self.assertPublished("team-a")

    def test_restored_after_delete(self):
        self.call("DELETE", map_path("default"))
        self.assertPublished("default")

    def test_restored_after_edit(self):
        """Changed data (or an extra key) is put back."""
        code, _ = self.call("PATCH", map_path("default"), {"data": {"ca.crt": "x", "y": "z"}},
                            content_type=b"application/merge-patch+json")
        self.assertEqual(code, 200)
        self.assertPublished("default")

    def test_other_maps_untouched(self):
        self.call("POST", "/api/v1/namespaces/default/configmaps",
                  {"metadata": {"name": "mine"}, "data": {"ca.crt": "x"}})
        self.assertEqual(self.call("GET", "/api/v1/namespaces/default/configmaps/mine")[1]
                         ["data"], {"ca.crt": "x"})

    def test_terminating_namespace_left_alone(self):
        self.call("POST", "/api/v1/namespaces", {"metadata": {"name": "going"}})
        self.call("DELETE", "/api/v1/namespaces/going")
        self.call("DELETE", map_path("going"))
        self.assertEqual(self.call("GET", map_path("going"))[0], 404)

    def test_other_maps_kept_as_one_stand_in(self):
        """Of other config maps nothing of their own is kept; root-CA maps keep their names."""
        self.call("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "a"}})
        self.call("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "b"}})
        cache = self.controller._maps_informer.cache
        prefix = "/registry/configmaps/default/"
        self.assertIs(cache[prefix + "a"], _OTHER_MAP)
        self.assertIs(cache[prefix + "b"], _OTHER_MAP)
        self.assertEqual(cache[prefix + "orch-root-ca.crt"]["metadata"]["name"],
                         "orch-root-ca.crt")
        self.assertEqual(_OTHER_MAP, {"metadata": {"name": "", "namespace": ""}})

    def test_deletions_found_by_listing_again(self):
        """A root-CA map deleted while the watch was lost is restored; another map's deletion is ignored."""
        self.call("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "a"}})
        informer = self.controller._maps_informer
        informer._watch.stop()
        informer._watch = None
        self.call("DELETE", map_path("default"))
        self.call("DELETE", "/api/v1/namespaces/default/configmaps/a")
        informer._failed(CompactedError(1, 2))
        self.api.clock.advance(1)
        self.assertPublished("default")
        self.assertEqual(self.call("GET", "/api/v1/namespaces/default/configmaps/a")[0], 404)
        self.assertEqual(self.flushLoggedErrors(), [])
