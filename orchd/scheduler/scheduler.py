# -*- test-case-name: tests.scheduler.test_scheduler -*-
"""
The scheduler service: pending pods are given a node, one at a time.

It follows pods and nodes with two informers into its cache; the pods
without a node whose C{schedulerName} is its own (C{default-scheduler}, or
none) go into its queue. A decision is made on the reactor from the cache
alone (no store read), a few pods per reactor turn so requests keep being
served; the pod is assumed on its node at once and bound in the
background, many bindings in flight at a time, each a write of its own.
As upstream's C{schedule_one.go}:

  - a bound pod gets the event C{Scheduled} (C{Successfully assigned
    <ns>/<pod> to <node>});
  - a pod no node fits gets the event C{FailedScheduling} (the message cut
    at 1024 characters) and the condition C{PodScheduled=False}, reason
    C{Unschedulable}, with the whole message (written only when it
    changed), and waits in the queue for the cluster to change;
  - a binding the API refuses is C{FailedScheduling} with reason
    C{SchedulerError} and tried again after the pod's backoff;
  - a pod with PersistentVolumeClaims is bound only once its claims are
    (L{orchd.scheduler.volumebinding}: the claims waiting for their first
    consumer are bound for the chosen node first, the pod assumed there
    meanwhile); a failure there is C{SchedulerError} too.

Nodes added or changed (in what the scheduler reads), pods that leave a
node (deleted or finished), and changes of claims, volumes and storage
classes send the unschedulable pods back to be tried.
"""

import time

from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.logger import Logger

from orchd.api.errors import StatusError
from orchd.api.meta import rfc3339
from orchd.controllers.events import NORMAL, WARNING, EventRecorder
from orchd.registry.binding import set_pod_condition
from orchd.scheduler import metrics as schedmetrics
from orchd.scheduler.binder import NAME as BINDER_NAME
from orchd.scheduler.binder import DefaultBinder, scheduler_context
from orchd.scheduler.cache import NodeSpec, SchedulerCache
from orchd.scheduler.framework import FitError, Framework, NoNodesAvailable, truncate
from orchd.scheduler.nodeaffinity import NodeAffinity
from orchd.scheduler.nodeports import NodePorts
from orchd.scheduler.noderesources import NodeResourcesFit
from orchd.scheduler.nodeunschedulable import NodeUnschedulable
from orchd.scheduler.podinfo import DEFAULT_SCHEDULER, POD_SCHEDULED, PodInfo
from orchd.scheduler.queue import IN_FLIGHT, SchedulingQueue
from orchd.scheduler.selectorspread import SelectorSpread
from orchd.scheduler.tainttoleration import TaintToleration
from orchd.scheduler.volumebinding import NAME as VOLUME_BINDING
from orchd.scheduler.metrics import SCHEDULER
from orchd.scheduler.volumebinding import VolumeBinding, VolumeBindingError, VolumeCache
from orchd.storage.informer import Informer, start_all, stop_all
from orchd.storage.interfaces import DELETED

#: Bindings written at once; past it, deciding waits for one to finish.
MAX_IN_FLIGHT = 256
#: Most decisions per reactor turn before the reactor serves anything else.
PER_TURN = 128
#: Most seconds of deciding per reactor turn: a turn of the reactor may carry
#: many requests' work (a hundred simulated nodes' status writes), and the
#: scheduler gets its share of the turn, not one decision's worth.
TURN_SECONDS = 0.015
#: Events written at once: a burst of bindings records as many Scheduled
#: events, each write waiting for its durable commit; written one at a time
#: they would fill the recorder's backlog (past which events are dropped).
EVENT_WRITES = 32
UNSCHEDULABLE = "Unschedulable"
SCHEDULER_ERROR = "SchedulerError"


def default_framework(random=None, volumes=None):
    """
    Upstream's default plugins, in its order, with its weights; with
    C{volumes} (a L{VolumeCache}), VolumeBinding too.
    """
    affinity, taints, fit = NodeAffinity(), TaintToleration(), NodeResourcesFit()
    prefilters = (affinity,)
    filters = (NodeUnschedulable(), taints, affinity, NodePorts(), fit)
    if volumes is not None:
        binding = VolumeBinding(volumes)
        prefilters += (binding,)
        filters += (binding,)
    return Framework(prefilters=prefilters, filters=filters,
                     scores=(fit, SelectorSpread(), taints, affinity), random=random)


