"""Connections of L{orchd.tls.listen}: their writes leave at the end of the reactor's turn."""

from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock, deferLater
from twisted.internet.testing import MemoryReactor
from twisted.trial.unittest import SynchronousTestCase, TestCase

from orchd.tls.listen import _TurnEnd, listen_tcp, listen_tls

#: More than loopback sockets hold between them (their buffers grow to some MiB).
BIG = 32 * 1024 * 1024


class Writer(Protocol):
    """Hands its transport to its test once connected."""

    def __init__(self, test):
        self.test = test

    def connectionMade(self):
        self.test.server = self.transport
        self.test.on_connection(self.transport)


class Reader(Protocol):
    """Gathers what arrives; C{done} fires with it when the connection closes."""

    def __init__(self):
        self.data = []
        self.done = Deferred()

    def dataReceived(self, data):
        self.data.append(data)

    def connectionLost(self, reason):
        self.done.callback(b"".join(self.data))


class TurnEndWriteTests(TestCase):
    def setUp(self):
        self.server = None
        self.watched = []
        factory = Factory.forProtocol(lambda: Writer(self))
        self.port = listen_tcp(reactor, 0, factory, interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)

    def connect(self):
        reader = Reader()
        endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", self.port.getHost().port)
        return connectProtocol(endpoint, reader).addCallback(lambda _: reader)

    def note_watched(self, transport):
        self.watched.append(transport in reactor.getWriters())

    async def test_write_sent_at_turn_end_unwatched(self):
        """A write the socket takes whole is sent at the turn's end; the reactor never watches."""
        def on_connection(transport):
            transport.write(b"hello, ")
            transport.write(b"world")
            self.note_watched(transport)
            reactor.callLater(0, self.note_watched, transport)
            reactor.callLater(0.05, transport.loseConnection)
        self.on_connection = on_connection
        reader = await self.connect()
        self.assertEqual(await reader.done, b"hello, world")
        self.assertEqual(self.watched, [False, False])

    async def test_big_write_watched_until_read(self):
        """What the socket cannot take at once is left to the reactor, and arrives whole."""
        payload = bytes(range(256)) * (BIG // 256)
        self.on_connection = lambda transport: transport.write(payload)
        reader = await self.connect()
        reader.transport.pauseProducing()
        await deferLater(reactor, 0.1, lambda: None)
        self.assertIn(self.server, reactor.getWriters())
        reader.transport.resumeProducing()
        while sum(map(len, reader.data)) < len(payload):
            await deferLater(reactor, 0.01, lambda: None)
        self.assertNotIn(self.server, reactor.getWriters())
        self.server.loseConnection()
        self.assertEqual(await reader.done, payload)

    async def received(self, data, end):
        """What the client gets when the server writes C{data}, then calls C{end} at once."""
        def on_connection(transport):
            transport.write(data)
            getattr(transport, end)()
        self.on_connection = on_connection
        reader = await self.connect()
        return await reader.done

    async def test_close_after_write(self):
        """A connection closed in the turn it was written to sends everything first."""
        self.assertEqual(await self.received(b"last words", "loseConnection"), b"last words")

    async def test_abort_drops_what_was_written(self):
        """An aborted connection sends nothing it was given in that turn, and closes."""
        self.assertEqual(await self.received(b"never sent", "abortConnection"), b"")


class Sent:
    """A connection as the turn's end sees it, noting when it is sent."""

    def __init__(self, sent):
        self.sent = sent

    def send_written(self):
        self.sent.append(self)


class Broken:
    def send_written(self):
        raise RuntimeError("a bug")


class TurnEndTests(SynchronousTestCase):
    def test_one_call_per_turn(self):
        """The connections written to in a turn are sent by one call at its end, in order."""
        clock, sent = Clock(), []
        turn_end = _TurnEnd(clock)
        connections = [Sent(sent) for _ in range(3)]
        for connection in connections:
            turn_end.add(connection)
        self.assertEqual(len(clock.getDelayedCalls()), 1)
        clock.advance(0)
        self.assertEqual(sent, connections)
        turn_end.add(connections[0])
        self.assertEqual(len(clock.getDelayedCalls()), 1)

    def test_failure_leaves_others_sent(self):
        """A connection that fails to send is logged; the turn's others are still sent."""
        clock, sent = Clock(), []
        turn_end = _TurnEnd(clock)
        after = Sent(sent)
        turn_end.add(Broken())
        turn_end.add(after)
        clock.advance(0)
        self.assertEqual(sent, [after])
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)


class OtherReactorTests(SynchronousTestCase):
    def test_listens_as_listen_ssl(self):
        """On a reactor that is not a select-style one, listen_tls is listenSSL."""
        memory = MemoryReactor()
        factory, options = Factory(), object()
        listen_tls(memory, 6443, factory, options, backlog=7, interface="127.0.0.1")
        self.assertEqual(memory.sslServers, [(6443, factory, options, 7, "127.0.0.1")])
