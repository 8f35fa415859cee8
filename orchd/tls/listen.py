# -*- test-case-name: tests.tls.test_listen -*-
"""
Listening for TLS connections whose writes leave at the end of the
reactor's turn.

twisted's TCP transport keeps what is written and asks the reactor to say
when the socket can take it: two C{epoll_ctl} calls for every response
(one to ask, one to stop asking once it is sent), plus a turn of the loop
between. A connection of L{listen_tls} sends what it was given in a turn
once that turn's work is done, with one call for all the connections
written to in it (C{callLater(0)}): the writes of a turn still leave
together, and the reactor is asked to watch the socket only when it could
not take everything (a slow reader), as before. Reactors that are not
twisted's own select-style ones (a test's C{MemoryReactor}) listen as
C{listenSSL} does.
"""

from twisted.internet import tcp
from twisted.internet.abstract import FileDescriptor
from twisted.internet.posixbase import PosixReactorBase
from twisted.logger import Logger
from twisted.protocols.tls import TLSMemoryBIOFactory

log = Logger()


def listen_tls(reactor, port, factory, options, backlog=50, interface=""):
    """
    C{reactor.listenSSL(port, factory, options, backlog, interface)}, its
    connections sending at the end of the turn.

    @return: the listening port.
    @raise twisted.internet.error.CannotListenError: when the port is taken.
    """
    if not isinstance(reactor, PosixReactorBase):
        return reactor.listenSSL(port, factory, options, backlog=backlog, interface=interface)
    listening = listen_tcp(reactor, port, TLSMemoryBIOFactory(options, False, factory),
                           backlog, interface)
    listening._type = "TLS"     # as listenSSL names it in the log
    return listening


def listen_tcp(reactor, port, factory, backlog=50, interface=""):
    """C{reactor.listenTCP} with connections that send at the end of the turn."""
    listening = _Port(port, factory, backlog, interface, reactor)
    listening.startListening()
    return listening


class _TurnEnd:
    """The connections written to in this turn of the reactor, sent at its end."""

    def __init__(self, reactor):
        self._reactor = reactor
        self._written = []
        self._call = None

    def add(self, connection):
        self._written.append(connection)
        if self._call is None:
            self._call = self._reactor.callLater(0, self._send)

    def _send(self):
        self._call = None
        written, self._written = self._written, []
        for connection in written:
            try:
                connection.send_written()
            except Exception:
                # One connection's failure must not leave the others unsent.
                log.failure("Sending a connection's writes failed; the turn's others go on")


class _Connection(tcp.Server):
    """
    A server connection whose C{startWriting} (called by every write)
    waits for the turn's end rather than for the reactor.

    @ivar _due: whether it is among the turn's written connections.
    @ivar _watched: whether the reactor watches it for writing (what was
        written did not all fit).
    @ivar _sent: whether C{doWrite} sent everything (it then calls
        L{stopWriting}).
    """

    _due = _watched = _sent = False

    def startWriting(self):
        if not self._due and not self._watched:
            self._due = True
            self.server.turn_end.add(self)

    def stopWriting(self):
        self._watched = False
        self._sent = True
        FileDescriptor.stopWriting(self)

    def send_written(self):
        """Send what was written; have the reactor watch for the rest, or an error."""
        self._due = False
        # _aborting: twisted's abortConnection, which drops what is unsent.
        if self.disconnected or self._aborting or self._watched:
            return
        self._sent = False
        try:
            trouble = self.doWrite()
        except Exception:
            log.failure("Sending a connection's writes failed; the reactor takes it over")
            trouble = True
        if trouble is not None or not self._sent:
            # Not all sent, or the connection failed or is to close: the
            # reactor's doWrite finishes it as it would have (a failed or
            # closing connection answers its next doWrite the same way).
            self._watched = True
            FileDescriptor.startWriting(self)


class _Port(tcp.Port):
    transport = _Connection

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.turn_end = _TurnEnd(self.reactor)
