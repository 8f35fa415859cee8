# -*- test-case-name: tests.controllers.test_replicaset -*-
"""
The ReplicaSet and ReplicationController controllers: one implementation for
both kinds, as upstream shares C{pkg/controller/replicaset} with
C{pkg/controller/replication}.

Each owner is synced alone, keyed C{namespace/name}:

 1. Its pods are claimed (L{orchd.controllers.controllerref}): the active
    pods it controls, and active orphans of its namespace its selector
    matches, which it adopts.
 2. Unless expectations are pending (L{orchd.controllers.expectations}),
    the difference to C{spec.replicas} is made up: pods created from the
    template in slow-start batches, at most L{BURST_REPLICAS} per sync, or
    the surplus deleted in upstream's order (L{orchd.controllers.podranking}).
 3. The status is written when it changed: C{replicas},
    C{fullyLabeledReplicas}, C{readyReplicas}, C{availableReplicas} (ready
    for C{minReadySeconds}), C{observedGeneration}, and a C{ReplicaFailure}
    condition while creating or deleting fails.

The pods informer keeps trimmed pods (L{orchd.controllers.podstate.keep_pod})
indexed by their controller's uid, and orphans by namespace, so a sync reads
the owner's own pods and its namespace's orphans, never every pod.
"""

from collections import defaultdict

from twisted.internet.defer import DeferredList, ensureDeferred

from orchd.api.errors import StatusError
from orchd.api.meta import rfc3339
from orchd.api.selectors import NOTHING, selector_from_label_selector_object
from orchd.controllers.base import CacheSyncedController, write_status
from orchd.controllers.controllerref import (
    ControllerRefManager, owner_reference, owner_selector, recheck_owner,
)
from orchd.controllers.events import EventRecorder
from orchd.controllers.expectations import TIMEOUT, Expectations
from orchd.controllers.podcontrol import PodControl, namespace_terminating, slow_start_batch
from orchd.controllers.podranking import pods_to_delete
from orchd.controllers.podstate import (
    controller_ref, is_active, is_available, is_ready, keep_pod, pod_key, ready_since,
)
from orchd.registry.context import RequestContext
from orchd.storage.interfaces import ADDED, DELETED

#: Upstream's C{BurstReplicas}: pods created or deleted at most per sync.
BURST_REPLICAS = 500
REPLICA_FAILURE = "ReplicaFailure"




def _replication_controller_selector(owner):
    """A ReplicationController's selector map, or its template's labels when it has none."""
    spec = owner.get("spec") or {}
    labels = spec.get("selector") or ((spec.get("template") or {}).get("metadata") or {}).get(
        "labels")
    if not isinstance(labels, dict) or not labels:
        return NOTHING
    return selector_from_label_selector_object({"matchLabels": labels})


class OwnerKind:
    """
    What differs between the two kinds a replica set controller runs.

    @ivar name: the controller's name in C{--controllers}.
    @ivar component: the events' source and the writes' field manager.
    @ivar selector: C{selector(owner)}, a L{orchd.api.selectors.LabelSelector}.
    """

    def __init__(self, name, group, resource, api_version, kind, component, selector):
        self.name = name
        self.group = group
        self.resource = resource
        self.api_version = api_version
        self.kind = kind
        self.component = component
        self.selector = selector


REPLICA_SETS = OwnerKind("replicaset", "apps", "replicasets", "apps/v1", "ReplicaSet",
                         "replicaset-controller", owner_selector)
REPLICATION_CONTROLLERS = OwnerKind(
    "replicationcontroller", "", "replicationcontrollers", "v1", "ReplicationController",
    "replication-controller", _replication_controller_selector)


def replicas_of(owner):
    """C{spec.replicas}, 1 when unset (upstream's default)."""
    replicas = (owner.get("spec") or {}).get("replicas")
    return replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 1


def min_ready_seconds(owner):
    value = (owner.get("spec") or {}).get("minReadySeconds")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _owner_key(meta):
    return f"{meta.get('namespace', '')}/{meta['name']}"


