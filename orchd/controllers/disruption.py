# -*- test-case-name: tests.controllers.test_disruption -*-
"""
The disruption controller: the status of every PodDisruptionBudget
(upstream's C{pkg/controller/disruption/disruption.go}).

For each budget it counts the pods its selector picks: C{currentHealthy}
(ready, not being deleted, not recently evicted), C{desiredHealthy} and
C{expectedPods} from C{minAvailable} or C{maxUnavailable}, and
C{disruptionsAllowed}, which the eviction subresource spends. An integer
C{minAvailable} counts the pods there are; a percentage, or
C{maxUnavailable}, counts what their controllers want: the replicas of each
pod's controller (a ReplicaSet's Deployment, a ReplicationController, a
StatefulSet, or any kind served with a scale subresource), percentages
rounded up. A pod whose controller has no scale makes the status fail
safe: no disruption allowed, the C{DisruptionAllowed} condition False with
reason C{SyncFailed} and the error.

Pods an eviction entered in C{disruptedPods} stay out of the healthy count
until they are deleted or two minutes pass, when the entry is dropped
(and a C{NotDeleted} event says so); the budget is synced again when the
first entry expires. A status write carries the budget's resourceVersion
as read, so it never undoes an eviction's decrement it did not see: it
conflicts, and the budget is synced again from the newer state.

Budgets are synced when they change, when a pod they select (before or
after the change) changes, and when a scalable controller of their
namespace is created, rescaled or deleted.

A pod left with C{DisruptionTarget=True} for two minutes without being
deleted (its eviction failed after marking it) has the condition reset to
False, as upstream does.
"""

from collections import defaultdict

from orchd.api.disruption import (
    DELETION_TIMEOUT, DISRUPTION_TARGET, conditions_up_to_date, sync_failed,
    update_disruption_allowed,
)
from orchd.api.errors import StatusError
from orchd.api.meta import rfc3339
from orchd.api.selectors import selector_from_label_selector_object
from orchd.controllers.base import CacheSyncedController
from orchd.controllers.events import NORMAL, WARNING, EventRecorder
from orchd.controllers.podstate import (
    FAILED, SUCCEEDED, controller_ref, is_ready, keep_pod, parse_time, pod_key,
)
from orchd.registry.context import RequestContext
from orchd.storage.interfaces import DELETED

COMPONENT = "controllermanager"
MANAGER = "disruption-controller"
#: How long a pod may carry C{DisruptionTarget=True} without being deleted
#: before the condition is reset to False (upstream's C{stalePodDisruptionTimeout}).
STALE_DISRUPTION_TIMEOUT = 120.0
#: The reason the node agent gives the condition; never stale (upstream).
TERMINATION_BY_KUBELET = "TerminationByKubelet"
#: Queue keys of pods (whose DisruptionTarget may go stale), apart from budgets'.
_POD = "pod:"
#: The controllers whose scale counts: C{(group, resource, kind)}.
SCALED = (("", "replicationcontrollers", "ReplicationController"),
          ("apps", "deployments", "Deployment"),
          ("apps", "replicasets", "ReplicaSet"),
          ("apps", "statefulsets", "StatefulSet"))


def _keep_pod(pod):
    """L{keep_pod}, with the C{DisruptionTarget} condition when the pod has one."""
    kept = keep_pod(pod)
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == DISRUPTION_TARGET:
            kept["status"].setdefault("conditions", []).append(
                {key: condition.get(key) for key in
                 ("type", "status", "reason", "lastTransitionTime")})
    return kept


def stale_disruption_wait(pod, now):
    """
    Seconds until the pod's C{DisruptionTarget=True} is stale, 0 when it is,
    None when it has none that can be: the pod is being deleted or has
    finished, or the node agent set it (upstream's rules).
    """
    if pod["metadata"].get("deletionTimestamp"):
        return None
    status = pod.get("status") or {}
    if status.get("phase") in (SUCCEEDED, FAILED):
        return None
    for condition in status.get("conditions") or ():
        if condition.get("type") == DISRUPTION_TARGET:
            if condition.get("status") != "True" or \
                    condition.get("reason") == TERMINATION_BY_KUBELET:
                return None
            since = parse_time(condition.get("lastTransitionTime")) or now
            return max(since + STALE_DISRUPTION_TIMEOUT - now, 0.0)
    return None


class SyncError(Exception):
    """Why a budget's status cannot be computed (its message goes in the condition)."""


def _group(api_version):
    return api_version.rpartition("/")[0] if isinstance(api_version, str) else ""


