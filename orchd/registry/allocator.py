# -*- test-case-name: tests.registry.test_allocator -*-
"""
Cluster IPs and node ports, handed out from ranges whose state is in the store.

Each range is a bitmap of offsets kept under one store key (as upstream
keeps a RangeAllocation) and changed only by compare-and-swap on that key's
revision, so several API servers over one store, or one server after a
restart, never hand out the same value twice.

A range has a lower band, meant for values that users pick themselves, and
an upper band that dynamic allocation prefers; dynamic allocation falls
back to the lower band only when the upper band is full. Requested values
may be anywhere in the range.
"""

import base64
import ipaddress
import random

import orjson

from orchd.registry.guaranteed import Write, guaranteed_update

SERVICE_IPS_KEY = "/registry/ranges/serviceips"
NODE_PORTS_KEY = "/registry/ranges/servicenodeports"
DEFAULT_NODE_PORTS = (30000, 2768)  # 30000-32767
_MAX_ATTEMPTS = 64
_IPV6_MAX_BITS = 65536


class AllocationError(Exception):
    """A value could not be allocated; C{str()} is upstream's wording."""


class RangeFull(AllocationError):
    def __init__(self):
        super().__init__("range is full")


class AlreadyAllocated(AllocationError):
    def __init__(self, what):
        super().__init__(f"provided {what} is already allocated")


class NotInRange(AllocationError):
    pass


