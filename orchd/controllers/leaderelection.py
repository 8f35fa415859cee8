# -*- test-case-name: tests.controllers.test_leaderelection -*-
"""
Leader election: the controllers run in one process at a time.

Several API servers can share one store (etcd); each would run every
controller, and two garbage collectors or two token controllers racing on
the same objects do harm. As upstream's client-go C{leaderelection}, the
processes compete for one C{coordination.orch.io/v1} Lease
(C{orch-system/orch-controller-manager}); only its holder runs them.

The rules are upstream's:

  - a candidate takes the Lease when it is missing, held by nobody, held
    by itself, or when its C{spec} has not changed for
    C{leaseDurationSeconds} I{as this candidate observed it}: the expiry
    is measured on the local clock from the moment the change was seen,
    never from the remote C{renewTime}, so clocks need not agree;
  - every write is a compare-and-swap on C{resourceVersion} (create when
    missing): of two candidates at most one wins, the other gets 409;
  - the leader renews every retry period and steps down when no renewal
    has succeeded for the renew deadline, counted from the start of the
    last successful attempt. Since the deadline is shorter than the lease
    duration, a leader that cannot renew stops before anyone can take over;
  - a graceful stop releases the Lease (empty holder, one-second duration)
    so another candidate takes it on its next attempt.

Unlike upstream, which exits the process when it loses the Lease, the
owner of a L{LeaderElector} stops its controllers and keeps campaigning.
There is no jitter: attempts are every retry period exactly.

Bound on replacing a killed leader: a follower sees the last renewal at
most one retry period after it was written, takes over once the lease
duration has passed since then, on an attempt (at most one more period,
unless the duration is a multiple of it). With orchd's defaults (lease
12 s, renew deadline 8 s, retry 2 s) that is within 14 s of the leader's
last renewal, so within 15 s of its death.
"""

import socket
import uuid

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.logger import Logger

from orchd.api.errors import StatusError
from orchd.timing.seconds import micro_time

LEASE_NAME = "orch-controller-manager"
LEASE_NAMESPACE = "orch-system"
LEASE_DURATION = 12.0
RENEW_DEADLINE = 8.0
RETRY_PERIOD = 2.0


