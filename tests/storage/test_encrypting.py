"""The encrypting store decorator: ciphertext in the backend, plaintext above it."""

import base64

from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase, TestCase

from orchd.api.errors import StatusError
from orchd.app.encryptionconfig import parse_encryption_config
from orchd.storage.encrypting import TransformingStore
from orchd.storage.interfaces import ADDED, DELETED, MODIFIED, ConflictError
from orchd.storage.leveldb import LevelDBStore
from orchd.storage.memory import MemoryStore
from orchd.storage.watchcache import WatchCache
from tests.storage import test_contract
from tests.storage.test_contract import StoreContract

SECRET = "/registry/secrets/default/db"
CONFIGMAP = "/registry/configmaps/default/settings"
PLAIN = b'{"kind":"Secret","data":{"password":"aHVudGVyMg=="}}'
KEY_ONE = base64.b64encode(b"1" * 32).decode()
KEY_TWO = base64.b64encode(b"2" * 32).decode()


def config(*keys, resources=("secrets",), identity=False):
    """An EncryptionConfig encrypting C{resources} with aesgcm C{keys} (name, secret)."""
    providers = [{"aesgcm": {"keys": [{"name": name, "secret": secret}
                                      for name, secret in keys]}}]
    if identity:
        providers.append({"identity": {}})
    return parse_encryption_config({
        "apiVersion": "apiserver.config.orch.io/v1", "kind": "EncryptionConfiguration",
        "resources": [{"resources": list(resources), "providers": providers}]})


def encrypting(backend, *keys, **options):
    keys = keys or (("one", KEY_ONE),)
    return TransformingStore(backend, config(*keys, **options).transformer_for)


class EncryptedMemoryStoreTests(StoreContract, TestCase):
    """The store contract holds through the decorator, every core resource encrypted."""

    def make_store(self):
        return encrypting(MemoryStore(), resources=("*.",))


class EncryptedLevelDBStoreTests(StoreContract, TestCase):
    """The store contract holds through the decorator over LevelDB."""

    def make_store(self):
        store = LevelDBStore(self.mktemp(), reactor, replay_chunk=3, sweep_chunk=4)
        self.addCleanup(store.close)
        return encrypting(store, resources=("*.",))


class EncryptedEtcdStoreTests(test_contract.EtcdStoreTests):
    """The store contract holds through the decorator over etcd (skipped without etcd)."""

    def make_store(self):
        return encrypting(super().make_store(), resources=("*.",))


class Events:
    def __init__(self):
        self.events = []
        self.errors = []

    def on_events(self, events):
        self.events.extend(events)

    def on_error(self, error):
        self.errors.append(error)


class ValuePathTests(SynchronousTestCase):
    """Writes reach the backend encrypted; reads, lists and watches give plaintext."""

    def setUp(self):
        self.backend = MemoryStore()
        self.store = encrypting(self.backend)

    def raw(self, key):
        return self.successResultOf(self.backend.get(key)).value

    def test_stored_encrypted(self):
        """The backend holds upstream's prefix and no trace of the value."""
        created = self.successResultOf(self.store.create(SECRET, PLAIN))
        self.assertEqual(created.value, PLAIN)
        raw = self.raw(SECRET)
        self.assertTrue(raw.startswith(b"k8s:enc:aesgcm:v1:one:"))
        self.assertNotIn(b"aHVudGVyMg", raw)
        self.assertNotIn(b"Secret", raw)

    def test_reads_are_plaintext(self):
        """get and list answer the plaintext, with the backend's revisions."""
        created = self.successResultOf(self.store.create(SECRET, PLAIN))
        got = self.successResultOf(self.store.get(SECRET))
        self.assertEqual((got.value, got.mod_revision, got.stale),
                         (PLAIN, created.mod_revision, False))
        listed = self.successResultOf(self.store.list("/registry/secrets/"))
        self.assertEqual([kv.value for kv in listed.items], [PLAIN])
        self.assertIsNone(self.successResultOf(self.store.get(SECRET + "x")))

    def test_other_resources_untouched(self):
        """A resource no rule names is stored byte for byte."""
        self.successResultOf(self.store.create(CONFIGMAP, b'{"data":{"a":"b"}}'))
        self.assertEqual(self.raw(CONFIGMAP), b'{"data":{"a":"b"}}')

    def test_watch_events_are_plaintext(self):
        """ADDED, MODIFIED (with its previous value) and DELETED carry plaintext."""
        seen = Events()
        self.successResultOf(self.store.watch("/registry/", 0, seen.on_events, seen.on_error))
        kv = self.successResultOf(self.store.create(SECRET, b"v1"))
        kv = self.successResultOf(self.store.update(SECRET, b"v2", kv.mod_revision))
        self.successResultOf(self.store.delete(SECRET))
        self.assertEqual([(e.type, e.value, e.prev_value) for e in seen.events],
                         [(ADDED, b"v1", None), (MODIFIED, b"v2", b"v1"), (DELETED, b"v2", None)])
        self.assertEqual(seen.errors, [])

    def test_replayed_events_are_plaintext(self):
        """A watch from an old revision replays decrypted history."""
        self.successResultOf(self.store.create(CONFIGMAP, b"{}"))
        kv = self.successResultOf(self.store.create(SECRET, b"v1"))
        self.successResultOf(self.store.update(SECRET, b"v2", kv.mod_revision))
        seen = Events()
        self.successResultOf(self.store.watch("/registry/secrets/", kv.mod_revision - 1,
                                              seen.on_events, seen.on_error))
        self.assertEqual([e.value for e in seen.events], [b"v1", b"v2"])

    def test_conflict_and_delete_carry_plaintext(self):
        """A failed compare-and-swap reports, and a delete returns, the plaintext."""
        kv = self.successResultOf(self.store.create(SECRET, PLAIN))
        failure = self.failureResultOf(self.store.update(SECRET, b"x", kv.mod_revision + 7),
                                       ConflictError)
        self.assertEqual(failure.value.current.value, PLAIN)
        _, previous = self.successResultOf(self.store.delete(SECRET))
        self.assertEqual(previous.value, PLAIN)


