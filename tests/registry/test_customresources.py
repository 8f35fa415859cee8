"""
Following CustomResourceDefinitions: every API server sharing a store
serves the kinds of the established definitions, and stops when they go.
"""

import copy

from twisted.trial.unittest import SynchronousTestCase

from orchd.storage.memory import MemoryStore
from tests.crdfixtures import CRDS, WIDGETS, widget, widget_crd
from tests.support import APIHarness


class TwoServersTests(SynchronousTestCase):
    def setUp(self):
        store = MemoryStore()
        self.one = APIHarness(store=store)
        self.two = APIHarness(store=store, system_namespaces=False)

    def test_other_server_serves_new_definition(self):
        """A definition created on one server is served by the other from the watch."""
        self.assertEqual(self.two.call("GET", WIDGETS)[0], 404)
        code, _, _ = self.one.call("POST", CRDS, widget_crd())
        self.assertEqual(code, 201)
        code, body, _ = self.two.call("POST", WIDGETS, widget("w", replicas=1))
        self.assertEqual(code, 201, body)
        code, body, _ = self.one.call("GET", f"{WIDGETS}/w")
        self.assertEqual((code, body["spec"]["color"]), (200, "blue"))
        code, resources, _ = self.two.call("GET", "/apis/example.com/v1")
        self.assertEqual(resources["resources"][0]["name"], "widgets")

    def test_other_server_follows_changes_and_deletion(self):
        """A version added, then the definition deleted, on one server changes the other's."""
        _, crd, _ = self.one.call("POST", CRDS, widget_crd())
        v2 = copy.deepcopy(crd["spec"]["versions"][0])
        v2.update(name="v2", storage=False)
        crd["spec"]["versions"].append(v2)
        code, _, _ = self.one.call("PUT", f"{CRDS}/widgets.example.com", crd)
        self.assertEqual(code, 200)
        v2_widgets = "/apis/example.com/v2/namespaces/default/widgets"
        self.assertEqual(self.two.call("GET", v2_widgets)[0], 200)
        self.two.call("POST", WIDGETS, widget("w"))
        self.one.call("DELETE", f"{CRDS}/widgets.example.com")
        for api in (self.one, self.two):
            api.clock.advance(1)
        self.assertEqual(self.two.call("GET", WIDGETS)[0], 404)
        self.assertEqual(self.two.call("GET", v2_widgets)[0], 404)
        self.assertEqual(self.one.call("GET", WIDGETS)[0], 404)
        self.assertNotIn("example.com", str(self.two.call("GET", "/apis")[1]))

    def test_restart_serves_stored_definitions(self):
        """A server started over a store holding a definition serves it once it has listed."""
        self.one.call("POST", CRDS, widget_crd())
        third = APIHarness(store=self.one.store, system_namespaces=False)
        self.assertEqual(third.call("GET", WIDGETS)[0], 200)

    def test_rejected_definition_not_served(self):
        """A definition whose names conflict is not served by any server."""
        self.one.call("POST", CRDS, widget_crd())
        other = widget_crd(names={"plural": "gadgets", "singular": "gadget", "kind": "Widget"})
        self.one.call("POST", CRDS, other)
        path = "/apis/example.com/v1/namespaces/default/gadgets"
        self.assertEqual(self.one.call("GET", path)[0], 404)
        self.assertEqual(self.two.call("GET", path)[0], 404)