def band_offset(size, minimum, maximum, step):
    """
    The size of the lower band, C{min(max(minimum, size / step), maximum)},
    or 0 (one pool) for a range no larger than C{minimum}.
    """
    if size <= minimum:
        return 0
    return min(max(minimum, size // step), maximum)


class Bitmap:
    """
    Offsets C{0 .. size - 1} of one range, kept at C{key} in an IStore.

    @param spec: the range's text; a stored bitmap of another range is
        rebuilt from C{seed}, as is a missing one.
    @param offset: the size of the lower band.
    @param seed: C{async () -> iterable of offsets} in use, from the objects
        themselves (state kept before this store key existed, or for
        another range), or None.
    """

    def __init__(self, store, key, spec, size, offset, seed=None, random_source=None):
        self.store = store
        self.key = key
        self.spec = spec
        self.size = size
        self.offset = min(offset, size)
        self._seed = seed
        self._random = random_source or random.SystemRandom()

    async def _read(self):
        """@return: C{(bits, KeyValue or None)}."""
        kv = await self.store.get(self.key)
        return await self._bits(kv), kv

    async def _bits(self, kv):
        """The offsets in use by C{kv}, or by the seed when it holds another range or none."""
        if kv is not None:
            stored = orjson.loads(kv.value)
            if stored.get("range") == self.spec:
                return int.from_bytes(base64.b64decode(stored.get("data") or ""), "big")
        bits = 0
        if self._seed is not None:
            for index in await self._seed():
                if 0 <= index < self.size:
                    bits |= 1 << index
        return bits

    def _encode(self, bits):
        data = bits.to_bytes((bits.bit_length() + 7) // 8, "big")
        return orjson.dumps({"kind": "RangeAllocation", "apiVersion": "v1",
                             "metadata": {"name": self.key.rsplit("/", 1)[-1]},
                             "range": self.spec,
                             "data": base64.b64encode(data).decode("ascii")})

    async def _change(self, choose):
        """
        Apply C{choose(bits) -> (new bits, result)} by the registry's
        guaranteed update: chosen again from the state that won whenever
        another writer got there first.
        """
        async def try_change(kv):
            bits = await self._bits(kv)
            new, result = choose(bits)
            if kv is not None and new == bits and orjson.loads(kv.value).get("range") == self.spec:
                return Write.keep(bits, detail=result)
            return Write.put(new, self._encode, detail=result)

        write = await guaranteed_update(
            self.store, self.key, try_change,
            lambda: AllocationError("the allocation state is being changed by too many writers"),
            attempts=_MAX_ATTEMPTS)
        return write.detail

    async def allocate(self, index, taken):
        """Take C{index}; raises C{taken} (an exception) if it is in use."""
        def choose(bits):
            if bits >> index & 1:
                raise taken
            return bits | 1 << index, index
        return await self._change(choose)

    async def allocate_next(self):
        """Take a random free offset, from the upper band while it has one."""
        def choose(bits):
            index = self._free(bits, self.offset, self.size)
            if index is None:
                index = self._free(bits, 0, self.offset)
            if index is None:
                raise RangeFull()
            return bits | 1 << index, index
        return await self._change(choose)

    def _free(self, bits, low, high):
        """A random free offset in C{[low, high)}: a random start, then scan forward."""
        count = high - low
        if count <= 0:
            return None
        start = self._random.randrange(count)
        for step in range(count):
            index = low + (start + step) % count
            if not bits >> index & 1:
                return index
        return None

    async def release(self, index):
        """Give C{index} back; releasing a free offset does nothing."""
        return await self._change(lambda bits: (bits & ~(1 << index), None))

    async def used(self):
        """The offsets in use, ascending."""
        bits, _ = await self._read()
        return [i for i in range(bits.bit_length()) if bits >> i & 1]


class IPRange:
    """
    Cluster IPs of one CIDR. The network address is never handed out, nor,
    for IPv4, the broadcast address; an IPv6 range is cut to 65536 addresses.
    The lower band is C{min(max(16, size / 16), 256)} addresses.
    """

    def __init__(self, store, network, key=SERVICE_IPS_KEY, seed=None, random_source=None):
        self.network = ipaddress.ip_network(network)
        self.family = "IPv4" if self.network.version == 4 else "IPv6"
        total = self.network.num_addresses
        size = min(total, _IPV6_MAX_BITS) if self.network.version == 6 else total - 1
        self._base = int(self.network.network_address) + 1
        offset = band_offset(total, 16, 256, 16)
        wrapped = (lambda: self._offsets(seed)) if seed is not None else None
        self.bitmap = Bitmap(store, key, str(self.network), max(size - 1, 0), offset,
                             wrapped, random_source)

    async def _offsets(self, seed):
        return [self._index(ip) for ip in await seed()]

    def _index(self, ip):
        try:
            address = ipaddress.ip_address(ip)
        except ValueError:
            return -1
        if address not in self.network:
            return -1
        index = int(address) - self._base
        return index if 0 <= index < self.bitmap.size else -1

    def _address(self, index):
        return str(ipaddress.ip_address(self._base + index))

    async def allocate(self, ip):
        index = self._index(ip)
        if index < 0:
            raise NotInRange(f"the provided IP ({ip}) is not in the valid range. The range "
                             f"of valid IPs is {self.network}")
        await self.bitmap.allocate(index, AlreadyAllocated("IP"))

    async def allocate_next(self):
        return self._address(await self.bitmap.allocate_next())

    async def release(self, ip):
        index = self._index(ip)
        if index >= 0:
            await self.bitmap.release(index)

    async def used(self):
        return [self._address(i) for i in await self.bitmap.used()]


class PortRange:
    """
    Node ports C{base .. base + size - 1}; the lower band is
    C{min(max(16, size / 32), 128)} ports.
    """

    def __init__(self, store, base=DEFAULT_NODE_PORTS[0], size=DEFAULT_NODE_PORTS[1],
                 key=NODE_PORTS_KEY, seed=None, random_source=None):
        self.base, self.size = base, size
        self.spec = f"{base}-{base + size - 1}"
        wrapped = (lambda: self._offsets(seed)) if seed is not None else None
        self.bitmap = Bitmap(store, key, self.spec, size, band_offset(size, 16, 128, 32),
                             wrapped, random_source)

    async def _offsets(self, seed):
        return [port - self.base for port in await seed()]

    async def allocate(self, port):
        if not self.base <= port < self.base + self.size:
            raise NotInRange(f"provided port is not in the valid range. The range of valid "
                             f"ports is {self.spec}")
        await self.bitmap.allocate(port - self.base, AlreadyAllocated("port"))

    async def allocate_next(self):
        return self.base + await self.bitmap.allocate_next()

    async def release(self, port):
        if self.base <= port < self.base + self.size:
            await self.bitmap.release(port - self.base)

    async def used(self):
        return [self.base + i for i in await self.bitmap.used()]
