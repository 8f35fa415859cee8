"""The pieces of orchd.testing on their own: faults, records, manifests, keys, the clock."""

import os

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.server.audit.record import Body
from orchd.server.requestinfo import parse_request_info
from orchd.testing import keys
from orchd.testing.clock import ClockedReactor
from orchd.testing.faults import Faults
from orchd.testing.manifests import load_manifests, manifest_files
from orchd.testing.requests import Request, requests_of


class FakeServer:
    """Stands for the API server: records what its resource handler served."""

    def __init__(self):
        self.served = []

    async def _serve_resource(self, request, info, user, found):
        self.served.append(info.verb)


def _info(method, path):
    return parse_request_info(method, path, {})


class FaultsTests(SynchronousTestCase):
    """L{Faults} answers matching requests with the injected status, then unwraps."""

    def serve(self, server, method, path):
        return Deferred.fromCoroutine(server._serve_resource(None, _info(method, path), None, None))

    def test_matches_then_unwraps(self):
        """A fault fires C{times} times on matching requests only, then the handler is unwrapped."""
        server = FakeServer()
        faults = Faults(server)
        faults.add("create", "configmaps", 409, times=2, namespace="a")
        self.assertIn("_serve_resource", vars(server))
        failure = self.failureResultOf(
            self.serve(server, b"POST", "/api/v1/namespaces/a/configmaps"), StatusError)
        self.assertEqual((failure.value.code, failure.value.reason), (409, "Conflict"))
        self.successResultOf(self.serve(server, b"POST", "/api/v1/namespaces/b/configmaps"))
        self.successResultOf(self.serve(server, b"GET", "/api/v1/namespaces/a/configmaps"))
        self.failureResultOf(self.serve(server, b"POST", "/api/v1/namespaces/a/configmaps"),
                             StatusError)
        self.assertNotIn("_serve_resource", vars(server))
        self.successResultOf(self.serve(server, b"POST", "/api/v1/namespaces/a/configmaps"))
        self.assertEqual(server.served, ["create", "list", "create"])

    def test_subresource_and_name(self):
        """A fault on a subresource and name leaves the object itself alone."""
        server = FakeServer()
        faults = Faults(server)
        faults.add("patch", "deployments", 500, subresource="status", name="web")
        self.successResultOf(self.serve(server, b"PATCH",
                                        "/apis/apps/v1/namespaces/a/deployments/web"))
        failure = self.failureResultOf(
            self.serve(server, b"PATCH", "/apis/apps/v1/namespaces/a/deployments/web/status"),
            StatusError)
        self.assertEqual(failure.value.code, 500)

    def test_too_many_requests_says_when_to_retry(self):
        """An injected 429 carries Retry-After, as upstream's throttling does."""
        server = FakeServer()
        Faults(server).add("list", "pods", 429)
        failure = self.failureResultOf(self.serve(server, b"GET", "/api/v1/pods"), StatusError)
        self.assertEqual(failure.value.headers, {"Retry-After": "1"})

    def test_bad_arguments(self):
        """A success code or a non-positive count is refused."""
        faults = Faults(FakeServer())
        self.assertRaises(ValueError, faults.add, "get", "pods", 201)
        self.assertRaises(ValueError, faults.add, "get", "pods", "500")
        self.assertRaises(ValueError, faults.add, "get", "pods", 500, times=0)

    def test_clear(self):
        """C{clear} drops pending faults and unwraps the handler."""
        server = FakeServer()
        faults = Faults(server)
        faults.add("get", "pods", 500)
        faults.clear()
        self.assertNotIn("_serve_resource", vars(server))


class RequestsTests(SynchronousTestCase):
    """L{requests_of} turns finished audit events into L{Request}s."""

    def test_finished_events_only(self):
        """Only ResponseComplete and Panic events count; fields come from the event."""
        events = [
            {"stage": "RequestReceived", "verb": "create", "requestURI": "/x"},
            {"stage": "ResponseComplete", "verb": "create",
             "requestURI": "/api/v1/namespaces/a/configmaps", "user": {"username": "u"},
             "objectRef": {"resource": "configmaps", "namespace": "a", "name": "c"},
             "responseStatus": {"code": 201},
             "requestObject": Body(b'{"data": {"k": "v"}}', b"application/json")},
            {"stage": "Panic", "verb": "get", "requestURI": "/healthz",
             "responseStatus": {"code": 500}},
        ]
        self.assertEqual(requests_of(events), [
            Request("create", "/api/v1/namespaces/a/configmaps", "u", 201, {"data": {"k": "v"}},
                    "configmaps", "", "a", "c"),
            Request("get", "/healthz", None, 500, None, None, "", None, None)])


class ManifestsTests(SynchronousTestCase):
    """Manifest files and folders are read in order; a missing path fails loudly."""

    def test_missing_path(self):
        """A missing path raises FileNotFoundError naming it."""
        missing = self.mktemp()
        error = self.assertRaises(FileNotFoundError, manifest_files, [missing])
        self.assertEqual(error.filename, missing)

    def test_folder_and_documents(self):
        """A folder's YAML files are read in name order, several documents and Lists each."""
        folder = self.mktemp()
        os.makedirs(folder)
        with open(os.path.join(folder, "b.yaml"), "w") as f:
            f.write("kind: B\n---\nkind: List\nitems: [{kind: C}]\n")
        with open(os.path.join(folder, "a.yml"), "w") as f:
            f.write("kind: A\n")
        with open(os.path.join(folder, "notes.txt"), "w") as f:
            f.write("kind: ignored\n")
        self.assertEqual([d["kind"] for d in load_manifests(folder)], ["A", "B", "C"])


class KeysTests(SynchronousTestCase):
    """The shared key material is made once and copied, owner-only, into each data dir."""

    def test_once_per_process(self):
        """Two seeds get the same EC keys, written 0600."""
        first, second = self.mktemp(), self.mktemp()
        keys.seed(first)
        keys.seed(second)
        self.assertIs(keys.material(), keys.material())
        for name in ("ca.key", "sa.key", "apiserver.key"):
            with open(os.path.join(first, "pki", name), "rb") as a, \
                    open(os.path.join(second, "pki", name), "rb") as b:
                self.assertEqual(a.read(), b.read())
            self.assertEqual(os.stat(os.path.join(first, "pki", name)).st_mode & 0o777, 0o600)
        sa_key = load_pem_private_key(keys.material()["sa.key"], None)
        self.assertIsInstance(sa_key, ec.EllipticCurvePrivateKey)     # tokens are ES256
        self.assertEqual(sa_key.curve.name, "secp256r1")


class ClockedReactorTests(SynchronousTestCase):
    """L{ClockedReactor}: delayed calls on the clock, the rest on the reactor."""

    def test_split(self):
        """Positive delays wait for the clock; zero delays and other calls go to the reactor."""
        real, clock = Clock(), Clock()
        real.marker = "real"
        clocked = ClockedReactor(real, clock)
        fired = []
        clocked.callLater(5, fired.append, "later")
        clocked.callLater(0, fired.append, "now")
        self.assertEqual(len(clock.getDelayedCalls()), 1)
        self.assertEqual(len(real.getDelayedCalls()), 1)
        real.advance(0)
        self.assertEqual(fired, ["now"])
        clock.advance(5)
        self.assertEqual(fired, ["now", "later"])
        self.assertEqual(clocked.seconds(), 5)
        self.assertEqual(clocked.marker, "real")