class Scheduler(Service):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}: informers read its
        watch caches, bindings and status go through its registries.
    @param clock: an C{IReactorTime}.
    @param binder: what writes bindings (L{DefaultBinder} over the catalog if None).
    @param recorder: the L{EventRecorder} (one for C{default-scheduler} if None).
    @param framework: the plugins (L{default_framework} if None).

    @ivar started: fires once both informers hold their first listing.
    @ivar synced: whether they do (the C{sched-handler-sync} readiness check).
    """

    name = "scheduler"
    log = Logger()

    def __init__(self, catalog, clock, binder=None, recorder=None, framework=None,
                 scheduler_name=DEFAULT_SCHEDULER, max_in_flight=MAX_IN_FLIGHT,
                 per_turn=PER_TURN, turn_seconds=TURN_SECONDS, timer=time.perf_counter,
                 metrics=SCHEDULER):
        self._clock = clock
        self._metrics = metrics
        self._scheduler_name = scheduler_name
        self._max_in_flight = max_in_flight
        self._per_turn = per_turn
        self._turn_seconds = turn_seconds
        self._timer = timer
        self._binder = binder or DefaultBinder(catalog)
        self._recorder = recorder or EventRecorder(catalog, clock, DEFAULT_SCHEDULER,
                                                    concurrency=EVENT_WRITES)
        #: Claims, volumes and classes (None when the API serves none).
        self.volumes = VolumeCache.for_catalog(catalog, clock, on_change=self._volumes_changed)
        self.framework = framework or default_framework(volumes=self.volumes)
        self.cache = SchedulerCache()
        self.queue = SchedulingQueue(clock, on_ready=self._wake)
        self._pods = catalog.resource("", "pods")
        self._pod_prefix = self._pods.info.key_prefix()
        self._node_prefix = catalog.resource("", "nodes").info.key_prefix()
        self._pod_informer = Informer(catalog.reads, self._pod_prefix, self._pod_changed,
                                      keep=PodInfo)
        self._node_informer = Informer(catalog.reads, self._node_prefix, self._node_changed,
                                       keep=NodeSpec)
        #: The pods waiting for this scheduler, by C{namespace/name}.
        self._pending = {}
        self._in_flight = 0
        self._turn = None
        self.started = None
        self.synced = False

    # -- service ------------------------------------------------------------

    def startService(self):
        super().startService()
        self.started = start_all([self._node_informer, self._pod_informer]
                                 + (self.volumes.informers if self.volumes else []))
        self.started.addCallbacks(self._synced, lambda f: self.log.failure(
            "The scheduler's informers failed to start", f))

    def _synced(self, _):
        self.synced = True
        self._wake()

    def stopService(self):
        stop_all([self._pod_informer, self._node_informer]
                 + (self.volumes.informers if self.volumes else []))
        self.queue.stop()
        if self._turn is not None and self._turn.active():
            self._turn.cancel()
        self._turn = None
        result = super().stopService()
        if self.volumes is not None:
            self.volumes.wake()             # a PreBind waiting ends (not running any more)
        return result

    # -- informers ----------------------------------------------------------

    def _pod_changed(self, type, obj, old):
        if type == DELETED:
            if old is None:
                return
            self._pending.pop(old.key, None)
            self.queue.delete(old.key)
            if self.volumes is not None:
                self.volumes.wake()         # a PreBind waiting for it gives up
            if self.cache.remove_pod(old.key) is not None:
                self.queue.move_all()
            return
        meta = obj["metadata"]
        pod = self._pod_informer.cache.get(f"{self._pod_prefix}{meta['namespace']}/{meta['name']}")
        if pod is None:
            return
        key = pod.key
        if pod.assigned:
            self._pending.pop(key, None)
            self.queue.delete(key)
            if pod.terminal:
                if self.cache.remove_pod(key) is not None:
                    self.queue.move_all()
            else:
                self.cache.set_pod(pod)
            return
        if (pod.scheduler_name != self._scheduler_name or pod.terminal or pod.deleting
                or pod.gated):
            self._pending.pop(key, None)
            self.queue.delete(key)
            return
        previous = self._pending.get(key)
        self._pending[key] = pod
        if key in self.queue:
            self.queue.update(key, pod.priority,
                              changed=previous is None or previous.signature != pod.signature)
        elif key not in self.cache.assumed:
            self.queue.add(key, pod.priority)

    def _volumes_changed(self):
        """A claim, volume or class changed: pods waiting for one are tried again."""
        self.queue.move_all()

    def _node_changed(self, type, obj, old):
        if type == DELETED:
            name = old.name if old is not None else obj["metadata"]["name"]
            self.cache.remove_node(name)
            return
        spec = self._node_informer.cache.get(self._node_prefix + obj["metadata"]["name"])
        if spec is None or spec == old:
            return
        self.cache.set_node(spec)
        self.queue.move_all()

    # -- deciding -----------------------------------------------------------

    def _wake(self):
        """Decide in a coming reactor turn (once the informers have synced)."""
        if not self.synced or not self.running or self._turn is not None:
            return
        self._turn = self._clock.callLater(0, self._decide)

    def _decide(self):
        self._turn = None
        ends = self._timer() + self._turn_seconds
        for _ in range(self._per_turn):
            if self._in_flight >= self._max_in_flight or not self.running:
                return              # a finished binding wakes the loop
            item = self.queue.pop()
            if item is None:
                return
            self._schedule_one(*item)
            if self._timer() >= ends:
                break
        if self.queue.has_active():
            self._wake()

    def _schedule_one(self, key, cycle):
        pod = self._pending.get(key)
        if pod is None:
            self.queue.done(key)
            return
        began = self._clock.seconds()
        try:
            node = self.framework.schedule(pod, self.cache)
        except (FitError, NoNodesAvailable) as rejected:
            self._attempted(schedmetrics.UNSCHEDULABLE, began)
            self.queue.unschedulable(key, cycle)
            self._failed(pod, UNSCHEDULABLE, rejected.message)
            return
        except Exception:
            self._attempted(schedmetrics.ERROR, began)
            self.log.failure("Scheduling {key} failed", key=key)
            self.queue.retry(key)
            return
        self.cache.assume(pod, node.name)
        self._in_flight += 1
        Deferred.fromCoroutine(self._bind(pod, node, began)).addErrback(
            lambda f: self.log.failure("Binding {key} failed", f, key=key))

    def _attempted(self, result, began):
        self._metrics.attempt(result, self._scheduler_name, self._clock.seconds() - began)

    async def _bind(self, pod, node, began):
        key, node_name = pod.key, node.name
        try:
            if pod.claims and self.volumes is not None:
                await self.volumes.prebind(
                    pod, node, lambda: self.running and self.queue.where(key) == IN_FLIGHT)
            await self._binder.bind(pod, node_name)
        except Exception as e:
            self.cache.forget(key)
            if self.queue.where(key) != IN_FLIGHT or not self.running:
                return              # deleted, bound by someone else, or stopped meanwhile
            if isinstance(e, VolumeBindingError):
                self.log.info("Binding the volumes of {key} on {node} failed: {why}", key=key,
                              node=node_name, why=str(e))
                self._attempted(schedmetrics.ERROR, began)
                self.queue.retry(key)
                self._failed(pod, SCHEDULER_ERROR,
                             f'running PreBind plugin "{VOLUME_BINDING}": {e}')
                return
            if isinstance(e, StatusError):
                why = e.message
                self.log.debug("Binding {key} to {node} refused: {why}", key=key,
                               node=node_name, why=why)
            else:
                why = str(e) or e.__class__.__name__
                self.log.failure("Binding {key} to {node} failed", key=key, node=node_name)
            self._attempted(schedmetrics.ERROR, began)
            self.queue.retry(key)
            self._failed(pod, SCHEDULER_ERROR, f'running Bind plugin "{BINDER_NAME}": {why}')
        else:
            self._attempted(schedmetrics.SCHEDULED, began)
            self.queue.done(key)
            self._recorder.record(pod.reference(), NORMAL, "Scheduled",
                                  f"Successfully assigned {key} to {node_name}")
        finally:
            self._in_flight -= 1
            self._wake()

    def _failed(self, pod, reason, message):
        """Tell the pod's watchers: an event, and its PodScheduled condition."""
        self._recorder.record(pod.reference(), WARNING, "FailedScheduling", truncate(message))
        if pod.condition != ("False", reason, message):
            Deferred.fromCoroutine(self._set_unscheduled(pod, reason, message)).addErrback(
                lambda f: self.log.failure("Updating {key} failed", f, key=pod.key))

    async def _set_unscheduled(self, pod, reason, message):
        condition = {"type": POD_SCHEDULED, "status": "False", "lastProbeTime": None,
                     "lastTransitionTime": rfc3339(self._clock.seconds()),
                     "reason": reason, "message": message}

        def unscheduled(current):
            if current["metadata"].get("uid") != pod.uid or \
                    (current.get("spec") or {}).get("nodeName"):
                return current      # another pod now, or bound meanwhile: leave it
            status = current.get("status")
            if not isinstance(status, dict):
                status = current["status"] = {}
            set_pod_condition(status, dict(condition))
            return current

        try:
            await self._pods.patch(scheduler_context(pod.namespace), pod.name, unscheduled,
                                   subresource="status")
        except StatusError as e:
            if e.code != 404:
                self.log.warn("Cannot set {key} unschedulable: {error}", key=pod.key,
                              error=e.message)