def _keep_scaled(obj):
    """What a controller's scale needs: C{(uid, replicas, its own controller ref)}."""
    replicas = (obj.get("spec") or {}).get("replicas")
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        replicas = 1
    ref = controller_ref(obj["metadata"])
    return (obj["metadata"].get("uid"), replicas,
            (ref.get("kind"), ref.get("name"), ref.get("uid")) if ref else None)


def scaled_percent(value, total):
    """
    An int-or-percent of C{total}, rounded up (upstream's
    C{GetScaledValueFromIntOrPercent}); only a percentage may be a string.

    @raise SyncError: for a string that is not a percentage.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        return -(-int(value[:-1]) * total // 100)
    raise SyncError("invalid value for IntOrString: invalid type: string is not a percentage")


def desired_status(current_healthy, desired_healthy, expected, disrupted, generation):
    """The status fields upstream's C{updatePdbStatus} writes (conditions apart)."""
    allowed = current_healthy - desired_healthy
    if expected <= 0 or allowed <= 0:
        allowed = 0
    status = {"observedGeneration": generation, "disruptionsAllowed": allowed,
              "currentHealthy": current_healthy, "desiredHealthy": desired_healthy,
              "expectedPods": expected}
    if disrupted:
        status["disruptedPods"] = disrupted
    return status


