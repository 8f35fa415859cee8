"""Lists answered from the watch cache (resourceVersion=0): large ones leave the reactor free."""

import orjson
import treq
from twisted.trial.unittest import SynchronousTestCase

from orchd.registry import reading
from tests.support import APIHarness

CM = "/api/v1/namespaces/default/configmaps"


class CachedListTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.names = [f"cm-{i}" for i in range(5)]
        for name in self.names:
            self.api.call("POST", CM, {"metadata": {"name": name}, "data": {"k": name}})

    def test_long_list_decodes_over_several_turns(self):
        """A list past a slice answers only after later reactor turns, with every object."""
        _, whole, _ = self.api.call("GET", CM + "?resourceVersion=0")
        self.patch(reading, "_CACHED_SLICE", 2)
        response = self.api.treq.get("https://orchd" + CM + "?resourceVersion=0")
        self.assertNoResult(response)
        # A write between the slices does not change the snapshot being listed.
        self.api.call("POST", CM, {"metadata": {"name": "late"}})
        self.api.clock.advance(0)
        self.api.treq.flush()
        response = self.successResultOf(response)
        body = self.successResultOf(treq.content(response))
        self.assertEqual(orjson.loads(body), whole)
        self.assertEqual([i["metadata"]["name"] for i in whole["items"]], self.names)
