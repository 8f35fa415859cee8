# -*- test-case-name: tests.storage.test_etcd_tls -*-
"""
EtcdStore on an etcd that requires TLS client certificates.

Production etcd is reached over HTTPS with a client certificate; these tests
check that the store's C{ca}/C{cert}/C{key} really carry every call and
watch, and that a store without the certificate, or trusting another CA, is
refused as unavailable rather than hanging.
"""

from twisted.internet import reactor
from twisted.trial.unittest import TestCase

from orchd.tls.certs import create_ca
from orchd.storage.etcd import EtcdStore
from orchd.storage.interfaces import ADDED, DELETED, MODIFIED, StoreUnavailableError
from tests.etcdsupport import EtcdCluster, write_pem
from tests.storage.test_contract import Collector

CM = "/registry/configmaps/"


class TLSTests(TestCase):
    """One TLS etcd per test (trial has no setUpClass); each store is closed in cleanup."""

    timeout = 30

    def setUp(self):
        self.cluster = EtcdCluster(1, tls=True).start()
        self.addCleanup(self.cluster.stop)

    def store(self, **tls):
        """A store on the TLS cluster with the given C{ca}, C{cert}, C{key}."""
        store = EtcdStore(self.cluster.client_urls, reactor, **tls)
        self.addCleanup(store.close)
        return store

    async def test_calls_and_watch(self):
        """With the CA, client certificate and key, every call and a watch work over HTTPS."""
        c = self.cluster
        store = self.store(ca=c.ca_path, cert=c.client_cert_path, key=c.client_key_path)
        collector = Collector()
        handle = await store.watch(CM, 0, collector.on_events, collector.on_error)
        self.addCleanup(handle.stop)
        kv = await store.create(CM + "a", b"1")
        self.assertEqual(await store.get(CM + "a"), kv)
        updated = await store.update(CM + "a", b"2", kv.mod_revision)
        self.assertEqual([item.value for item in (await store.list(CM)).items], [b"2"])
        await store.delete(CM + "a", updated.mod_revision)
        self.assertIsNone(await store.get(CM + "a"))
        await collector.wait_for(3)
        self.assertEqual([e.type for e in collector.events], [ADDED, MODIFIED, DELETED])
        self.assertEqual(collector.revisions[:2], [kv.mod_revision, updated.mod_revision])
        self.assertEqual(collector.errors, [])

    async def test_no_client_certificate(self):
        """Trusting the CA is not enough: etcd refuses a client without a certificate."""
        store = self.store(ca=self.cluster.ca_path)
        await self.assertFailure(store.get(CM + "a"), StoreUnavailableError)
        await self.assertFailure(store.create(CM + "a", b"1"), StoreUnavailableError)

    async def test_wrong_ca(self):
        """A store trusting another CA refuses etcd's serving certificate."""
        other = write_pem(self.cluster.root, "other-ca", create_ca("other-ca", days=1)[0])
        c = self.cluster
        store = self.store(ca=other, cert=c.client_cert_path, key=c.client_key_path)
        await self.assertFailure(store.get(CM + "a"), StoreUnavailableError)
        await self.assertFailure(store.check(), StoreUnavailableError)

