# -*- test-case-name: tests.testing.test_threaded -*-
"""
The global reactor, run in a daemon thread for blocking callers.

Plain scripts and pytest tests call the official client or kopf from their
own thread; the control planes they start then live on the global reactor,
which this module starts once, in a daemon thread, without signal handlers
(they belong to the main thread). Every L{orchd.testing.ControlPlane} of the
process shares it. Under trial the reactor already runs in the main thread:
L{orchd.testing.start} uses it there and this module is not involved.
"""

import threading

from twisted.internet.threads import blockingCallFromThread
from twisted.python import threadable

_lock = threading.Lock()
_thread = None


class ReactorThreadError(RuntimeError):
    """A blocking call was made from the reactor's own thread (it would deadlock)."""


def on_reactor_thread():
    """True when the caller is the thread running the global reactor."""
    return threadable.isInIOThread()


def ensure_running():
    """
    Start the global reactor in a daemon thread unless it already runs.

    @raise ReactorThreadError: from the reactor's thread (e.g. in a trial
        test, which must use L{orchd.testing.start} instead).
    """
    global _thread
    from twisted.internet import reactor
    if on_reactor_thread() and reactor.running:
        raise ReactorThreadError(
            "blocking ControlPlane calls cannot run on the reactor's thread; "
            "under trial use 'await orchd.testing.start(self)'")
    with _lock:
        if _thread is None:
            if reactor.running:
                raise ReactorThreadError("the global reactor already runs in another thread "
                                         "that orchd.testing did not start")
            _thread = threading.Thread(target=reactor.run,
                                       kwargs={"installSignalHandlers": False},
                                       name="orchd-reactor", daemon=True)
            _thread.start()
    # Queued calls run once the reactor is up: this returns when it is.
    blockingCallFromThread(reactor, lambda: None)
    return reactor


def call(function, *args, **kwargs):
    """Run C{function} on the reactor thread and wait for its (Deferred) result."""
    reactor = ensure_running()
    return blockingCallFromThread(reactor, function, *args, **kwargs)
