# -*- test-case-name: tests.orchlet.test_heartbeat -*-
"""
The node's heartbeat: its Lease in C{orch-node-lease}, renewed every 10 s.

The node lifecycle controller marks a node unreachable when neither its
Lease nor its status was renewed within the grace period (40 s), so the
renewal must keep going through API server hiccups: a failed attempt is
retried after 0.2 s, doubling up to 7 s (upstream's lease controller
numbers), and a success returns to the 10 s rhythm, each wait up to 4%
longer at random as upstream's: renewals counted from the end of the last
one would otherwise keep in step the nodes one busy moment of the API
server answered together, and thousands of nodes would come in bursts.
Everything is timed with the reactor's clock, so tests drive it with
C{task.Clock}. The waits of every node in a process share one reactor
timer (L{shared_timers}), and a node keeps its last Lease as the bytes
the server sent: thousands of simulated nodes each kept a DelayedCall and
a decoded Lease for 10 s, long enough for the garbage collector to walk
them in its old generation.
"""

import collections
import random

import orjson
from twisted.internet.defer import Deferred, DeferredLock
from twisted.logger import Logger

from orchd.auth.authz.node import NODE_LEASE_NAMESPACE
from orchd.timing.seconds import micro_time
from orchd.timing.timers import shared_timers

LEASE_DURATION = 40
#: Upstream renews every 0.25 x leaseDurationSeconds.
RENEW_INTERVAL = LEASE_DURATION * 0.25
#: Upstream's jitter factor of the renewal interval.
RENEW_JITTER = 0.04
BACKOFF_START = 0.2
BACKOFF_CAP = 7.0
LEASES = f"/apis/coordination.orch.io/v1/namespaces/{NODE_LEASE_NAMESPACE}/leases"


class Backoff:
    """Delays after consecutive failures: C{start}, doubling, at most C{cap}."""

    def __init__(self, start=BACKOFF_START, cap=BACKOFF_CAP):
        self.start = start
        self.cap = cap
        self._next = start

    def next(self):
        delay = self._next
        self._next = min(self._next * 2, self.cap)
        return delay

    def reset(self):
        self._next = self.start


class Repeater:
    """
    Run C{async step()} every C{interval} seconds after success, with
    L{Backoff} after failure (an exception or a false result).

    @param jitter: each wait after a success is up to this fraction of
        C{interval} longer, at random (C{random()} in [0, 1)).
    """

    log = Logger()

    def __init__(self, clock, step, interval, what, backoff=None, jitter=0.0,
                 random=random.random):
        self.clock = clock
        self.step = step
        self.interval = interval
        self.what = what
        self.backoff = backoff or Backoff()
        self.jitter = jitter
        self._random = random
        #: The last delays scheduled, for tests and logs.
        self.delays = collections.deque(maxlen=64)
        self._timers = shared_timers(clock)
        self._wake = self._fire         # made once: its key in the shared timers
        self._running = False
        self._current = None

    def start(self, delay=0):
        self._running = True
        self._schedule(delay)

    def _schedule(self, delay):
        if self._running:
            self.delays.append(delay)
            self._timers.set(self._wake, delay)

    def _fire(self):
        self._current = Deferred.fromCoroutine(self._attempt())

    def poke(self):
        """Run the step now instead of at its scheduled time (if it is not running)."""
        if self._timers.when(self._wake) is not None:
            self._timers.cancel(self._wake)
            self.delays.append(0)
            self._fire()

    async def _attempt(self):
        try:
            ok = await self.step()
        except Exception as e:
            self.log.warn("{what} failed: {error}", what=self.what, error=e)
            ok = False
        self._current = None
        if ok:
            self.backoff.reset()
            self._schedule(self.interval * (1 + self.jitter * self._random())
                           if self.jitter else self.interval)
        else:
            self._schedule(self.backoff.next())

    def stop(self):
        """Stop; a Deferred that fires once an attempt under way has ended."""
        self._running = False
        self._timers.cancel(self._wake)
        current, done = self._current, Deferred()
        if current is None:
            done.callback(None)
        else:
            current.addBoth(lambda _: done.callback(None))
        return done


class LeaseRenewer:
    """
    Create the node's Lease, then renew it: one L{Repeater} step per attempt.

    @param api: an L{orchd.orchlet.apiclient.APIClient} (or anything with its C{request}).
    @param owner: the Node object, for C{ownerReferences} (its uid matters).
    """

    log = Logger()

    def __init__(self, clock, api, node_name, owner=None, interval=RENEW_INTERVAL,
                 duration=LEASE_DURATION, observe=None, random=random.random):
        self.clock = clock
        #: C{observe(seconds)} after each successful update: the renewal's latency.
        self.observe = observe
        self.api = api
        self.node_name = node_name
        self.owner = owner
        self.duration = duration
        #: The Lease as last read or written (JSON bytes), or None.
        self.lease = None
        self.renewals = 0
        self.repeater = Repeater(clock, self.renew, interval, "Renewing the node lease",
                                 jitter=RENEW_JITTER, random=random)
        # One renewal at a time: two at once would race to create the Lease.
        self._lock = DeferredLock()

    def start(self, delay=0):
        self.repeater.start(delay)

    def stop(self):
        return self.repeater.stop()

    def _spec(self):
        return {"holderIdentity": self.node_name, "leaseDurationSeconds": self.duration,
                "renewTime": micro_time(self.clock.seconds())}

    def _new_lease(self):
        meta = {"name": self.node_name, "namespace": NODE_LEASE_NAMESPACE}
        if self.owner is not None and self.owner.get("metadata", {}).get("uid"):
            meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node",
                                        "name": self.node_name,
                                        "uid": self.owner["metadata"]["uid"]}]
        return {"apiVersion": "coordination.orch.io/v1", "kind": "Lease", "metadata": meta,
                "spec": self._spec()}

    async def renew(self):
        """One attempt (after any under way); True on success."""
        await self._lock.acquire()
        try:
            return await self._renew()
        finally:
            self._lock.release()

    async def _renew(self):
        path = f"{LEASES}/{self.node_name}"
        if self.lease is None:
            code, body = await self.api.request("GET", path)
            if code == 404:
                code, body = await self.api.request("POST", LEASES, self._new_lease())
                if code != 201:
                    self.log.warn("Cannot create the node lease: {code} {body}", code=code,
                                  body=body)
                    return False
            elif code != 200:
                self.log.warn("Cannot read the node lease: {code} {body}", code=code, body=body)
                return False
            else:
                body = await self._update(path, body)
                if body is None:
                    return False
        else:
            body = await self._update(path, orjson.loads(self.lease))
            if body is None:
                return False
        self.lease = orjson.dumps(body)
        self.renewals += 1
        return True

    async def _update(self, path, lease):
        lease = dict(lease, spec=dict(lease.get("spec") or {}, **self._spec()))
        if not lease["metadata"].get("ownerReferences"):
            owners = self._new_lease()["metadata"].get("ownerReferences")
            if owners:
                lease["metadata"] = dict(lease["metadata"], ownerReferences=owners)
        began = self.clock.seconds()
        code, body = await self.api.request("PUT", path, lease)
        if code == 200:
            if self.observe is not None:
                self.observe(self.clock.seconds() - began)
            return body
        self.log.warn("Cannot renew the node lease: {code} {body}", code=code, body=body)
        if code in (404, 409):
            self.lease = None           # read it again (or create it) on the next attempt
        return None
