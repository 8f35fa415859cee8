"""orchd-admin snapshot save, restore and verify, on memory, LevelDB and (if present) etcd."""

import io
import os
import sys

from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import SkipTest, TestCase

from orchd.app.admin import run
from orchd.storage import snapshot
from orchd.storage.leveldb import LevelDBStore
from orchd.storage.memory import MemoryStore
from tests.integration.support import RunningControlPlane

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVICES = "/api/v1/namespaces/default/services"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


async def fill(store, count=25):
    for i in range(count):
        await store.create(f"/registry/configmaps/default/cm-{i:03d}", bytes([i]) * (i * 7))
    await store.create("/registry/ranges/serviceips", b"\x00\xff bitmap")


async def contents(store, prefix="/registry/"):
    result = await store.list(prefix)
    return {kv.key: kv.value for kv in result.items}


def restoring(store, path):
    return Deferred.fromCoroutine(snapshot.restore(store, path))


async def admin(*argv):
    """C{(status, stdout, stderr)} of one orchd-admin command line."""
    out, err = io.StringIO(), io.StringIO()
    status = await run(list(argv), reactor, out, err)
    return status, out.getvalue(), err.getvalue()


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
        path = self.mktemp()
        with open(path, "w") as f:
            f.write("hello\n")
        error = await self.assertFailure(restoring(MemoryStore(), path),
                                         snapshot.SnapshotError)
        self.assertEqual(str(error), f"{path} is not an orchd snapshot")


class LevelDBAdminTests(TestCase):
    """The command on LevelDB stores, and a real server on a restored store."""

    timeout = 90

    async def test_cli_round_trip(self):
        source_dir, target_dir = self.mktemp(), self.mktemp()
        store = LevelDBStore(os.path.join(source_dir, "store"), reactor=reactor)
        await fill(store)
        path = os.path.join(self.mktemp() + "-snap")
        status, out, err = await admin("snapshot", "save", path, "--data-dir", source_dir)
        self.assertIn("in use by another process", err)
        self.assertIn("stop the server first", err)
        self.assertEqual((status, os.path.exists(path)), (1, False))
        expected = await contents(store)
        await store.close()
        status, out, err = await admin("snapshot", "save", path, "--data-dir", source_dir)
        self.assertEqual((status, err), (0, ""))
        self.assertIn("saved 26 keys at revision 26 of LevelDB store", out)
        status, out, _ = await admin("snapshot", "verify", path)
        self.assertEqual(status, 0)
        self.assertIn("checksum good", out)
        status, out, err = await admin("snapshot", "restore", path, "--data-dir", target_dir)
        self.assertEqual((status, err), (0, ""))
        self.assertIn("restored 26 keys", out)
        status, out, err = await admin("snapshot", "restore", path, "--data-dir", target_dir)
        self.assertEqual(status, 1)
        self.assertIn("already holds 26 keys", err)
        restored = LevelDBStore(os.path.join(target_dir, "store"), reactor=reactor)
        self.addCleanup(restored.close)
        self.assertEqual(await contents(restored), expected)

    async def test_cli_errors(self):
        """A missing store is not created; a bad file leaves no store behind."""
        where = self.mktemp()
        status, _, err = await admin("snapshot", "save", self.mktemp(), "--data-dir", where)
        self.assertEqual(status, 1)
        self.assertIn("no LevelDB store in", err)
        self.assertFalse(os.path.exists(where))
        conf = os.path.join(ROOT, "conf", "orchd.yaml")
        status, _, err = await admin("snapshot", "save", self.mktemp(), "--config", conf,
                                     "--data-dir", where)
        self.assertEqual(status, 1)
        self.assertIn(f"no LevelDB store in {os.path.join(where, 'store')}", err)
        bad = self.mktemp()
        with open(bad, "w") as f:
            f.write('{"format": "orchd-snapshot", "version": 7}\n')
        status, _, err = await admin("snapshot", "restore", bad, "--data-dir", where)
        self.assertEqual(status, 1)
        self.assertIn("format version 7", err)
        self.assertFalse(os.path.exists(where))
        status, _, err = await admin("snapshot", "save", bad, "--storage-backend", "etcd")
        self.assertEqual((status, err.strip()),
                         (1, "orchd-admin: error: --storage-backend=etcd needs --etcd-servers"))

    async def test_server_on_restored_store(self):
        """Objects and allocations saved from a stopped server serve from a restored copy."""
        settings = {"service_cluster_ip_range": "10.0.0.0/29"}   # 6 usable addresses
        first_dir, second_dir = self.mktemp(), self.mktemp()
        first = await RunningControlPlane(self, first_dir, **settings).start()
        ips = set()
        for i in range(3):
            code, obj = await first.call("POST", SERVICES, {
                "metadata": {"name": f"before-{i}"}, "spec": {"ports": [{"port": 80}]}})
            self.assertEqual(code, 201, obj)
            ips.add(obj["spec"]["clusterIP"])
        code, made = await first.call("POST", CONFIGMAPS, {
            "metadata": {"name": "kept", "labels": {"a": "b"}}, "data": {"k": "v" * 3000}})
        self.assertEqual(code, 201, made)
        path = self.mktemp()
        # Another process, as in real use: LevelDB's lock is per process.
        out, err, status = await getProcessOutputAndValue(
            sys.executable, ["-m", "orchd.app.admin", "snapshot", "save", path,
                             "--data-dir", first_dir],
            env=dict(os.environ, PYTHONPATH=ROOT), path=os.getcwd())
        self.assertEqual((status, out), (1, b""))
        self.assertIn(b"orchd-admin: error: the LevelDB store in", err)
        self.assertIn(b"is in use by another process (a running orchd?)", err)
        self.assertFalse(os.path.exists(path))
        await first.stop()
        self.assertEqual((await admin("snapshot", "save", path, "--data-dir", first_dir))[0], 0)
        self.assertEqual((await admin("snapshot", "restore", path, "--data-dir", second_dir))[0],
                         0)
        second = await RunningControlPlane(self, second_dir, **settings).start()
        code, got = await second.call("GET", CONFIGMAPS + "/kept")
        self.assertEqual(code, 200, got)
        self.assertEqual((got["data"], got["metadata"]["uid"], got["metadata"]["labels"]),
                         (made["data"], made["metadata"]["uid"], {"a": "b"}))
        code, listed = await second.call("GET", SERVICES)
        self.assertEqual({s["spec"]["clusterIP"] for s in listed["items"]
                          if s["metadata"]["name"].startswith("before-")}, ips)
        for i in range(3):
            code, obj = await second.call("POST", SERVICES, {
                "metadata": {"name": f"after-{i}"}, "spec": {"ports": [{"port": 80}]}})
            self.assertEqual(code, 201, obj)
            ips.add(obj["spec"]["clusterIP"])
        self.assertEqual(len(ips), 6)


