# -*- test-case-name: tests.server.test_bodies,tests.integration.test_hostile_bodies -*-
"""
One worker thread for request work too heavy for the reactor thread.

Decoding a large body (a few MB of YAML take a second of pure Python)
runs here, so the reactor goes on serving everyone else. One thread, not
the reactor's pool of ten: Python's lock is shared fairly between the
threads that want it, so ten busy decoders would leave the reactor a
tenth of the CPU, where one leaves it half; other decodes wait their turn.
"""

from twisted.application.service import Service
from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool


class Offload(Service):
    """
    C{offload(f, *args)}: a Deferred of C{f(*args)} run on the worker thread.
    """

    def __init__(self, reactor, name="orchd-decode"):
        self._reactor = reactor
        self._pool = ThreadPool(1, 1, name)

    def startService(self):
        super().startService()
        self._pool.start()

    def stopService(self):
        super().stopService()
        self._pool.stop()

    def __call__(self, f, *args):
        return deferToThreadPool(self._reactor, self._pool, f, *args)
