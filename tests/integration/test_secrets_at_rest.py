"""
Secrets at rest on a real server: an owner-only data dir, and encryption of
what the LevelDB store holds, through restarts and a key rotation.
"""

import base64
import io
import json
import os
import stat

import plyvel
import treq
import yaml
from twisted.internet import reactor
from twisted.logger import globalLogPublisher
from twisted.trial.unittest import TestCase

from orchd.app.admin import run as admin_run
from orchd.app.datadir import restrict_umask
from tests.integration.support import RunningControlPlane
from tests.integration.test_cli import spawn

SECRETS = "/api/v1/namespaces/default/secrets"
CM = "/api/v1/namespaces/default/configmaps"
#: base64 of "hunter2-password": what must never be found in the store.
PASSWORD = base64.b64encode(b"hunter2-password").decode()
KEY_ONE = base64.b64encode(b"\x01" * 32).decode()
KEY_TWO = base64.b64encode(b"\x02" * 32).decode()


def write_config(test, *keys, identity=False):
    """An EncryptionConfiguration file: secrets with aesgcm C{keys}, in order."""
    providers = [{"aesgcm": {"keys": [{"name": name, "secret": secret}
                                      for name, secret in keys]}}]
    if identity:
        providers.append({"identity": {}})
    path = test.mktemp()
    with open(path, "w") as stream:
        yaml.safe_dump({"apiVersion": "apiserver.config.orch.io/v1",
                        "kind": "EncryptionConfiguration",
                        "resources": [{"resources": ["secrets"], "providers": providers}]},
                       stream)
    return path


def raw_records(data_dir):
    """Every key and value of the (closed) LevelDB store under C{data_dir}."""
    db = plyvel.DB(os.path.join(data_dir, "store"))
    try:
        return list(db.iterator())
    finally:
        db.close()


def secret_body(name):
    return {"metadata": {"name": name}, "data": {"password": PASSWORD}}


class PermissionTests(TestCase):
    """Everything orchd writes under its data dir is owner-only."""

    timeout = 60

    def setUp(self):
        # The server restricts the umask of the process it runs in; put back
        # the test process's own afterwards.
        previous = restrict_umask()
        os.umask(previous)
        self.addCleanup(os.umask, previous)

    def assertOwnerOnly(self, data_dir):
        checked = 0
        for root, directories, files in os.walk(data_dir):
            for name in [root] + [os.path.join(root, f) for f in files]:
                mode = stat.S_IMODE(os.lstat(name).st_mode)
                self.assertEqual(mode & 0o077, 0, f"{name} is {mode:04o}")
                checked += 1
        return checked

    async def test_new_data_dir(self):
        """A started server's data dir, store, PKI and node agent files are owner-only."""
        os.umask(0o022)
        server = await RunningControlPlane(self, no_orchlet=False,
                                           hostname_override="node-a").start()
        agent = [service for service in server.top if service is not server.plane][0]
        await (await agent.ready).registered
        code, _ = await server.call("POST", SECRETS, secret_body("s"))
        self.assertEqual(code, 201)
        await server.stop()
        self.assertEqual(stat.S_IMODE(os.stat(server.data_dir).st_mode), 0o700)
        self.assertGreater(self.assertOwnerOnly(server.data_dir), 10)
        self.assertTrue(os.path.isdir(os.path.join(server.data_dir, "orchlet")))

    async def test_old_loose_data_dir_is_corrected(self):
        """A data dir of 0755 directories and 0644 files is made owner-only at start, said once."""
        first = await RunningControlPlane(self).start()
        await first.stop()
        data_dir = first.data_dir
        loose = 0
        for root, directories, files in os.walk(data_dir):
            os.chmod(root, 0o755)
            for name in files:
                os.chmod(os.path.join(root, name), 0o644)
                loose += 1
        os.umask(0o022)
        messages = []
        globalLogPublisher.addObserver(messages.append)
        self.addCleanup(globalLogPublisher.removeObserver, messages.append)
        second = await RunningControlPlane(self, data_dir).start()
        code, _ = await second.call("GET", "/api/v1/namespaces/default")
        self.assertEqual(code, 200)
        await second.stop()
        self.assertEqual(stat.S_IMODE(os.stat(data_dir).st_mode), 0o700)
        store = os.path.join(data_dir, "store")
        self.assertOwnerOnly(store)
        warned = [m for m in messages if "owner-only that other users could read" in
                  m.get("log_format", "")]
        self.assertEqual(len(warned), 1)
        self.assertGreaterEqual(warned[0]["count"], 3)