def calculate_status(owner, pods, error, now):
    """
    The owner's new status from its claimed active C{pods} (upstream's
    C{calculateStatus}); C{error} is the L{StatusError} of the sync's
    creates or deletes, if any.
    """
    status = dict(owner.get("status") or {})
    spec = owner.get("spec") or {}
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    min_ready = min_ready_seconds(owner)
    fully = ready = available = 0
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        if all(labels.get(k) == v for k, v in template_labels.items()):
            fully += 1
        if is_ready(pod):
            ready += 1
            if is_available(pod, min_ready, now):
                available += 1
    conditions = [c for c in status.get("conditions") or () if isinstance(c, dict)]
    failure = next((c for c in conditions if c.get("type") == REPLICA_FAILURE), None)
    if error is not None and failure is None:
        diff = len(pods) - replicas_of(owner)
        reason = "FailedCreate" if diff < 0 else "FailedDelete" if diff > 0 else ""
        conditions.append({"type": REPLICA_FAILURE, "status": "True",
                           "lastTransitionTime": rfc3339(now), "reason": reason,
                           "message": error.message})
    elif error is None and failure is not None:
        conditions = [c for c in conditions if c.get("type") != REPLICA_FAILURE]
    new = {"replicas": len(pods)}
    for field, value in (("fullyLabeledReplicas", fully), ("readyReplicas", ready),
                         ("availableReplicas", available),
                         ("observedGeneration", status.get("observedGeneration"))):
        if value:
            new[field] = value
    if conditions:
        new["conditions"] = conditions
    return new


def next_availability(owner, pods, now):
    """
    Seconds until the next ready pod becomes available (ready for longer than
    C{minReadySeconds}), or None: the owner is looked at again then, as
    upstream requeues after C{minReadySeconds}. A second is added since
    condition times have whole seconds and availability is strictly later.
    """
    min_ready = min_ready_seconds(owner)
    if not min_ready:
        return None
    moments = [since + min_ready for since in (ready_since(pod) for pod in pods)
               if since is not None and not since + min_ready < now]
    if not moments:
        return None
    return max(min(moments) - now, 0) + 1


def _status_unchanged(owner, new):
    status = owner.get("status") or {}
    generation = owner["metadata"].get("generation") or 0
    return (all((status.get(f) or 0) == (new.get(f) or 0)
                for f in ("replicas", "fullyLabeledReplicas", "readyReplicas",
                          "availableReplicas"))
            and (status.get("observedGeneration") or 0) == generation
            and (status.get("conditions") or []) == (new.get("conditions") or []))


def _keep_failure(status, stored):
    """
    C{status} with the stored C{ReplicaFailure} condition kept when both
    have one: the first failure is the one reported (upstream keeps it), and
    a status computed from a cache behind the store then changes nothing.
    """
    conditions = status.get("conditions") or []
    stored_failure = next((c for c in stored.get("conditions") or ()
                           if isinstance(c, dict) and c.get("type") == REPLICA_FAILURE), None)
    if stored_failure is None or not any(c.get("type") == REPLICA_FAILURE for c in conditions):
        return status
    return dict(status, conditions=[stored_failure if c.get("type") == REPLICA_FAILURE else c
                                    for c in conditions])


