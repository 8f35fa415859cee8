"""
Watches over real TLS: the official Python client, kubectl get -w, a stuck
reader, and every kind of frame in JSON and protobuf streams.
"""

import os

import kubernetes
from twisted.internet import defer, protocol, reactor, threads
from twisted.internet.endpoints import SSL4ClientEndpoint
from twisted.internet.interfaces import IHandshakeListener
from twisted.trial.unittest import SkipTest, TestCase
from zope.interface import implementer

from orchd.client.orchconfig import load_orchconfig
from orchd.client.connect import policy_from_orchconfig
from orchd.storage import watchcache
from tests.integration.support import RunningControlPlane, kubectl, sleep
from tests.watchsupport import (
    PROTOBUF_WATCH, ProtocDecoder, json_events, own_protobuf_events, summary,
)

CM = "/api/v1/namespaces/default/configmaps"


class PythonClientTests(TestCase):
    timeout = 60

    async def setUp(self):
        self.server = await RunningControlPlane(self).start()

    def api(self):
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(
            config_file=self.server.plane.pki.admin_orchconfig_path,
            client_configuration=configuration)
        return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))

    async def test_watch_stream(self):
        """watch.Watch().stream sees the list's objects' later changes, typed."""
        v1 = self.api()
        await self.server.call("POST", CM, {"metadata": {"name": "before"}})

        def watch_until(count):
            seen = []
            listed = v1.list_namespaced_config_map("default")
            w = kubernetes.watch.Watch()
            for event in w.stream(v1.list_namespaced_config_map, "default",
                                  resource_version=listed.metadata.resource_version,
                                  timeout_seconds=20):
                seen.append((event["type"], event["object"].metadata.name))
                if len(seen) == count:
                    w.stop()
            return [n.metadata.name for n in listed.items], seen

        watching = threads.deferToThread(watch_until, 3)
        await sleep(0.5)
        await self.server.call("POST", CM, {"metadata": {"name": "w1"}})
        await self.server.call("PATCH", CM + "/w1", {"data": {"a": "b"}},
                               headers={b"content-type": [b"application/merge-patch+json"]})
        await self.server.call("DELETE", CM + "/w1")
        listed, seen = await watching
        self.assertIn("before", listed)
        self.assertEqual(seen, [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")])

    async def test_watch_410_relists(self):
        """The client's 410 handling sees our ERROR event as an expired resourceVersion."""
        self.patch(watchcache, "HISTORY", 2)
        for cache in self.server.plane.catalog.caches.values():
            cache.history = type(cache.history)(maxlen=2)
        v1 = self.api()
        for i in range(5):
            await self.server.call("POST", CM, {"metadata": {"name": f"h{i}"}})

        def stale_watch():
            w = kubernetes.watch.Watch()
            try:
                for _ in w.stream(v1.list_namespaced_config_map, "default",
                                  resource_version="1", timeout_seconds=5):
                    pass
            except kubernetes.client.exceptions.ApiException as e:
                return e.status
            return None

        self.assertEqual(await threads.deferToThread(stale_watch), 410)


class FramingTests(TestCase):
    """Bookmarks and errors over real TLS come in the stream's own format."""

    timeout = 60

    async def watch(self, server, accept, query):
        """The whole body of a watch that ends by itself, and its content type."""
        response = await server.client.get(server.url + CM + query,
                                           headers={b"accept": [accept]})
        self.assertEqual(response.code, 200)
        chunks = []
        await response.collect(chunks.append)
        return b"".join(chunks), response.headers.getRawHeaders(b"content-type")

    def decode(self, accept, data):
        """C{(type, summary)} of every frame; protobuf is read by two decoders that must agree."""
        if accept == PROTOBUF_WATCH:
            independent = ProtocDecoder().events(data)
            self.assertEqual([(t, summary(obj)) for t, obj in own_protobuf_events(data)],
                             independent)
            return independent
        return [(t, summary(obj)) for t, obj in json_events(data)]

    async def test_bookmarks_and_410_in_json_and_protobuf(self):
        """
        A streaming list with bookmarks ends its initial events, gets periodic
        bookmarks and a last one at timeoutSeconds; a stale start gets one 410
        ERROR: all in the negotiated framing, JSON and protobuf alike.
        """
        self.patch(watchcache, "BOOKMARK_INTERVAL", 0.4)
        self.patch(watchcache, "HISTORY", 5)
        server = await RunningControlPlane(self).start()
        code, before = await server.call("POST", CM, {"metadata": {"name": "before"}})
        self.assertEqual(code, 201)
        for accept in (b"application/json", PROTOBUF_WATCH):
            name = "during-" + ("protobuf" if accept == PROTOBUF_WATCH else "json")
            watching = defer.Deferred.fromCoroutine(self.watch(
                server, accept, "?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
                "&resourceVersionMatch=NotOlderThan&resourceVersion=&timeoutSeconds=2"))
            await sleep(0.3)
            code, during = await server.call("POST", CM, {"metadata": {"name": name}})
            self.assertEqual(code, 201)
            data, content_type = await watching
            self.assertEqual(content_type, [accept])
            frames = self.decode(accept, data)
            types = [t for t, _ in frames]
            end = types.index("BOOKMARK")
            self.assertIn(("ADDED", "before"), [(t, s["name"]) for t, s in frames[:end]])
            self.assertEqual(frames[end][1]["annotations"], {"k8s.io/initial-events-end": "true"})
            later = frames[end + 1:]
            self.assertIn(("ADDED", name), [(t, s["name"]) for t, s in later])
            # Periodic bookmarks, then the timeout's: at least two, all plain.
            bookmarks = [s for t, s in later if t == "BOOKMARK"]
            self.assertEqual(len(bookmarks), len(later) - 1)
            self.assertGreaterEqual(len(bookmarks), 2)
            self.assertEqual({s["kind"] for s in bookmarks}, {"ConfigMap"})
            self.assertEqual([s["annotations"] for s in bookmarks], [{}] * len(bookmarks))
            self.assertEqual(later[-1][0], "BOOKMARK")
            self.assertGreaterEqual(int(later[-1][1]["resourceVersion"]),
                                    int(during["metadata"]["resourceVersion"]))
        for i in range(6):
            await server.call("POST", CM, {"metadata": {"name": f"filler-{i}"}})
        stale = "?watch=true&resourceVersion=" + before["metadata"]["resourceVersion"]
        for accept in (b"application/json", PROTOBUF_WATCH):
            data, _ = await self.watch(server, accept, stale)
            ((kind, status),) = self.decode(accept, data)
            self.assertEqual((kind, status["kind"], status["code"], status["reason"]),
                             ("ERROR", "Status", 410, "Expired"))


class KubectlWatchTests(TestCase):
    timeout = 60

    async def test_kubectl_get_w(self):
        """kubectl get -w prints a row for an object created, then changed, after it started."""
        binary = kubectl()
        if binary is None:
            raise SkipTest("kubectl is not installed")
        server = await RunningControlPlane(self).start()
        home = os.path.abspath(self.mktemp())
        os.makedirs(home)
        output = Collector()
        process = reactor.spawnProcess(
            output, binary, [binary, "--kubeconfig", server.plane.pki.admin_orchconfig_path,
                             "get", "configmaps", "-w"], env={"HOME": home})
        self.addCleanup(lambda: output.ended if process.pid is None else
                        (process.signalProcess("KILL"), output.ended)[1])
        cache = server.plane.catalog.caches["/registry/configmaps/"]
        while not cache.watchers:
            await sleep(0.05)
        await server.call("POST", CM, {"metadata": {"name": "seen-by-kubectl"},
                                       "data": {"a": "1", "b": "2"}})
        created = await output.wait_for_row(b"seen-by-kubectl")
        self.assertEqual(output.rows()[0], ["NAME", "DATA", "AGE"])
        self.assertEqual(created[:2], ["seen-by-kubectl", "2"])
        await server.call("PATCH", CM + "/seen-by-kubectl", {"data": {"c": "3"}},
                          headers={b"content-type": [b"application/merge-patch+json"]})
        changed = await output.wait_for_row(b"seen-by-kubectl", after=created)
        self.assertEqual(changed[:2], ["seen-by-kubectl", "3"])
        self.assertFalse(output.ended.called, "kubectl get -w stopped watching")


class Collector(protocol.ProcessProtocol):
    def __init__(self):
        self.data = b""
        self.ended = defer.Deferred()
        self._waiting = []

    def outReceived(self, data):
        self.data += data
        self._check()

    errReceived = outReceived

    def _check(self):
        for needle, d in list(self._waiting):
            if needle in self.data:
                self._waiting.remove((needle, d))
                d.callback(None)

    def wait_for(self, needle):
        d = defer.Deferred()
        self._waiting.append((needle, d))
        self._check()
        return d

    def rows(self):
        """The whole lines printed so far, split into columns."""
        return [line.split() for line in self.data.decode().split("\n")[:-1]]

    async def wait_for_row(self, name, after=None, seconds=30):
        """The first whole row for C{name} printed after row C{after}; fails after C{seconds}."""
        for _ in range(int(seconds / 0.05)):
            rows = [row for row in self.rows() if row[:1] == [name.decode()]]
            if after in rows:
                rows = rows[rows.index(after) + 1:]
            elif after is not None:
                rows = []
            if rows:
                return rows[0]
            await sleep(0.05)
        raise AssertionError(f"no row for {name!r} after {after!r} in {self.data!r}")

    def processEnded(self, reason):
        self.ended.callback(None)


@implementer(IHandshakeListener)
class StuckReader(protocol.Protocol):
    """Sends a watch request once TLS is up, then never reads again."""

    def __init__(self, path, host):
        self.request = (f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").encode()
        self.lost = defer.Deferred()

    def handshakeCompleted(self):
        self.transport.write(self.request)
        self.transport.pauseProducing()

    def connectionLost(self, reason):
        self.lost.callback(None)


class SlowReaderTests(TestCase):
    timeout = 90

    async def test_blocked_watcher_does_not_delay_another(self):
        """
        One client that stops reading is dropped; another gets every event meanwhile.

        The kernel's socket buffers absorb a few MB before the server's
        connection pauses, so the bound is lowered to reach it quickly.
        """
        self.patch(watchcache, "MAX_QUEUED_BYTES", 512 * 1024)
        server = await RunningControlPlane(self).start()
        cache = server.plane.catalog.caches["/registry/configmaps/"]
        config = load_orchconfig(server.plane.pki.admin_orchconfig_path)
        creator = policy_from_orchconfig(config).creatorForNetloc(b"127.0.0.1", server.plane.port)
        endpoint = SSL4ClientEndpoint(reactor, "127.0.0.1", server.plane.port.getHost().port,
                                      creator)
        stuck = StuckReader(CM + "?watch=true", "127.0.0.1")
        await endpoint.connect(protocol.Factory.forProtocol(lambda: stuck))
        self.addCleanup(lambda: (stuck.transport.abortConnection(), stuck.lost)[1])
        response = await server.client.get(server.url + CM + "?watch=true")
        received = []
        collecting = response.collect(lambda data: received.append(data))
        collecting.addErrback(lambda _: None)
        while len(cache.watchers) < 2:
            await sleep(0.05)
        payload = "x" * 10_000
        total = 1500

        async def create(i):
            code, _ = await server.call("POST", CM, {"metadata": {"name": f"e{i:04d}"},
                                                    "data": {"k": payload}})
            self.assertEqual(code, 201)

        for start in range(0, total, 10):
            await defer.gatherResults([defer.Deferred.fromCoroutine(create(i))
                                       for i in range(start, start + 10)])
        def added():
            # The root-CA publisher's map in the namespace is not one of ours.
            return sum(1 for line in b"".join(received).splitlines()
                       if b'"ADDED"' in line and b"orch-root-ca.crt" not in line)

        for _ in range(200):
            if added() >= total:
                break
            await sleep(0.05)
        self.assertEqual(added(), total)
        # The stuck client was dropped (it cannot notice: it does not read).
        self.assertEqual(len(cache.watchers), 1)
        self.assertFalse(next(iter(cache.watchers)).paused)