class EncryptionTests(TestCase):
    """Secrets reach LevelDB encrypted with aesgcm; clients see plaintext."""

    timeout = 90

    async def test_secret_encrypted_in_leveldb(self):
        """The raw value carries upstream's prefix and not the data; GET, LIST, WATCH are plain."""
        path = write_config(self, ("first", KEY_ONE), identity=True)
        server = await RunningControlPlane(self, encryption_provider_config=path).start()
        code, created = await server.call("POST", SECRETS, secret_body("db"))
        self.assertEqual(code, 201, created)
        code, _ = await server.call("POST", CM, {"metadata": {"name": "plain"},
                                                 "data": {"colour": "blue-in-the-clear"}})
        self.assertEqual(code, 201)
        backend = server.plane.store.store
        raw = (await backend.get("/registry/secrets/default/db")).value
        self.assertTrue(raw.startswith(b"k8s:enc:aesgcm:v1:first:"), raw[:40])
        self.assertNotIn(PASSWORD.encode(), raw)
        self.assertIn(b"blue-in-the-clear", (await backend.get(
            "/registry/configmaps/default/plain")).value)

        code, got = await server.call("GET", SECRETS + "/db")
        self.assertEqual((code, got["data"]), (200, {"password": PASSWORD}))
        code, listed = await server.call("GET", SECRETS)
        self.assertEqual([item["data"] for item in listed["items"]], [{"password": PASSWORD}])
        version = listed["metadata"]["resourceVersion"]
        code, updated = await server.call("PUT", SECRETS + "/db", dict(
            got, data={"password": PASSWORD, "more": PASSWORD}))
        self.assertEqual(code, 200, updated)
        response = await server.client.get(
            server.url + SECRETS + f"?watch=1&resourceVersion={version}&timeoutSeconds=1",
            unbuffered=True)
        events = [json.loads(line) for line in (await treq.content(response)).splitlines()]
        self.assertEqual([(e["type"], e["object"]["data"]) for e in events],
                         [("MODIFIED", {"password": PASSWORD, "more": PASSWORD})])
        await server.stop()

        records = raw_records(server.data_dir)
        self.assertFalse([key for key, value in records if PASSWORD.encode() in value])
        self.assertTrue([key for key, value in records if b"blue-in-the-clear" in value])

    async def test_snapshot_keeps_ciphertext(self):
        """A snapshot holds the encrypted value (file 0600); restored, it reads with the keys."""
        config = write_config(self, ("one", KEY_ONE))
        first = await RunningControlPlane(self, encryption_provider_config=config).start()
        code, _ = await first.call("POST", SECRETS, secret_body("kept"))
        self.assertEqual(code, 201)
        await first.stop()
        path = os.path.abspath(self.mktemp())
        out, err = io.StringIO(), io.StringIO()
        self.assertEqual(await admin_run(["snapshot", "save", path, "--data-dir", first.data_dir],
                                         reactor, out, err), 0, err.getvalue())
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        with open(path, "rb") as stream:
            records = [json.loads(line) for line in stream.read().splitlines()[1:]]
        stored = {r["key"]: base64.b64decode(r["value"]) for r in records}
        value = stored["/registry/secrets/default/kept"]
        self.assertTrue(value.startswith(b"k8s:enc:aesgcm:v1:one:"))
        self.assertNotIn(PASSWORD.encode(), value)
        target = os.path.abspath(self.mktemp())
        self.assertEqual(await admin_run(["snapshot", "restore", path, "--data-dir", target],
                                         reactor, out, err), 0, err.getvalue())
        self.assertEqual(stat.S_IMODE(os.stat(target).st_mode), 0o700)
        # The record of the current key ends with the value, byte for byte.
        self.assertTrue(any(record.endswith(value) for _, record in raw_records(target)))
        second = await RunningControlPlane(self, target, encryption_provider_config=config).start()
        code, got = await second.call("GET", SECRETS + "/kept")
        self.assertEqual((code, got["data"]), (200, {"password": PASSWORD}))

    async def test_rotation(self):
        """Rotate: new key first, restart, replace every secret, drop the old key: all read."""
        data_dir = self.mktemp()
        first = await RunningControlPlane(
            self, data_dir, encryption_provider_config=write_config(self, ("one", KEY_ONE))
        ).start()
        for index in range(3):
            code, _ = await first.call("POST", SECRETS, secret_body(f"s{index}"))
            self.assertEqual(code, 201)
        await first.stop()

        rotated = await RunningControlPlane(
            self, data_dir,
            encryption_provider_config=write_config(self, ("two", KEY_TWO), ("one", KEY_ONE))
        ).start()
        code, listed = await rotated.call("GET", "/api/v1/secrets")
        self.assertEqual(code, 200)
        mine = [item for item in listed["items"] if item["metadata"]["namespace"] == "default"]
        self.assertEqual(len(mine), 3)
        # What `kubectl get secrets -A -o json | kubectl replace -f -` sends: each
        # object unchanged, which must still be written again with the new key.
        for item in listed["items"]:
            meta = item["metadata"]
            code, replaced = await rotated.call(
                "PUT", f"/api/v1/namespaces/{meta['namespace']}/secrets/{meta['name']}", item)
            self.assertEqual(code, 200, replaced)
            self.assertNotEqual(replaced["metadata"]["resourceVersion"],
                                meta["resourceVersion"])
        # Once written with the first key, an unchanged replace is a no-op again.
        code, again = await rotated.call("PUT", SECRETS + "/s0",
                                         (await rotated.call("GET", SECRETS + "/s0"))[1])
        self.assertEqual(code, 200)
        code, now = await rotated.call("GET", SECRETS + "/s0")
        self.assertEqual(now["metadata"]["resourceVersion"], again["metadata"]["resourceVersion"])
        await rotated.stop()
        for key, value in raw_records(data_dir):
            if key.startswith(b"c//registry/secrets/"):
                self.assertIn(b"k8s:enc:aesgcm:v1:two:", value, key)

        final = await RunningControlPlane(
            self, data_dir, encryption_provider_config=write_config(self, ("two", KEY_TWO))
        ).start()
        code, listed = await final.call("GET", SECRETS)
        self.assertEqual(code, 200, listed)
        self.assertEqual(sorted(item["metadata"]["name"] for item in listed["items"]),
                         ["s0", "s1", "s2"])
        for index in range(3):
            code, got = await final.call("GET", SECRETS + f"/s{index}")
            self.assertEqual((code, got["data"]), (200, {"password": PASSWORD}))

    async def test_removed_key_is_a_clear_error(self):
        """A secret under a key no longer configured answers 500 naming it; the rest serves."""
        data_dir = self.mktemp()
        first = await RunningControlPlane(
            self, data_dir, encryption_provider_config=write_config(self, ("one", KEY_ONE))
        ).start()
        code, _ = await first.call("POST", SECRETS, secret_body("lost"))
        self.assertEqual(code, 201)
        await first.stop()

        # Its controllers never sync on the unreadable resource, so readiness
        # is not waited for: the listener and the system namespaces are.
        server = await RunningControlPlane(
            self, data_dir, encryption_provider_config=write_config(self, ("two", KEY_TWO))
        ).start(ready=False)
        code, status = await server.call("GET", SECRETS + "/lost")
        self.assertEqual(code, 500)
        self.assertEqual(status["reason"], "InternalError")
        self.assertIn('unable to transform key "/registry/secrets/default/lost": no matching key '
                      "was found for the provided aesgcm transformer (the value names key 'one')",
                      status["message"])
        code, status = await server.call("GET", SECRETS)
        self.assertEqual(code, 500)
        self.assertIn("/registry/secrets/default/lost", status["message"])
        code, created = await server.call("POST", SECRETS, secret_body("fresh"))
        self.assertEqual(code, 201, created)
        code, got = await server.call("GET", SECRETS + "/fresh")
        self.assertEqual((code, got["data"]), (200, {"password": PASSWORD}))
        code, _ = await server.call("POST", CM, {"metadata": {"name": "still-served"}})
        self.assertEqual(code, 201)