class RecentTests(SynchronousTestCase):
    """Plaintexts are remembered by key and revision, so repeated reads decrypt nothing."""

    def setUp(self):
        self.backend = MemoryStore()
        self.store = encrypting(self.backend)
        self.decrypted = 0
        transformer_for = self.store._transformer_for

        def counting(key):
            chain = transformer_for(key)
            if chain is None:
                return None
            test = self

            class Counting:
                def to_storage(self, value, key):
                    return chain.to_storage(value, key)

                def from_storage(self, value, key):
                    test.decrypted += 1
                    return chain.from_storage(value, key)
            return Counting()
        self.store._transformer_for = counting

    def test_reads_after_a_write_decrypt_nothing(self):
        """What was just written, and then read again, is answered without decrypting."""
        self.successResultOf(self.store.create(SECRET, PLAIN))
        for _ in range(3):
            self.assertEqual(self.successResultOf(self.store.get(SECRET)).value, PLAIN)
        self.assertEqual(self.decrypted, 0)

    def test_a_new_revision_is_decrypted(self):
        """A value written behind the decorator's back (another server) is decrypted once."""
        created = self.successResultOf(self.store.create(SECRET, PLAIN))
        other = encrypting(self.backend)
        self.successResultOf(other.update(SECRET, b'{"v":2}', created.mod_revision))
        for _ in range(2):
            self.assertEqual(self.successResultOf(self.store.get(SECRET)).value, b'{"v":2}')
        self.assertEqual(self.decrypted, 1)

    def test_deleted_key_is_forgotten(self):
        """A delete drops the remembered plaintext."""
        self.successResultOf(self.store.create(SECRET, PLAIN))
        self.successResultOf(self.store.delete(SECRET))
        self.assertIsNone(self.successResultOf(self.store.get(SECRET)))
        self.assertEqual(self.store._recent, {})