class ReplicaSetController(CacheSyncedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    @param kind: L{REPLICA_SETS} or L{REPLICATION_CONTROLLERS}.
    @param burst: pods created or deleted at most per sync.
    @param recorder: an L{EventRecorder}; one of the kind's component if None.
    """

    def __init__(self, catalog, clock, kind=REPLICA_SETS, burst=BURST_REPLICAS, recorder=None,
                 expectations_timeout=TIMEOUT):
        super().__init__(catalog, clock)
        self.name = kind.name
        self._kind = kind
        self._burst = burst
        self._provider = catalog.resource(kind.group, kind.resource)
        self._owner_prefix = self._provider.info.key_prefix()
        self._pod_prefix = catalog.resource("", "pods").info.key_prefix()
        self._recorder = recorder or EventRecorder(catalog, clock, kind.component)
        self._control = PodControl(catalog, self._recorder, kind.component)
        self.expectations = Expectations(clock, expectations_timeout)
        self._selectors = {}
        self._owned = defaultdict(set)
        self._orphans = defaultdict(set)
        self._names = defaultdict(set)
        self._owners = self.follow(kind.group, kind.resource, self._owner_changed)
        self._pods = self.follow("", "pods", self._pod_changed, keep=keep_pod)

    @classmethod
    def for_replication_controllers(cls, catalog, clock, **kw):
        return cls(catalog, clock, kind=REPLICATION_CONTROLLERS, **kw)

    # -- informer handlers -------------------------------------------------------

    def _owner_changed(self, type, obj, old):
        meta = obj["metadata"]
        key = _owner_key(meta)
        namespace = meta.get("namespace", "")
        if type == DELETED:
            self._names[namespace].discard(meta["name"])
            self._selectors.pop(key, None)
        else:
            self._names[namespace].add(meta["name"])
            try:
                self._selectors[key] = self._kind.selector(obj)
            except StatusError as e:
                self.log.warn("{kind} {key} has an invalid selector: {error}",
                              kind=self._kind.kind, key=key, error=e.message)
                self._selectors[key] = NOTHING
        self.enqueue(key)

    def _owner(self, namespace, ref):
        """The key of the owner C{ref} names, if it is one of ours and cached."""
        if ref is None or ref.get("kind") != self._kind.kind:
            return None
        key = f"{namespace}/{ref.get('name')}"
        owner = self._owners.cache.get(self._owner_prefix + key)
        if owner is None or owner["metadata"].get("uid") != ref["uid"]:
            return None
        return key

    def _index(self, pod, add):
        meta = pod["metadata"]
        key = pod_key(pod)
        ref = controller_ref(meta)
        bucket = self._owned[ref["uid"]] if ref is not None else \
            self._orphans[meta.get("namespace", "")]
        if add:
            bucket.add(key)
        else:
            bucket.discard(key)

    def _pod_changed(self, type, obj, old):
        if type == DELETED:
            kept = old
        else:
            meta = obj["metadata"]
            kept = self._pods.cache.get(
                f"{self._pod_prefix}{meta.get('namespace', '')}/{meta['name']}") or keep_pod(obj)
        if old is not None:
            self._index(old, False)
        if type != DELETED:
            self._index(kept, True)
        elif old is None:
            return
        meta = kept["metadata"]
        namespace = meta.get("namespace", "")
        key = pod_key(kept)
        ref = controller_ref(meta)
        if type == DELETED or (type == ADDED and meta.get("deletionTimestamp")):
            self._pod_going(namespace, key, ref)
            return
        if type == ADDED or old is None:
            owner = self._owner(namespace, ref)
            if owner is not None:
                self.expectations.creation_observed(owner)
                self.enqueue(owner)
            elif ref is None:
                self._enqueue_matching(namespace, meta.get("labels"))
            return
        if kept == old:
            return
        old_meta = old["metadata"]
        labels_changed = (old_meta.get("labels") or {}) != (meta.get("labels") or {})
        if meta.get("deletionTimestamp") and not old_meta.get("deletionTimestamp"):
            self._pod_going(namespace, key, ref)
            if labels_changed:
                self._pod_going(namespace, key, controller_ref(old_meta))
            return
        old_ref = controller_ref(old_meta)
        if old_ref is not None and (ref is None or old_ref["uid"] != ref["uid"]):
            old_owner = self._owner(namespace, old_ref)
            if old_owner is not None:
                self.enqueue(old_owner)
        if ref is not None:
            owner = self._owner(namespace, ref)
            if owner is not None:
                self.enqueue(owner)
                min_ready = min_ready_seconds(self._owners.cache[self._owner_prefix + owner])
                if min_ready and is_ready(kept) and not is_ready(old):
                    self.enqueue(owner, after=min_ready + 1)
            return
        if labels_changed or old_ref is not None:
            self._enqueue_matching(namespace, meta.get("labels"))

    def _pod_going(self, namespace, key, ref):
        owner = self._owner(namespace, ref)
        if owner is not None:
            self.expectations.deletion_observed(owner, key)
            self.enqueue(owner)

    def _enqueue_matching(self, namespace, labels):
        """Queue every owner of the namespace whose selector matches an orphan's labels."""
        for name in sorted(self._names.get(namespace, ())):
            key = f"{namespace}/{name}"
            if self._selectors.get(key, NOTHING).matches(labels or {}):
                self.enqueue(key)

    # -- sync --------------------------------------------------------------------

    def _context(self, namespace):
        return RequestContext(self._catalog.system_context().user, namespace,
                              field_manager=self._kind.component)

    def _cached_pods(self, keys):
        cache, prefix = self._pods.cache, self._pod_prefix
        return [pod for pod in (cache.get(prefix + key) for key in sorted(keys))
                if pod is not None]

    async def _sync(self, key):
        owner = self._owners.cache.get(self._owner_prefix + key)
        if owner is None:
            self.expectations.forget(key)
            self._backoff.succeeded(key)
            return
        meta = owner["metadata"]
        namespace = meta.get("namespace", "")
        needs_sync = self.expectations.satisfied(key)
        candidates = [pod for pod in self._cached_pods(
            self._owned.get(meta["uid"], set()) | self._orphans.get(namespace, set()))
            if is_active(pod)]
        manager = ControllerRefManager(
            self._catalog.resource("", "pods"), owner, self._kind.api_version, self._kind.kind,
            self._selectors.get(key, NOTHING),
            recheck_owner(self._provider, owner, self._catalog.system_context().user),
            self._context(namespace))
        pods, errors = await manager.claim(candidates)
        if errors:
            self.retry_later(key, self._kind.kind, errors[0])
            return
        error = None
        if needs_sync and not meta.get("deletionTimestamp"):
            error = await self._manage(key, owner, pods)
        now = self._clock.seconds()
        status = calculate_status(owner, pods, error, now)
        written = await self._write_status(owner, status)
        if error is not None:
            self.retry_later(key, self._kind.kind, error)
            return
        self._backoff.succeeded(key)
        if written is not None:
            delay = next_availability(owner, pods, now)
            if delay is not None:
                self.enqueue(key, after=delay)

    async def _manage(self, key, owner, pods):
        """Create or delete pods towards C{spec.replicas}; returns the first error, if any."""
        diff = len(pods) - replicas_of(owner)
        if diff < 0:
            count = min(-diff, self._burst)
            self.expectations.expect_creations(key, count)
            template = (owner.get("spec") or {}).get("template")
            reference = owner_reference(self._kind.api_version, self._kind.kind, owner)

            async def create():
                try:
                    await self._control.create(owner, template, reference)
                except StatusError as e:
                    # A namespace going away refuses every create: nothing to retry.
                    if not namespace_terminating(e):
                        raise

            successes, error = await slow_start_batch(count, create)
            for _ in range(count - successes):
                # Never attempted, or failed: the informer will not see them.
                self.expectations.creation_observed(key)
            return error
        if diff > 0:
            count = min(diff, self._burst)
            victims = pods_to_delete(pods, self._related_pods(owner), count,
                                     self._clock.seconds())
            self.expectations.expect_deletions(key, [pod_key(pod) for pod in victims])
            results = await DeferredList(
                [ensureDeferred(self._control.delete_expected(owner, pod, self.expectations, key)) for pod in victims],
                consumeErrors=True)
            for ok, result in results:
                if not ok:
                    result.trap(StatusError)
                    return result.value
        return None

    def _related_pods(self, owner):
        """
        The active pods of every owner of our kind that has the same
        controlling owner (the ReplicaSets of one Deployment), or the
        owner's own when it has none: what "doubled up" counts.
        """
        meta = owner["metadata"]
        namespace = meta.get("namespace", "")
        parent = controller_ref(meta)
        uids = {meta["uid"]}
        if parent is not None:
            for name in self._names.get(namespace, ()):
                other = self._owners.cache.get(f"{self._owner_prefix}{namespace}/{name}")
                other_parent = controller_ref(other["metadata"]) if other else None
                if other_parent is not None and other_parent["uid"] == parent["uid"]:
                    uids.add(other["metadata"]["uid"])
        keys = set()
        for uid in uids:
            keys |= self._owned.get(uid, set())
        return [pod for pod in self._cached_pods(keys) if is_active(pod)]

    async def _write_status(self, owner, status):
        """Write C{status} if it says something new; returns the status now stored."""
        meta = owner["metadata"]
        generation = meta.get("generation") or 0
        if _status_unchanged(owner, status):
            return owner.get("status") or {}
        if generation:
            status["observedGeneration"] = generation
        written = await write_status(self._provider, self._context(meta.get("namespace", "")),
                                     meta, lambda stored: _keep_failure(status, stored))
        return status if written else None
