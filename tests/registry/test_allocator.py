"""Tests for orchd.registry.allocator: ranges, bands, and state kept in the store."""

import ipaddress

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from orchd.registry.allocator import (
    AlreadyAllocated, IPRange, NotInRange, PortRange, RangeFull, band_offset,
)
from orchd.storage.memory import MemoryStore


class FirstChoice:
    """A random source that always picks the start of the band."""

    def randrange(self, count):
        return 0


def run(coroutine):
    results = []
    Deferred.fromCoroutine(coroutine).addBoth(results.append)
    if hasattr(results[0], "raiseException"):
        results[0].raiseException()
    return results[0]


class BandTests(SynchronousTestCase):
    def test_formula(self):
        """min(max(16, size/16), 256) addresses, and one pool for 16 or fewer."""
        self.assertEqual(band_offset(16, 16, 256, 16), 0)
        self.assertEqual(band_offset(32, 16, 256, 16), 16)
        self.assertEqual(band_offset(1024, 16, 256, 16), 64)
        self.assertEqual(band_offset(2 ** 20, 16, 256, 16), 256)
        self.assertEqual(band_offset(2768, 16, 128, 32), 86)


class IPRangeTests(SynchronousTestCase):
    def setUp(self):
        self.store = MemoryStore()

    def test_dynamic_prefers_upper_band(self):
        """In a /27 (30 usable), .1-.16 are the lower band; dynamic picks .17-.30 first."""
        ips = IPRange(self.store, "10.0.0.0/27")
        first = [run(ips.allocate_next()) for _ in range(14)]
        self.assertEqual(sorted(first, key=ipaddress.ip_address),
                         [f"10.0.0.{i}" for i in range(17, 31)])
        rest = [run(ips.allocate_next()) for _ in range(16)]
        self.assertEqual(sorted(rest, key=ipaddress.ip_address),
                         [f"10.0.0.{i}" for i in range(1, 17)])
        self.assertRaises(RangeFull, run, ips.allocate_next())

    def test_static_in_lower_band(self):
        ips = IPRange(self.store, "10.0.0.0/27")
        run(ips.allocate("10.0.0.3"))
        self.assertRaises(AlreadyAllocated, run, ips.allocate("10.0.0.3"))
        self.assertNotIn("10.0.0.3", [run(ips.allocate_next()) for _ in range(29)])

    def test_out_of_range(self):
        """Network, broadcast and foreign addresses cannot be requested."""
        ips = IPRange(self.store, "10.0.0.0/28")
        for ip in ("10.0.0.0", "10.0.0.15", "10.0.1.1", "fd00::1"):
            self.assertRaises(NotInRange, run, ips.allocate(ip))

    def test_release(self):
        ips = IPRange(self.store, "10.0.0.0/29")
        taken = {run(ips.allocate_next()) for _ in range(6)}
        self.assertEqual(len(taken), 6)
        self.assertRaises(RangeFull, run, ips.allocate_next())
        run(ips.release("10.0.0.4"))
        self.assertEqual(run(ips.allocate_next()), "10.0.0.4")

    def test_ipv6(self):
        """An IPv6 /124 has 15 usable addresses (only the network address is kept out)."""
        ips = IPRange(self.store, "fd00::/124")
        taken = {run(ips.allocate_next()) for _ in range(15)}
        self.assertIn("fd00::f", taken)
        self.assertNotIn("fd00::", taken)
        self.assertRaises(RangeFull, run, ips.allocate_next())

    def test_ipv6_bands(self):
        ips = IPRange(self.store, "fd00::/123")
        first = {run(ips.allocate_next()) for _ in range(15)}
        self.assertEqual(first, {str(ipaddress.ip_address(f"fd00::{i:x}")) for i in range(17, 32)})

    def test_restart(self):
        """A new allocator over the same store sees what the old one handed out."""
        old = IPRange(self.store, "10.0.0.0/29")
        taken = {run(old.allocate_next()) for _ in range(3)}
        new = IPRange(self.store, "10.0.0.0/29")
        self.assertEqual(set(run(new.used())), taken)
        self.assertEqual(len(taken | {run(new.allocate_next()) for _ in range(3)}), 6)

    def test_shared_store_interleaved(self):
        """Two allocators racing on one store never hand out the same IP."""
        one = IPRange(self.store, "10.0.0.0/29", random_source=FirstChoice())
        two = IPRange(self.store, "10.0.0.0/29", random_source=FirstChoice())
        real_get = self.store.get
        results = []

        def racing_get(key):
            # Between one's read and its write, two allocates.
            self.store.get = real_get
            d = real_get(key)
            results.append(run(two.allocate_next()))
            return d

        self.store.get = racing_get
        results.append(run(one.allocate_next()))
        self.assertEqual(sorted(results), ["10.0.0.1", "10.0.0.2"])
        for allocator in (one, two, one, two):
            results.append(run(allocator.allocate_next()))
        self.assertEqual(len(set(results)), 6)
        self.assertRaises(RangeFull, run, two.allocate_next())

    def test_seed(self):
        """Without stored state, the seed says what is in use."""
        async def seed():
            return ["10.0.0.1", "10.0.0.2", "bogus"]
        ips = IPRange(self.store, "10.0.0.0/29", seed=seed, random_source=FirstChoice())
        self.assertEqual(run(ips.allocate_next()), "10.0.0.3")

    def test_range_changed(self):
        """State of another range is not reused."""
        run(IPRange(self.store, "10.0.0.0/29").allocate("10.0.0.1"))
        ips = IPRange(self.store, "10.0.1.0/29", random_source=FirstChoice())
        self.assertEqual(run(ips.allocate_next()), "10.0.1.1")


class PortRangeTests(SynchronousTestCase):
    def test_bands(self):
        """Ports 100-147 (48): the lower 16 are taken last."""
        ports = PortRange(MemoryStore(), 100, 48)
        first = {run(ports.allocate_next()) for _ in range(32)}
        self.assertEqual(first, set(range(116, 148)))
        self.assertEqual({run(ports.allocate_next()) for _ in range(16)}, set(range(100, 116)))
        self.assertRaises(RangeFull, run, ports.allocate_next())

    def test_static_and_release(self):
        store = MemoryStore()
        ports = PortRange(store)
        run(ports.allocate(30000))
        self.assertRaises(AlreadyAllocated, run, PortRange(store).allocate(30000))
        self.assertRaises(NotInRange, run, ports.allocate(32768))
        run(ports.release(30000))
        run(PortRange(store).allocate(30000))
