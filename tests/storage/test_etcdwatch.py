"""The shared etcd Watch stream: creating, resuming after a break, cancelling."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.storage.etcdgrpc import messages
from orchd.storage.etcdwatch import RETRY_DELAYS, EtcdWatch, WatchMux


class FakeStream:
    def __init__(self, index, on_response, on_end):
        self.index, self.where = index, f"member{index}"
        self.on_response, self.on_end = on_response, on_end
        self.sent = []

    def send(self, request):
        self.sent.append(request)

    def created(self):
        return [(r.create_request.watch_id, r.create_request.start_revision)
                for r in self.sent if r.HasField("create_request")]


class FakeClient:
    endpoints = ["a", "b"]

    def __init__(self):
        self.streams = []
        self.current = 0

    def watch_stream(self, on_response, on_end):
        self.streams.append(FakeStream(self.current, on_response, on_end))
        return self.streams[-1]

    def _next(self, failed):
        self.current = (failed + 1) % 2


class FakeStore:
    def __init__(self):
        self.reactor = Clock()
        self.client = FakeClient()
        self.mux = WatchMux(self)

    def encode_key(self, key):
        return key.encode()

    def decode_key(self, data):
        return data.decode()

    def forget(self, watch):
        pass


def answer(watch_id, created=False, events=()):
    message = messages.WatchResponse(watch_id=watch_id, created=created)
    message.header.revision = 10
    for key, revision in events:
        event = message.events.add()
        event.kv.key, event.kv.value = key.encode(), b"v"
        event.kv.create_revision = event.kv.mod_revision = revision
    return message


class WatchMuxTests(SynchronousTestCase):
    def setUp(self):
        self.store = FakeStore()
        self.seen = []

    def watch(self, prefix):
        watch = EtcdWatch(self.store, prefix, 0, self.seen.extend, self.fail)
        started = watch.start()
        return watch, started

    def test_watches_share_one_stream(self):
        """Each watch is created on the one stream with its own id; answers go by id."""
        a, started_a = self.watch("/a/")
        b, started_b = self.watch("/b/")
        [stream] = self.store.client.streams
        self.assertEqual(stream.created(), [(a.id, 0), (b.id, 0)])
        stream.on_response(stream, answer(b.id, created=True))
        self.successResultOf(started_b)
        self.assertNoResult(started_a)
        stream.on_response(stream, answer(b.id, events=[("/b/x", 11)]))
        self.assertEqual([(e.key, e.revision) for e in self.seen], [("/b/x", 11)])
        b.stop()
        self.assertEqual(stream.sent[-1].cancel_request.watch_id, b.id)

    def test_resume_on_the_next_member(self):
        """After a break, every watch is created again once, from its position, elsewhere."""
        a, started = self.watch("/a/")
        first = self.store.client.streams[0]
        first.on_response(first, answer(a.id, created=True))
        first.on_response(first, answer(a.id, events=[("/a/x", 12)]))
        first.on_end(first, ConnectionError("gone"))
        # A watch added while the stream is being reopened waits for it.
        b, _ = self.watch("/b/")
        self.assertEqual(len(self.store.client.streams), 1)
        self.store.reactor.advance(RETRY_DELAYS[0])
        [_, second] = self.store.client.streams
        self.assertEqual(second.index, 1)
        self.assertEqual(second.created(), [(a.id, 13), (b.id, 0)])
        # Answers still arriving from the old stream are ignored.
        first.on_response(first, answer(a.id, events=[("/a/y", 14)]))
        second.on_response(second, answer(a.id, events=[("/a/x", 12), ("/a/y", 14)]))
        self.assertEqual([e.revision for e in self.seen], [12, 14])
        self.successResultOf(started)