class EtcdMigrationTests(TestCase):
    """LevelDB -> etcd -> LevelDB through snapshots, and a server on the migrated etcd."""

    timeout = 120

    def setUp(self):
        from tests.etcdsupport import require_etcd

        require_etcd()
        try:
            import orchd.storage.etcd  # noqa: F401
        except ImportError:
            raise SkipTest("the etcd backend (orchd/storage/etcd.py) is not available")
        from tests.etcdsupport import EtcdCluster

        self.etcd = EtcdCluster(1).start()
        self.addCleanup(self.etcd.stop)

    async def test_round_trip(self):
        etcd = ("--storage-backend", "etcd", "--etcd-servers", self.etcd.client_urls[0])
        first_dir, last_dir = self.mktemp(), self.mktemp()
        first = await RunningControlPlane(self, first_dir).start()
        code, made = await first.call("POST", CONFIGMAPS, {
            "metadata": {"name": "migrated"}, "data": {"k": "v" * 3000}})
        self.assertEqual(code, 201, made)
        await first.stop()
        to_etcd, from_etcd = self.mktemp(), self.mktemp()
        store = LevelDBStore(os.path.join(first_dir, "store"), reactor=reactor)
        expected = await contents(store)
        await store.close()
        for argv in (("save", to_etcd, "--data-dir", first_dir),
                     ("restore", to_etcd, *etcd),
                     ("save", from_etcd, *etcd),
                     ("restore", from_etcd, "--data-dir", last_dir)):
            status, out, err = await admin("snapshot", *argv)
            self.assertEqual((status, err), (0, ""), argv)
            self.assertIn(f"{len(expected)} keys", out)
        status, _, err = await admin("snapshot", "restore", to_etcd, *etcd)
        self.assertEqual(status, 1)
        self.assertIn(f"already holds {len(expected)} keys", err)
        store = LevelDBStore(os.path.join(last_dir, "store"), reactor=reactor)
        self.assertEqual(await contents(store), expected)
        await store.close()
        # A server on the migrated etcd serves the object (same data dir: same PKI).
        try:
            second = RunningControlPlane(self, first_dir, storage_backend="etcd",
                                         etcd_servers=(self.etcd.client_urls[0],))
        except SystemExit:
            # Until orchd.app.service opens the etcd backend (work in progress).
            raise SkipTest("orchd does not run on --storage-backend=etcd yet; the "
                           "snapshot round trip above passed")
        await second.start()
        code, got = await second.call("GET", CONFIGMAPS + "/migrated")
        self.assertEqual(code, 200, got)
        self.assertEqual((got["data"], got["metadata"]["uid"]),
                         (made["data"], made["metadata"]["uid"]))
