# -*- test-case-name: tests.storage.test_etcd_cluster -*-
"""
EtcdStore on a three-member etcd: losing one member loses nothing.

The store is given all three client URLs. After the member it was talking
to is killed, writes fail over to another member (after a re-election when
the dead one led), and a watch opened before resumes on a live member from
the last revision it delivered, without a gap or a repeat.
"""

from twisted.internet import reactor, task
from twisted.trial.unittest import TestCase

from orchd.storage.etcd import EtcdStore
from orchd.storage.interfaces import StoreUnavailableError
from tests.etcdsupport import EtcdCluster, require_etcd, unique_prefix
from tests.storage.test_contract import Collector

CM = "/registry/configmaps/"


class ThreeMemberTests(TestCase):
    """Writes and watches carry on after one of three members stops."""

    timeout = 60

    def setUp(self):
        require_etcd()
        self.cluster = EtcdCluster(3).start()
        self.addCleanup(self.cluster.stop)
        self.store = EtcdStore(self.cluster.client_urls, reactor, prefix=unique_prefix("cluster"))
        self.addCleanup(self.store.close)

    async def write(self, key, value):
        """Create C{key}, retrying while the cluster elects a new leader."""
        for attempt in range(100):
            try:
                return await self.store.create(key, value)
            except StoreUnavailableError:
                await task.deferLater(reactor, 0.1, lambda: None)
        raise AssertionError(f"could not write {key} after the member stopped")

    async def test_writes_and_watch_survive_a_stopped_member(self):
        """Every write before and after the stop reaches the watch exactly once, in order."""
        collector = Collector()
        handle = await self.store.watch(CM, 0, collector.on_events, collector.on_error)
        self.addCleanup(handle.stop)
        before = [await self.write(CM + "a%d" % i, b"x") for i in range(5)]
        self.assertEqual(self.store.client.current, 0)
        self.cluster.stop_member(0)
        after = [await self.write(CM + "b%d" % i, b"y") for i in range(5)]
        self.assertNotEqual(self.store.client.current, 0)
        await collector.wait_for(10)
        expected = [kv.mod_revision for kv in before + after]
        self.assertEqual(collector.revisions, expected)
        self.assertEqual(collector.errors, [])
        listed = await self.store.list(CM)
        self.assertEqual(len(listed.items), 10)

    async def test_stop_a_follower(self):
        """Stopping a member the store does not talk to changes nothing for it."""
        await self.write(CM + "a", b"1")
        self.cluster.stop_member(2)
        kv = await self.write(CM + "b", b"2")
        self.assertEqual((await self.store.get(CM + "b")), kv)


class FailOverTests(TestCase):
    """An endpoint that cannot be connected to is skipped."""

    timeout = 30

    async def test_dead_first_endpoint(self):
        """With a closed port first in the list, reads, writes and watches use the next."""
        require_etcd()
        from tests.etcdsupport import _free_ports, shared_cluster
        dead = "http://127.0.0.1:%d" % _free_ports(1)[0]
        store = EtcdStore([dead] + shared_cluster().client_urls, reactor,
                          prefix=unique_prefix("failover"))
        self.addCleanup(store.close)
        collector = Collector()
        handle = await store.watch(CM, 0, collector.on_events, collector.on_error)
        self.addCleanup(handle.stop)
        kv = await store.create(CM + "a", b"1")
        self.assertEqual(await store.get(CM + "a"), kv)
        self.assertEqual(collector.revisions, [kv.mod_revision])
        await store.check()

    async def test_nothing_reachable(self):
        """With no member reachable, calls and check() fail as unavailable."""
        from tests.etcdsupport import _free_ports
        store = EtcdStore(["http://127.0.0.1:%d" % p for p in _free_ports(2)], reactor)
        self.addCleanup(store.close)
        await self.assertFailure(store.check(), StoreUnavailableError)
        await self.assertFailure(store.create(CM + "a", b""), StoreUnavailableError)
