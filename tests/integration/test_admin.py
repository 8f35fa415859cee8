"""
orchd-admin on real stores: LevelDB, a LevelDB -> etcd -> LevelDB migration,
and real servers on restored stores (etcd tests skip when etcd is not installed).
"""

import io
import os
import sys

from twisted.internet import reactor
from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import TestCase

from orchd.app.admin import run
from orchd.storage.leveldb import LevelDBStore
from tests.app.test_admin import contents, fill
from tests.etcdsupport import EtcdCluster, require_etcd
from tests.integration.support import RunningControlPlane

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVICES = "/api/v1/namespaces/default/services"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


async def admin(*argv):
    """C{(status, stdout, stderr)} of one orchd-admin command line."""
    out, err = io.StringIO(), io.StringIO()
    status = await run(list(argv), reactor, out, err)
    return status, out.getvalue(), err.getvalue()


class LevelDBAdminTests(TestCase):
    """The command on LevelDB stores, and a real server on a restored store."""

    timeout = 90

    async def test_cli_round_trip(self):
        """save refuses an open store, then saves a closed one; verify and restore bring it back."""
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
        require_etcd()
        self.etcd = EtcdCluster(1).start()
        self.addCleanup(self.etcd.stop)

    async def test_round_trip(self):
        """LevelDB -> etcd -> LevelDB keeps every key, and a server runs on the migrated etcd."""
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
        second = await RunningControlPlane(self, first_dir, storage_backend="etcd",
                                           etcd_servers=(self.etcd.client_urls[0],)).start()
        code, got = await second.call("GET", CONFIGMAPS + "/migrated")
        self.assertEqual(code, 200, got)
        self.assertEqual((got["data"], got["metadata"]["uid"]),
                         (made["data"], made["metadata"]["uid"]))