def default_identity():
    """C{<hostname>_<uuid4>}, as upstream: unique per process, readable per host."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class LeaderElector:
    """
    Campaign for, hold and release one Lease.

    @param catalog: the L{orchd.registry.catalog.Catalog} (writes go through
        the C{leases} resource, as the control plane's own user).
    @param clock: an C{IReactorTime}.
    @param identity: this candidate's holder identity; L{default_identity} if None.
    @param on_started_leading: called with no argument on becoming leader.
    @param on_stopped_leading: called with no argument on stepping down (lost
        renewals, or L{stop}); it may return a Deferred, which L{stop} awaits.
    @param sole: the store is this process's alone (LevelDB holds a lock on
        it): a Lease held by another identity belongs to a dead predecessor
        and is taken at once rather than after it expires, and a renewal
        that comes late (a busy reactor) does not make this process step down.

    @ivar leading: whether this candidate leads now.
    @ivar leader: the holder identity last read from the Lease (None: nobody).
    @ivar settled: fires once, with C{leading}, when this candidate first
        becomes leader or first sees another holder with a valid Lease.
    """

    log = Logger()

    def __init__(self, catalog, clock, identity=None, name=LEASE_NAME,
                 namespace=LEASE_NAMESPACE, lease_duration=LEASE_DURATION,
                 renew_deadline=RENEW_DEADLINE, retry_period=RETRY_PERIOD,
                 on_started_leading=None, on_stopped_leading=None, sole=False):
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("leader election needs lease duration > renew deadline > "
                             "retry period > 0")
        self.identity = identity or default_identity()
        self.name = name
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_started_leading = on_started_leading or (lambda: None)
        self.on_stopped_leading = on_stopped_leading or (lambda: None)
        self.sole = sole
        self._clock = clock
        self._leases = catalog.resource("coordination.orch.io", "leases")
        self._ctx = catalog.system_context(namespace)
        self.leading = False
        self.leader = None
        self.settled = Deferred()
        self._lease = None              # the Lease as last read or written
        self._observed_spec = None
        self._observed_time = None
        self._running = False
        self._timer = None              # the next attempt
        self._deadline = None           # stepping down, unless renewed first
        self._attempt = None            # the attempt in flight

    @property
    def renewed_at(self):
        """When this candidate last saw the Lease change, or wrote it (None: never)."""
        return self._observed_time

    # -- campaign loop ------------------------------------------------------

    def start(self):
        """Campaign: the first attempt now, then one every retry period."""
        if self._running:
            return
        self._running = True
        self._tick()

    def _tick(self):
        self._timer = None
        began = self._clock.seconds()
        self._attempt = Deferred.fromCoroutine(self._try_acquire_or_renew(began))
        self._attempt.addErrback(self._attempt_failed)
        self._attempt.addCallback(self._attempted, began)

    def _attempt_failed(self, failure):
        self.log.warn("Leader election attempt for {name} failed: {error!r}", name=self.name,
                      error=failure.value)
        return False

    def _attempted(self, ok, began):
        self._attempt = None
        if not self._running:
            return
        now = self._clock.seconds()
        if ok and (now < began + self.renew_deadline or self.sole):
            if self._deadline is not None and self._deadline.active():
                self._deadline.cancel()
            self._deadline = self._clock.callLater(began + self.renew_deadline - now,
                                                   self._renew_deadline_passed)
            if not self.leading:
                self.leading = True
                self.log.info("{identity} became leader ({name})", identity=self.identity,
                              name=self.name)
                self._call(self.on_started_leading)
                self._settle()
        elif self.leading and self.leader not in (None, self.identity):
            self.log.warn("{identity} sees {leader} holding {name}; stepping down",
                          identity=self.identity, leader=self.leader, name=self.name)
            self._step_down()
        self._timer = self._clock.callLater(self.retry_period, self._tick)

    def _renew_deadline_passed(self):
        self._deadline = None
        if self.leading and self.sole:
            # No other process can use this store: stepping down would only
            # stop and restart the controllers. Keep leading; renew when able.
            self.log.warn("{identity} could not renew {name} within {deadline}s; the store is "
                          "this process's alone, so it keeps leading",
                          identity=self.identity, name=self.name, deadline=self.renew_deadline)
            return
        if self.leading:
            self.log.warn("{identity} could not renew {name} within {deadline}s; stepping down",
                          identity=self.identity, name=self.name, deadline=self.renew_deadline)
            self._step_down()

    def _step_down(self):
        self.leading = False
        return self._call(self.on_stopped_leading)

    def _call(self, callback):
        d = maybeDeferred(callback)
        d.addErrback(lambda f: self.log.failure("Leader election callback failed", f))
        return d

    def _settle(self):
        if not self.settled.called:
            self.settled.callback(self.leading)

    # -- one attempt --------------------------------------------------------

    async def _try_acquire_or_renew(self, now):
        """One read and at most one CAS write; True when this candidate holds the Lease."""
        lease = await self._leases.find(self._ctx, self.name)
        stamp = micro_time(now)
        if lease is None:
            record = {"holderIdentity": self.identity, "acquireTime": stamp,
                      "leaseTransitions": 0}
            new = {"apiVersion": "coordination.orch.io/v1", "kind": "Lease",
                   "metadata": {"name": self.name}, "spec": self._spec(record, stamp)}
            written = await self._write(self._leases.create(self._ctx, new))
            return self._observe(written, now)
        spec = lease.get("spec") or {}
        if spec != self._observed_spec:
            self._observed_spec, self._observed_time = spec, now
        self._lease = lease
        holder = spec.get("holderIdentity") or None
        self.leader = holder
        duration = spec.get("leaseDurationSeconds") or self.lease_duration
        if (holder is not None and holder != self.identity and not self.sole
                and self._observed_time + duration > now):
            self._settle()
            return False
        record = {"holderIdentity": self.identity,
                  "acquireTime": spec.get("acquireTime") or stamp,
                  "leaseTransitions": spec.get("leaseTransitions") or 0}
        if holder != self.identity:
            record["acquireTime"] = stamp
            record["leaseTransitions"] += 1
        lease = dict(lease, spec=self._spec(record, stamp))
        written = await self._write(self._leases.update(self._ctx, self.name, lease))
        if written is not None:
            written = written[0]
        return self._observe(written, now)

    def _spec(self, record, stamp):
        return dict(record, leaseDurationSeconds=int(self.lease_duration), renewTime=stamp)

    async def _write(self, writing):
        """The written Lease, or None when another writer won (409) or it is gone (404)."""
        try:
            return await writing
        except StatusError as e:
            if e.code not in (404, 409):
                raise
            return None

    def _observe(self, written, now):
        if written is None:
            return False
        self._lease = written
        self._observed_spec, self._observed_time = written["spec"], now
        self.leader = self.identity
        return True

    # -- stopping -----------------------------------------------------------

    def stop(self, release=True):
        """
        Stop campaigning; step down if leading (awaiting C{on_stopped_leading}),
        then, with C{release}, give the Lease up so another candidate takes it
        at once. C{release=False} leaves it to expire, as a killed process would.
        """
        return Deferred.fromCoroutine(self._stop(release))

    async def _stop(self, release):
        self._running = False
        for call in (self._timer, self._deadline):
            if call is not None and call.active():
                call.cancel()
        self._timer = self._deadline = None
        if self._attempt is not None:
            # Let the attempt in flight finish (so the release sees its write),
            # but not for longer than a renewal may take.
            done = Deferred()
            timer = self._clock.callLater(self.renew_deadline, done.callback, None)
            self._attempt.addBoth(lambda _: done.called or done.callback(None))
            await done
            if timer.active():
                timer.cancel()
        if self.leading:
            await self._step_down()
        if release and self.leader == self.identity and self._lease is not None:
            await self._release()

    async def _release(self):
        stamp = micro_time(self._clock.seconds())
        spec = dict(self._lease.get("spec") or {}, holderIdentity="", leaseDurationSeconds=1,
                    acquireTime=stamp, renewTime=stamp)
        try:
            written = await self._write(
                self._leases.update(self._ctx, self.name, dict(self._lease, spec=spec)))
        except Exception as e:
            self.log.warn("Cannot release {name}: {error}", name=self.name, error=e)
            return
        if written is not None:
            self._lease = written[0]
            self.leader = None
            self.log.info("{identity} released {name}", identity=self.identity, name=self.name)