class DisruptionController(CacheSyncedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    @param recorder: an L{EventRecorder}; one of C{controllermanager} if None.
    """

    name = "disruption"

    def __init__(self, catalog, clock, recorder=None):
        super().__init__(catalog, clock)
        self._provider = catalog.resource("policy", "poddisruptionbudgets")
        self._prefix = self._provider.info.key_prefix()
        self._pod_prefix = catalog.resource("", "pods").info.key_prefix()
        self._recorder = recorder or EventRecorder(catalog, clock, COMPONENT)
        self._budget_names = defaultdict(set)
        self._selectors = {}
        self._pod_keys = defaultdict(set)
        self._budgets = self.follow("policy", "poddisruptionbudgets", self._budget_changed)
        self._pods = self.follow("", "pods", self._pod_changed, keep=_keep_pod)
        #: (group, kind) -> (informer, key prefix) of the controllers whose scale counts.
        self._scaled = {}
        for group, resource, kind in SCALED:
            provider = catalog.resource(group, resource)
            if provider is not None:
                informer = self.follow(group, resource, self._scaled_changed, keep=_keep_scaled)
                self._scaled[(group, kind)] = (informer, provider.info.key_prefix())

    # -- informer handlers -------------------------------------------------------

    def _budget_changed(self, type, obj, old):
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        key = f"{namespace}/{meta['name']}"
        if type == DELETED:
            self._budget_names[namespace].discard(meta["name"])
            self._selectors.pop(key, None)
            return
        self._budget_names[namespace].add(meta["name"])
        try:
            self._selectors[key] = selector_from_label_selector_object(
                (obj.get("spec") or {}).get("selector"))
        except StatusError:
            self._selectors[key] = None     # the sync reports it
        self.enqueue(key)

    def _pod_changed(self, type, obj, old):
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        key = pod_key(obj)
        if type == DELETED:
            self._pod_keys[namespace].discard(key)
        else:
            self._pod_keys[namespace].add(key)
            kept = self._pods.cache.get(self._pod_prefix + key) or _keep_pod(obj)
            if stale_disruption_wait(kept, self._clock.seconds()) is not None:
                self.enqueue(_POD + key)
            if old is not None and kept == old:
                return
        labels = [meta.get("labels") or {}]
        if old is not None:
            labels.append(old["metadata"].get("labels") or {})
        for name in sorted(self._budget_names.get(namespace, ())):
            budget = f"{namespace}/{name}"
            selector = self._selectors.get(budget)
            if selector is not None and any(selector.matches(each) for each in labels):
                self.enqueue(budget)

    def _scaled_changed(self, type, obj, old):
        if type != DELETED and old is not None and old[:2] == _keep_scaled(obj)[:2]:
            return
        namespace = obj["metadata"].get("namespace", "")
        for name in sorted(self._budget_names.get(namespace, ())):
            self.enqueue(f"{namespace}/{name}")

    # -- sync --------------------------------------------------------------------

    async def _sync(self, key):
        if key.startswith(_POD):
            await self._sync_stale_disruption(key[len(_POD):])
            return
        budget = self._budgets.cache.get(self._prefix + key)
        if budget is None:
            return
        try:
            status, recheck = self._compute(budget)
        except SyncError as e:
            self.log.info("Failed to sync PodDisruptionBudget {key}: {error}", key=key,
                          error=str(e))
            await self._fail_safe(budget, str(e))
            return
        await self._write_status(budget, status)
        if recheck is not None:
            self.enqueue(key, after=max(recheck, 0.0))

    def _selected_pods(self, budget):
        meta = budget["metadata"]
        namespace = meta.get("namespace", "")
        try:
            selector = selector_from_label_selector_object(
                (budget.get("spec") or {}).get("selector"))
        except StatusError as e:
            raise SyncError(e.message) from None
        cache, prefix = self._pods.cache, self._pod_prefix
        pods = (cache.get(prefix + key) for key in sorted(self._pod_keys.get(namespace, ())))
        return [pod for pod in pods
                if pod is not None and selector.matches(pod["metadata"].get("labels") or {})]

    def _compute(self, budget):
        """The new status (without conditions) and when to look again, or None."""
        pods = self._selected_pods(budget)
        if not pods:
            self._recorder.record(budget, NORMAL, "NoPods", "No matching pods found")
        expected, desired, unmanaged = self._expected_count(budget, pods)
        if unmanaged:
            self._recorder.record(
                budget, WARNING, "UnmanagedPods",
                f"Pods selected by this PodDisruptionBudget (selector: "
                f"{self._selectors.get(_key(budget))}) were found to be unmanaged. As a result, "
                "the status of the PDB cannot be calculated correctly, which may result in "
                "undefined behavior. To account for these pods please set \".spec.minAvailable\" "
                "field of the PDB to an integer value.")
        now = self._clock.seconds()
        disrupted, recheck = self._disrupted_pods(budget, pods, now)
        healthy = sum(1 for pod in pods if not pod["metadata"].get("deletionTimestamp")
                      and pod["metadata"]["name"] not in disrupted and is_ready(pod))
        status = desired_status(healthy, desired, expected, disrupted,
                                budget["metadata"].get("generation") or 0)
        return status, (recheck - now if recheck is not None else None)

    def _expected_count(self, budget, pods):
        """C{(expectedPods, desiredHealthy, unmanaged pod names)} (upstream's rules)."""
        spec = budget.get("spec") or {}
        if spec.get("maxUnavailable") is not None:
            expected, unmanaged = self._expected_scale(pods)
            unavailable = scaled_percent(spec["maxUnavailable"], expected)
            return expected, max(expected - unavailable, 0), unmanaged
        minimum = spec.get("minAvailable")
        if minimum is None:
            return 0, 0, []
        if isinstance(minimum, int) and not isinstance(minimum, bool):
            return len(pods), minimum, []
        expected, unmanaged = self._expected_scale(pods)
        return expected, scaled_percent(minimum, expected), unmanaged

    def _expected_scale(self, pods):
        """The replicas the pods' controllers want, summed once per controller."""
        scales, unmanaged = {}, []
        for pod in pods:
            meta = pod["metadata"]
            ref = controller_ref(meta)
            if ref is None:
                unmanaged.append(meta["name"])
                continue
            if ref["uid"] in scales:
                continue
            found = self._scale_of(ref, meta.get("namespace", ""))
            if found is None:
                raise SyncError(f'found no controllers for pod "{meta["name"]}"')
            uid, replicas = found
            scales[uid] = replicas
            scales.setdefault(ref["uid"], 0)     # seen: its pods need no second look
        return sum(scales.values()), unmanaged

    def _cached(self, group, kind, namespace, name, uid):
        entry = self._scaled.get((group, kind))
        if entry is None:
            return None
        kept = entry[0].cache.get(f"{entry[1]}{namespace}/{name}")
        return kept if kept is not None and kept[0] == uid else None

    def _scale_of(self, ref, namespace):
        """C{(uid, replicas)} of the controller C{ref} names, or None when it is gone."""
        group, kind = _group(ref.get("apiVersion")), ref.get("kind")
        if (group, kind) in (("apps", "ReplicaSet"), ("extensions", "ReplicaSet")):
            replica_set = self._cached("apps", "ReplicaSet", namespace, ref.get("name"),
                                       ref["uid"])
            if replica_set is None:
                return None
            parent = replica_set[2]
            if parent is not None and parent[0] == "Deployment":
                deployment = self._cached("apps", "Deployment", namespace, parent[1], parent[2])
                if deployment is not None:
                    return deployment[0], deployment[1]
            return replica_set[0], replica_set[1]
        if (group, kind) in self._scaled:
            kept = self._cached(group, kind, namespace, ref.get("name"), ref["uid"])
            return (kept[0], kept[1]) if kept is not None else None
        for info in self._catalog.served_kinds:
            if (info.group, info.kind) == (group, kind) and "/" not in info.resource:
                raise SyncError(f"{info.resource}.{group} does not implement the scale "
                                "subresource" if group else
                                f"{info.resource} does not implement the scale subresource")
        raise SyncError(f'no matches for kind "{kind}" in group "{group}"')

    def _disrupted_pods(self, budget, pods, now):
        """
        The budget's C{disruptedPods} entries still waiting for their pod to
        go, and when the first of them expires (upstream's C{buildDisruptedPodMap}).
        """
        recorded = (budget.get("status") or {}).get("disruptedPods")
        if not isinstance(recorded, dict) or not recorded:
            return {}, None
        kept, recheck = {}, None
        for pod in pods:
            meta = pod["metadata"]
            if meta.get("deletionTimestamp") or meta["name"] not in recorded:
                continue
            stamp = recorded[meta["name"]]
            since = parse_time(stamp)
            if since is None:
                continue
            expires = since + DELETION_TIMEOUT
            if expires < now:
                bmeta = budget["metadata"]
                self._recorder.record(
                    dict(pod, apiVersion="v1", kind="Pod"), WARNING, "NotDeleted",
                    f"Pod was expected by PDB {bmeta.get('namespace', '')}/{bmeta['name']} to "
                    "be deleted but it wasn't")
                continue
            kept[meta["name"]] = stamp
            recheck = expires if recheck is None else min(recheck, expires)
        return kept, recheck

    async def _sync_stale_disruption(self, key):
        """
        Reset a C{DisruptionTarget=True} left on a pod that was never deleted
        (its eviction or deletion failed after the condition was written).
        """
        pod = self._pods.cache.get(self._pod_prefix + key)
        if pod is None:
            return
        wait = stale_disruption_wait(pod, self._clock.seconds())
        if wait is None:
            return
        if wait > 0:
            self.enqueue(_POD + key, after=wait)
            return
        uid = pod["metadata"]["uid"]
        now = self._clock.seconds()

        def reset(current):
            if current["metadata"].get("uid") != uid or \
                    stale_disruption_wait(current, now) != 0:
                return None     # another pod of that name, or no longer stale
            status = current["status"]
            status["conditions"] = [
                dict(c, status="False", lastTransitionTime=rfc3339(now))
                if isinstance(c, dict) and c.get("type") == DISRUPTION_TARGET else c
                for c in status["conditions"]]
            return current

        namespace, name = key.split("/", 1)
        ctx = RequestContext(self._catalog.system_context().user, namespace,
                             field_manager=MANAGER)
        try:
            await self._catalog.resource("", "pods").rewrite(ctx, name, reset)
        except StatusError as e:
            if e.code != 404:
                raise
            return
        self.log.info("Reset stale DisruptionTarget condition of pod {key} to False", key=key)

    # -- writes ------------------------------------------------------------------

    def _unchanged(self, budget, status):
        stored = budget.get("status") or {}
        return (all((stored.get(field) or 0) == status[field]
                    for field in ("observedGeneration", "disruptionsAllowed", "currentHealthy",
                                  "desiredHealthy", "expectedPods"))
                and (stored.get("disruptedPods") or {}) == status.get("disruptedPods", {})
                and conditions_up_to_date(budget))

    async def _write_status(self, budget, status):
        if self._unchanged(budget, status):
            return
        conditions = (budget.get("status") or {}).get("conditions")
        status["conditions"] = [dict(c) for c in conditions if isinstance(c, dict)] \
            if isinstance(conditions, list) else []
        update_disruption_allowed(status, self._clock.seconds())
        await self._put_status(budget, status)

    async def _fail_safe(self, budget, message):
        status = dict(budget.get("status") or {})
        conditions = status.get("conditions")
        status["conditions"] = [dict(c) for c in conditions if isinstance(c, dict)] \
            if isinstance(conditions, list) else []
        sync_failed(status, message, self._clock.seconds())
        if status == budget.get("status"):
            return
        await self._put_status(budget, status)

    async def _put_status(self, budget, status):
        """
        Write C{status} over the budget as read: a budget written since (an
        eviction's decrement) is a conflict, and the queue tries again.
        """
        meta = budget["metadata"]
        uid, version = meta.get("uid"), meta.get("resourceVersion")

        def change(current):
            if current["metadata"].get("uid") != uid:
                raise StatusError.not_found("poddisruptionbudgets", "policy", meta["name"])
            current["metadata"]["resourceVersion"] = version
            current["status"] = status
            return current

        ctx = RequestContext(self._catalog.system_context().user, meta.get("namespace", ""),
                             field_manager=MANAGER)
        try:
            await self._provider.patch(ctx, meta["name"], change, subresource="status")
        except StatusError as e:
            if e.code != 404:
                raise


def _key(obj):
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"