class RotationTests(SynchronousTestCase):
    """Values under a key that is no longer first read as stale; removed keys fail clearly."""

    def setUp(self):
        self.backend = MemoryStore()
        self.successResultOf(encrypting(self.backend, ("one", KEY_ONE)).create(SECRET, PLAIN))

    def test_old_key_reads_stale(self):
        """With the new key first and the old second, old values read and are stale."""
        store = encrypting(self.backend, ("two", KEY_TWO), ("one", KEY_ONE))
        got = self.successResultOf(store.get(SECRET))
        self.assertEqual((got.value, got.stale), (PLAIN, True))
        self.assertTrue(self.successResultOf(store.list("/registry/")).items[0].stale)
        self.successResultOf(store.update(SECRET, got.value, got.mod_revision))
        again = self.successResultOf(store.get(SECRET))
        self.assertEqual((again.value, again.stale), (PLAIN, False))
        raw = self.successResultOf(self.backend.get(SECRET)).value
        self.assertTrue(raw.startswith(b"k8s:enc:aesgcm:v1:two:"))

    def test_plaintext_reads_through_identity(self):
        """Plaintext stored before encryption was on reads with identity listed, stale."""
        self.successResultOf(self.backend.create(SECRET + "2", PLAIN))
        store = encrypting(self.backend, ("one", KEY_ONE), identity=True)
        got = self.successResultOf(store.get(SECRET + "2"))
        self.assertEqual((got.value, got.stale), (PLAIN, True))

    def assertUnreadable(self, failure):
        error = failure.value
        self.assertIsInstance(error, StatusError)
        self.assertEqual((error.code, error.reason), (500, "InternalError"))
        self.assertIn(f'Internal error occurred: unable to transform key "{SECRET}": no '
                      f"matching key was found for the provided aesgcm transformer (the value "
                      f"names key 'one')", error.message)

    def test_removed_key_fails_get_and_list(self):
        """A value under a removed key fails get and list with a 500 naming the storage key."""
        store = encrypting(self.backend, ("two", KEY_TWO))
        self.assertUnreadable(self.failureResultOf(store.get(SECRET)))
        self.assertUnreadable(self.failureResultOf(store.list("/registry/secrets/")))
        self.successResultOf(store.create(SECRET + "-new", b"fine"))
        self.assertEqual(self.successResultOf(store.get(SECRET + "-new")).value, b"fine")

    def test_removed_key_ends_watch(self):
        """A watch that meets an unreadable value ends with that error, and delivers no more."""
        store = encrypting(self.backend, ("two", KEY_TWO))
        seen = Events()
        self.successResultOf(store.watch("/registry/", 0, seen.on_events, seen.on_error))
        self.successResultOf(self.backend.update(SECRET, self.successResultOf(
            self.backend.get(SECRET)).value, 1))
        self.successResultOf(store.create(SECRET + "-new", b"later"))
        self.assertEqual(seen.events, [])
        self.assertEqual(len(seen.errors), 1)
        self.assertIsInstance(seen.errors[0], StatusError)
        self.assertIn(f'unable to transform key "{SECRET}"', seen.errors[0].message)

    def test_unreadable_replay_ends_watch(self):
        """An unreadable value in replayed history ends the watch as it starts."""
        self.successResultOf(encrypting(self.backend, ("one", KEY_ONE)).create(SECRET + "2", b"x"))
        store = encrypting(self.backend, ("two", KEY_TWO))
        seen = Events()
        watch = self.successResultOf(store.watch("/registry/", 1, seen.on_events, seen.on_error))
        self.assertEqual((seen.events, len(seen.errors)), ([], 1))
        self.successResultOf(store.create(SECRET + "-new", b"later"))
        self.assertEqual(seen.events, [])
        watch.stop()


class CacheRestartTests(SynchronousTestCase):
    """A watch cache whose resource cannot be read keeps trying, less and less often."""

    def test_retries_until_readable(self):
        """Start fails on an unreadable value; retries wait 1, 2, 4 s and succeed once fixed."""
        backend = MemoryStore()
        self.successResultOf(encrypting(backend, ("one", KEY_ONE)).create(SECRET, b"{}"))
        store = encrypting(backend, ("two", KEY_TWO))
        clock = Clock()
        cache = WatchCache(store, "/registry/secrets/", clock)
        self.addCleanup(cache.stop)
        errors = []
        cache.log = Logger(observer=errors.append)
        failure = self.failureResultOf(Deferred.fromCoroutine(cache.start()), StatusError)
        cache.start_failed(failure)
        self.assertEqual([e["delay"] for e in errors], [1.0])
        clock.advance(1)
        clock.advance(2)
        self.assertEqual([e["delay"] for e in errors], [1.0, 2.0, 4.0])
        self.assertFalse(cache.ready.called)
        self.successResultOf(backend.delete(SECRET))
        clock.advance(4)
        self.assertTrue(cache.ready.called)
        self.assertFalse([call for call in clock.getDelayedCalls()
                          if call.func == cache._attempt_start])

    def test_stop_ends_retries(self):
        """A stopped cache tries no more."""
        backend = MemoryStore()
        self.successResultOf(encrypting(backend, ("one", KEY_ONE)).create(SECRET, b"{}"))
        clock = Clock()
        cache = WatchCache(encrypting(backend, ("two", KEY_TWO)), "/registry/secrets/", clock)
        cache.log = Logger(observer=lambda event: None)
        cache.start_failed(self.failureResultOf(Deferred.fromCoroutine(cache.start())))
        cache.stop()
        self.assertEqual(clock.getDelayedCalls(), [])
