"""After a key rotation, writing an unchanged object re-encrypts it with the current key."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.storage.encrypting import TransformingStore
from orchd.storage.memory import MemoryStore
from tests.storage.test_encrypting import KEY_ONE, KEY_TWO, config
from tests.support import APIHarness

SECRETS = "/api/v1/namespaces/default/secrets"
CMS = "/api/v1/namespaces/default/configmaps"
KEY = "/registry/secrets/default/s"


class StaleRewriteTests(SynchronousTestCase):
    """The registry skips no-op updates, except of values stored under an older key."""

    def setUp(self):
        self.backend = MemoryStore()
        old = APIHarness(store=TransformingStore(
            self.backend, config(("one", KEY_ONE), resources=("secrets", "configmaps"))
            .transformer_for))
        code, _, _ = old.call("POST", SECRETS, {"metadata": {"name": "s"},
                                                "data": {"k": "dmFsdWU="}})
        self.assertEqual(code, 201)
        self.api = APIHarness(store=TransformingStore(
            self.backend, config(("two", KEY_TWO), ("one", KEY_ONE),
                                 resources=("secrets", "configmaps")).transformer_for),
            system_namespaces=False)

    def raw(self):
        return self.successResultOf(self.backend.get(KEY)).value

    def test_unchanged_put_rewrites_stale_object(self):
        """PUT of the object as read writes it anew under the first key; then it is a no-op."""
        _, secret, _ = self.api.call("GET", SECRETS + "/s")
        self.assertTrue(self.raw().startswith(b"k8s:enc:aesgcm:v1:one:"))
        code, replaced, _ = self.api.call("PUT", SECRETS + "/s", secret)
        self.assertEqual(code, 200, replaced)
        self.assertNotEqual(replaced["metadata"]["resourceVersion"],
                            secret["metadata"]["resourceVersion"])
        self.assertEqual(replaced["data"], secret["data"])
        self.assertTrue(self.raw().startswith(b"k8s:enc:aesgcm:v1:two:"))
        code, again, _ = self.api.call("PUT", SECRETS + "/s", replaced)
        self.assertEqual(code, 200)
        self.assertEqual(again["metadata"]["resourceVersion"],
                         replaced["metadata"]["resourceVersion"])

    def test_empty_patch_rewrites_stale_object(self):
        """A patch that changes nothing also moves a stale object to the first key."""
        code, patched, _ = self.api.call("PATCH", SECRETS + "/s", {},
                                         content_type=b"application/merge-patch+json")
        self.assertEqual(code, 200, patched)
        self.assertTrue(self.raw().startswith(b"k8s:enc:aesgcm:v1:two:"))

    def test_current_object_not_rewritten(self):
        """An object already under the first key is not written again by an unchanged PUT."""
        code, created, _ = self.api.call("POST", CMS, {"metadata": {"name": "c"}})
        self.assertEqual(code, 201, created)
        code, same, _ = self.api.call("PUT", CMS + "/c", created)
        self.assertEqual((code, same["metadata"]["resourceVersion"]),
                         (200, created["metadata"]["resourceVersion"]))
