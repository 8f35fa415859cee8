"""
orchd-admin snapshots: the file format, save, restore and verify, on memory stores.

The command on real LevelDB and etcd stores, and servers on restored
stores, are in L{tests.integration.test_admin}.
"""

from twisted.internet.defer import Deferred
from twisted.trial.unittest import TestCase

from orchd.storage import snapshot
from orchd.storage.memory import MemoryStore


async def fill(store, count=25):
    for i in range(count):
        await store.create(f"/registry/configmaps/default/cm-{i:03d}", bytes([i]) * (i * 7))
    await store.create("/registry/ranges/serviceips", b"\x00\xff bitmap")


async def contents(store, prefix="/registry/"):
    result = await store.list(prefix)
    return {kv.key: kv.value for kv in result.items}


def restoring(store, path):
    return Deferred.fromCoroutine(snapshot.restore(store, path))


class SnapshotFileTests(TestCase):
    """The file format and the save/restore logic, on memory stores."""

    async def test_round_trip(self):
        """Every key and value comes back, listed page by page; revisions are the target's."""
        source = MemoryStore()
        await fill(source)
        path = self.mktemp()
        header = await snapshot.save(source, path, {"backend": "memory"}, page=4)
        self.assertEqual((header["count"], header["revision"]), (26, 26))
        self.assertEqual(snapshot.verify(path)["sha256"], header["sha256"])
        target = MemoryStore()
        await target.create("/elsewhere/x", b"not under the prefix")
        _, written = await snapshot.restore(target, path)
        self.assertEqual(written, 26)
        self.assertEqual(await contents(target), await contents(source))
        kv = await target.get("/registry/configmaps/default/cm-000")
        self.assertEqual(kv.create_revision, kv.mod_revision)

    async def test_one_revision(self):
        """Writes made while a save pages through the store are not in the snapshot."""
        source = MemoryStore()
        await fill(source)
        original_list = source.list

        def list_then_write(prefix, **kwargs):
            result = original_list(prefix, **kwargs)
            source.create(f"/registry/configmaps/default/late-{kwargs.get('start')}", b"late")
            if kwargs.get("start") is None:
                source.delete("/registry/ranges/serviceips")
            return result

        source.list = list_then_write
        path = self.mktemp()
        header = await snapshot.save(source, path, {"backend": "memory"}, page=5)
        self.assertEqual((header["revision"], header["count"]), (26, 26))
        target = MemoryStore()
        await snapshot.restore(target, path)
        restored = await contents(target)
        self.assertIn("/registry/ranges/serviceips", restored)
        self.assertFalse([key for key in restored if "late" in key])

    async def test_refuses_non_empty(self):
        """A restore into a store that holds keys under /registry/ is refused, writing nothing."""
        source = MemoryStore()
        await fill(source, 3)
        path = self.mktemp()
        await snapshot.save(source, path, {"backend": "memory"})
        target = MemoryStore()
        await target.create("/registry/namespaces/default", b"{}")
        error = await self.assertFailure(restoring(target, path), snapshot.SnapshotError)
        self.assertIn("already holds 1 keys under /registry/", str(error))
        self.assertEqual(list(await contents(target)), ["/registry/namespaces/default"])

    async def damaged(self, change):
        """Save, apply C{change(bytes) -> bytes}, restore into a memory store: the error."""
        source = MemoryStore()
        await fill(source)
        path = self.mktemp()
        await snapshot.save(source, path, {"backend": "memory"})
        with open(path, "rb") as f:
            data = change(f.read())
        with open(path, "wb") as f:
            f.write(data)
        target = MemoryStore()
        error = await self.assertFailure(restoring(target, path), snapshot.SnapshotError)
        self.assertEqual(await target.count("/"), 0)
        self.assertEqual(target.compacted_revision, 0)
        return str(error)

    async def test_truncated(self):
        """A file cut mid-line, or at a line's end, is refused; nothing is written."""
        message = await self.damaged(lambda data: data[:-30])
        self.assertIn("is truncated: line 27 is incomplete", message)
        message = await self.damaged(lambda data: data[: data.rindex(b"\n", 0, -1) + 1])
        self.assertIn("holds 25 of the 26 keys its header announces", message)

    async def test_corrupt(self):
        """A changed value fails the checksum; a broken line names itself; nothing is written."""
        def flip(data):
            at = data.index(b'"value":"', snapshot.HEADER_BYTES + 200) + 10
            return data[:at] + (b"A" if data[at:at + 1] != b"A" else b"B") + data[at + 1:]
        message = await self.damaged(flip)
        self.assertIn("is corrupt: its checksum does not match its header", message)
        message = await self.damaged(lambda data: data.replace(b'"key"', b'"kye"', 1))
        self.assertIn("is corrupt at line 2", message)

    async def test_not_a_snapshot(self):
        """A file that is not a snapshot is named as such."""
        path = self.mktemp()
        with open(path, "w") as f:
            f.write("hello\n")
        error = await self.assertFailure(restoring(MemoryStore(), path),
                                         snapshot.SnapshotError)
        self.assertEqual(str(error), f"{path} is not an orchd snapshot")
