# -*- test-case-name: tests.integration.test_etcd_servers -*-
"""
orchd on a real etcd: one API server, then two sharing one etcd.

Two servers share nothing but etcd: a write through one reaches a watch
on the other (each feeds its own watch cache from an etcd watch), and
Service cluster IPs handed out concurrently by both never collide,
because the allocator's state is etcd keys written with compare-and-swap.
"""

import json

import treq
from twisted.internet import defer
from twisted.trial.unittest import TestCase

from tests.etcdsupport import require_etcd, shared_cluster, unique_prefix
from tests.integration.support import RunningControlPlane

CM = "/api/v1/namespaces/default/configmaps"
SVC = "/api/v1/namespaces/default/services"


def on_etcd(test, prefix, **settings):
    return RunningControlPlane(test, storage_backend="etcd",
                               etcd_servers=tuple(shared_cluster().client_urls),
                               etcd_prefix=prefix, **settings)


async def watch_events(server, path, resource_version, seconds):
    """The watch events of C{path} from C{resource_version} during C{seconds}."""
    response = await server.client.get(
        server.url + path + f"?watch=1&resourceVersion={resource_version}"
        f"&timeoutSeconds={seconds}", unbuffered=True)
    body = await treq.content(response)
    return [json.loads(line) for line in body.splitlines() if line.strip()]


class OneServerTests(TestCase):
    """The API on etcd: CRUD, list, watch and the etcd readiness check."""

    timeout = 60

    async def setUp(self):
        require_etcd()
        self.server = await on_etcd(self, unique_prefix("one")).start()

    async def test_crud_list_watch(self):
        """A config map's create, get, list and watch go through etcd."""
        code, created = await self.server.call("POST", CM, {"metadata": {"name": "a"},
                                                            "data": {"k": "v"}})
        self.assertEqual(code, 201)
        code, got = await self.server.call("GET", CM + "/a")
        self.assertEqual((code, got["data"]), (200, {"k": "v"}))
        self.assertEqual(got["metadata"]["resourceVersion"],
                         created["metadata"]["resourceVersion"])
        code, listed = await self.server.call("GET", CM)
        self.assertIn("a", [item["metadata"]["name"] for item in listed["items"]])
        watching = defer.Deferred.fromCoroutine(
            watch_events(self.server, CM, listed["metadata"]["resourceVersion"], 2))
        code, _ = await self.server.call(
            "PATCH", CM + "/a", {"data": {"k": "w"}},
            headers={b"content-type": [b"application/merge-patch+json"]})
        self.assertEqual(code, 200)
        events = await watching
        self.assertEqual([(e["type"], e["object"]["data"]) for e in events],
                         [("MODIFIED", {"k": "w"})])

    async def test_readyz_has_etcd(self):
        """/readyz?verbose lists the etcd check, passing."""
        code, text = await self.server.call("GET", "/readyz?verbose")
        self.assertEqual(code, 200)
        self.assertIn("[+]etcd ok", text)


class TwoServerTests(TestCase):
    """Two API servers on one etcd."""

    timeout = 90

    async def setUp(self):
        require_etcd()
        prefix = unique_prefix("two")
        self.first = await on_etcd(self, prefix).start()
        self.second = await on_etcd(self, prefix).start()

    async def test_write_through_one_seen_by_watch_on_other(self):
        """A config map created through the first server reaches a watch on the second."""
        code, listed = await self.second.call("GET", CM)
        watching = defer.Deferred.fromCoroutine(
            watch_events(self.second, CM, listed["metadata"]["resourceVersion"], 2))
        code, created = await self.first.call("POST", CM, {"metadata": {"name": "shared"}})
        self.assertEqual(code, 201)
        events = await watching
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in events],
                         [("ADDED", "shared")])
        self.assertEqual(events[0]["object"]["metadata"]["resourceVersion"],
                         created["metadata"]["resourceVersion"])

    async def test_cluster_ips_never_collide(self):
        """Services created concurrently through both servers all get distinct cluster IPs."""
        def create(server, name):
            return defer.Deferred.fromCoroutine(server.call("POST", SVC, {
                "metadata": {"name": name},
                "spec": {"ports": [{"port": 80}]}}))

        results = await defer.gatherResults(
            [create(server, f"s{i}-{n}") for i in range(10)
             for n, server in enumerate((self.first, self.second))])
        self.assertEqual([code for code, _ in results], [201] * 20)
        ips = [body["spec"]["clusterIP"] for _, body in results]
        self.assertEqual(len(set(ips)), 20)
