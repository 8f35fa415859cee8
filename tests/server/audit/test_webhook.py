"""The audit webhook backend: batches by size and by wait, retries with backoff, drains on stop."""

import orjson
from treq.testing import StubTreq
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.resource import Resource
from zope.interface.verify import verifyObject

from orchd.server.audit.interfaces import IAuditSink
from orchd.server.audit.record import Body
from orchd.server.audit.webhook import WebhookBackend

URL = "https://audit.example/events"


class Receiver(Resource):
    """A fake audit receiver: records each EventList; answers with C{codes} in turn, then 200."""

    isLeaf = True

    def __init__(self, codes=()):
        super().__init__()
        self.codes = list(codes)
        self.batches = []
        self.attempts = 0

    def render_POST(self, request):
        self.attempts += 1
        code = self.codes.pop(0) if self.codes else 200
        request.setResponseCode(code)
        if code == 200:
            self.batches.append(orjson.loads(request.content.read()))
        return b"{}"


def event(n):
    return {"kind": "Event", "auditID": f"id-{n}", "stage": "ResponseComplete"}


class WebhookTests(SynchronousTestCase):
    def backend(self, codes=(), **kwargs):
        self.receiver = Receiver(codes)
        self.stub = StubTreq(self.receiver)
        self.clock = Clock()
        backend = WebhookBackend(self.stub, URL, self.clock, **kwargs)
        backend.startService()
        return backend

    def flush(self):
        self.stub.flush()

    def ids(self):
        return [[e["auditID"] for e in batch["items"]] for batch in self.receiver.batches]

    def test_full_batch_sent_at_once(self):
        """A batch leaves as soon as it holds max-size events, as an EventList."""
        backend = self.backend(max_size=3)
        verifyObject(IAuditSink, backend)
        for n in range(3):
            backend.write(event(n))
        self.flush()
        self.assertEqual(self.ids(), [["id-0", "id-1", "id-2"]])
        batch = self.receiver.batches[0]
        self.assertEqual((batch["kind"], batch["apiVersion"]), ("EventList", "audit.k8s.io/v1"))
        self.assertEqual(backend.sent, 3)

    def test_partial_batch_after_max_wait(self):
        """Fewer events leave once the first has waited max-wait."""
        backend = self.backend(max_size=10, max_wait=30)
        backend.write(event(0))
        self.clock.advance(29)
        self.flush()
        self.assertEqual(self.ids(), [])
        backend.write(event(1))
        self.clock.advance(1)
        self.flush()
        self.assertEqual(self.ids(), [["id-0", "id-1"]])

    def test_bodies_encoded(self):
        """Request and response bodies are sent as objects."""
        backend = self.backend(max_size=1)
        backend.write({**event(0), "requestObject": Body(b'{"a": 1}', b"application/json")})
        self.flush()
        self.assertEqual(self.receiver.batches[0]["items"][0]["requestObject"], {"a": 1})

    def test_retry_with_backoff(self):
        """A 500 or 429 is retried after the initial backoff, then 1.5 times longer."""
        backend = self.backend(codes=(500, 429), max_size=1, initial_backoff=10)
        backend.write(event(0))
        self.flush()
        self.assertEqual(self.receiver.attempts, 1)
        self.clock.advance(9.9)
        self.flush()
        self.assertEqual(self.receiver.attempts, 1)
        self.clock.advance(0.1)
        self.flush()
        self.assertEqual(self.receiver.attempts, 2)
        self.clock.advance(14.9)
        self.flush()
        self.assertEqual(self.receiver.attempts, 2)
        self.clock.advance(0.1)
        self.flush()
        self.assertEqual(self.ids(), [["id-0"]])

    def test_gives_up_after_five_tries(self):
        """After five failed tries the batch is dropped and counted; later batches go on."""
        backend = self.backend(codes=(503,) * 5, max_size=1, initial_backoff=1)
        backend.write(event(0))
        for _ in range(20):
            self.clock.advance(1)
            self.flush()
        self.assertEqual(self.receiver.attempts, 5)
        self.assertEqual(backend.dropped, 1)
        backend.write(event(1))
        self.flush()
        self.assertEqual(self.ids(), [["id-1"]])

    def test_client_error_not_retried(self):
        """A 400 is not retried: the same batch would be refused again."""
        backend = self.backend(codes=(400,), max_size=1)
        backend.write(event(0))
        self.flush()
        self.clock.advance(100)
        self.flush()
        self.assertEqual((self.receiver.attempts, backend.dropped), (1, 1))

    def test_buffer_full_drops(self):
        """Past the buffer, events are dropped and counted while a batch is in flight."""
        backend = self.backend(codes=(500,), max_size=1, buffer_size=2, initial_backoff=5)
        for n in range(4):
            backend.write(event(n))
        self.flush()
        self.assertEqual(backend.dropped, 1)   # one in flight, two buffered, one dropped

    def test_stop_sends_buffered(self):
        """A clean stop sends what is buffered without waiting for max-wait."""
        backend = self.backend(max_size=2, max_wait=30)
        for n in range(3):
            backend.write(event(n))
        self.flush()
        d = backend.stopService()
        self.flush()
        self.successResultOf(d)
        self.assertEqual(self.ids(), [["id-0", "id-1"], ["id-2"]])
        backend.write(event(9))
        self.assertEqual(backend.dropped, 1)

    def test_stop_cuts_backoff_short(self):
        """A batch waiting to retry gets one last try at stop instead of waiting."""
        backend = self.backend(codes=(500,), max_size=1, initial_backoff=60)
        backend.write(event(0))
        self.flush()
        d = backend.stopService()
        self.flush()
        self.successResultOf(d)
        self.assertEqual(self.ids(), [["id-0"]])