class StartupErrorTests(TestCase):
    """An invalid EncryptionConfiguration stops C{twistd orchd} with one line naming it."""

    timeout = 60

    async def test_invalid_config_files(self):
        """Each of several invalid files gives one line that names the problem."""
        documents = {
            "unknown provider": {"resources": [{"resources": ["secrets"],
                                                "providers": [{"aesgcmm": {}}]}]},
            "16 bytes long; secretbox takes 32": {"resources": [{"resources": ["secrets"],
                "providers": [{"secretbox": {"keys": [{"name": "k",
                                                       "secret": base64.b64encode(
                                                           b"x" * 16).decode()}]}}]}]},
            "already listed": {"resources": [{"resources": ["secrets"],
                                              "providers": [{"identity": {}}]},
                                             {"resources": ["secrets"],
                                              "providers": [{"identity": {}}]}]},
        }
        for says, body in documents.items():
            path = os.path.abspath(self.mktemp())
            with open(path, "w") as stream:
                yaml.safe_dump(dict({"apiVersion": "apiserver.config.orch.io/v1",
                                     "kind": "EncryptionConfiguration"}, **body), stream)
            child = spawn("--data-dir", os.path.abspath(self.mktemp()),
                          "--encryption-provider-config", path)
            child.listening.addErrback(lambda _: None)
            self.assertNotEqual(await child.ended, 0)
            lines = child.errors.decode().strip().splitlines()
            self.assertEqual(len(lines), 1, child.errors)
            self.assertTrue(lines[0].startswith("twistd orchd: error: "
                                                "--encryption-provider-config: "), lines[0])
            self.assertIn(says, lines[0])
