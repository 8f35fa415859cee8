# -*- test-case-name: tests.controllers.test_daemonset -*-
"""
The DaemonSet controller: one pod per eligible node (upstream's
C{pkg/controller/daemon}).

Each DaemonSet is synced alone, keyed C{namespace/name}:

 1. Its pods and ControllerRevisions are claimed (adopting matching
    orphans, as a ReplicaSet does).
 2. Its history is brought up to date (L{orchd.controllers.history}): the
    revision of the current template is found or created and given the
    highest number; its hash is the pods' C{controller-revision-hash}.
 3. Unless expectations are pending, each node gets what it should have
    (L{orchd.controllers.daemonnodes}): a pod created where one should run
    and none is, pinned to the node by affinity so the scheduler places it;
    failed pods deleted (C{FailedDaemonPod}); of several on a node, the
    oldest kept; pods removed from nodes they may no longer run on.
 4. A RollingUpdate replaces old pods: at most C{maxUnavailable} nodes
    without an available pod at a time, or with C{maxSurge} the new pod
    started beside the old one, which goes once the new one is available.
    OnDelete replaces only pods the user deletes.
 5. Revisions beyond C{revisionHistoryLimit} that no pod uses are deleted,
    and the status is written when it changed.

Nodes joining, changing or leaving queue every DaemonSet.
"""

from collections import defaultdict

from twisted.internet.defer import DeferredList, ensureDeferred

from orchd.api.errors import StatusError
from orchd.controllers.base import CacheSyncedController, write_status
from orchd.controllers.controllerref import (
    ControllerRefManager, owner_reference, owner_selector, recheck_owner,
)
from orchd.controllers.daemonnodes import (
    keep_node, pinned_affinity, should_run, target_node, with_daemon_tolerations,
)
from orchd.controllers.daemonupdate import (
    allows_surge, daemon_status, is_rolling, replacements, rolling_bounds, surplus,
)
from orchd.controllers.deploymentutil import compute_hash
from orchd.controllers.events import WARNING, EventRecorder
from orchd.controllers.expectations import Expectations
from orchd.controllers.history import (
    REVISION_LABEL, RevisionIndex, History, equal_data, history_limit, new_revision,
    next_number, number, revision_data, sort_revisions,
)
from orchd.controllers.podcontrol import PodControl, namespace_terminating, slow_start_batch
from orchd.controllers.podstate import (
    FAILED, controller_ref, is_ready, keep_pod, pod_key,
)
from orchd.controllers.replicaset import min_ready_seconds
from orchd.registry.context import RequestContext
from orchd.storage.interfaces import DELETED

COMPONENT = "daemonset-controller"
API_VERSION, KIND = "apps/v1", "DaemonSet"
GENERATION_LABEL = "pod-template-generation"
BURST_REPLICAS = 250
#: Upstream's C{failedPodsBackoff}: the first and the longest wait between
#: deletions of failed pods on one node.
FAILED_POD_BACKOFF, FAILED_POD_MAX_BACKOFF = 1.0, 900.0
_STATUS_FIELDS = ("desiredNumberScheduled", "currentNumberScheduled", "numberMisscheduled",
                  "numberReady", "updatedNumberScheduled", "numberAvailable",
                  "numberUnavailable", "observedGeneration")


def keep_daemon_pod(pod):
    """A pod trimmed for the cache, its node the one it is for even before binding."""
    kept = keep_pod(pod)
    kept["spec"]["nodeName"] = target_node(pod)
    return kept


def template_spec(owner):
    """The pod spec of the DaemonSet's template ({} when it has none)."""
    return (((owner.get("spec") or {}).get("template") or {}).get("spec")) or {}


class DaemonSetController(CacheSyncedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    """

    name = "daemonset"

    def __init__(self, catalog, clock, recorder=None, burst=BURST_REPLICAS):
        super().__init__(catalog, clock)
        self._burst = burst
        self._provider = catalog.resource("apps", "daemonsets")
        self._owner_prefix = self._provider.info.key_prefix()
        self._pod_prefix = catalog.resource("", "pods").info.key_prefix()
        self._recorder = recorder or EventRecorder(catalog, clock, COMPONENT)
        self._control = PodControl(catalog, self._recorder, COMPONENT)
        self._history = History(catalog, COMPONENT)
        self.expectations = Expectations(clock)
        self._owned = defaultdict(set)
        self._orphans = defaultdict(set)
        self._by_uid = {}
        self._failed_pods = {}
        self._hashes = {}
        self._revisions = RevisionIndex()
        self._owners = self.follow("apps", "daemonsets", self._owner_changed)
        self._nodes = self.follow("", "nodes", self._node_changed, keep=keep_node)
        self._pods = self.follow("", "pods", self._pod_changed, keep=keep_daemon_pod)
        self._revision_informer = self.follow("apps", "controllerrevisions",
                                              self._revision_changed)

    # -- informer handlers -------------------------------------------------------

    def _owner_changed(self, type, obj, old):
        meta = obj["metadata"]
        key = f"{meta.get('namespace', '')}/{meta['name']}"
        if type == DELETED:
            self._by_uid.pop(meta.get("uid"), None)
            self._hashes.pop(meta.get("uid"), None)
        else:
            self._by_uid[meta.get("uid")] = key
        self.enqueue(key)

    def _enqueue_all(self):
        for key in sorted(self._by_uid.values()):
            self.enqueue(key)

    def _node_changed(self, type, obj, old):
        if type == DELETED or old is None or self._nodes.cache.get(
                self._nodes_key(obj)) != old:
            self._enqueue_all()

    def _nodes_key(self, node):
        return self._catalog.resource("", "nodes").info.key_prefix() + node["metadata"]["name"]

    def _enqueue_matching(self, namespace, labels):
        """Queue the DaemonSets of the namespace whose selector matches an orphan's labels."""
        for key in sorted(self._by_uid.values()):
            if key.split("/", 1)[0] != namespace:
                continue
            owner = self._owners.cache.get(self._owner_prefix + key)
            if owner is not None and owner_selector(owner).matches(labels or {}):
                self.enqueue(key)

    def _pod_changed(self, type, obj, old):
        meta = obj["metadata"]
        key = f"{meta.get('namespace', '')}/{meta['name']}"
        kept = old if type == DELETED else self._pods.cache.get(self._pod_prefix + key)
        if kept is None:
            return
        for pod, add in ((old, False), (None if type == DELETED else kept, True)):
            if pod is None:
                continue
            ref = controller_ref(pod["metadata"])
            bucket = self._owned[ref["uid"]] if ref else self._orphans[
                pod["metadata"].get("namespace", "")]
            (bucket.add if add else bucket.discard)(key)
        ref = controller_ref(kept["metadata"])
        owner = self._by_uid.get(ref["uid"]) if ref else None
        if owner is None:
            if ref is None:
                self._enqueue_matching(meta.get("namespace", ""),
                                       kept["metadata"].get("labels"))
            if old is not None:
                old_ref = controller_ref(old["metadata"])
                if old_ref and old_ref["uid"] in self._by_uid:
                    self.enqueue(self._by_uid[old_ref["uid"]])
            return
        if type == DELETED or kept["metadata"].get("deletionTimestamp"):
            self.expectations.deletion_observed(owner, key)
        elif old is None:
            self.expectations.creation_observed(owner)
        self.enqueue(owner)
        min_ready = min_ready_seconds(
            self._owners.cache.get(self._owner_prefix + owner) or {})
        if min_ready and type != DELETED and is_ready(kept) and (old is None or not is_ready(old)):
            self.enqueue(owner, after=min_ready + 1)

    def _revision_changed(self, type, obj, old):
        uid = self._revisions.changed(type, obj, old, type == DELETED)
        if uid in self._by_uid:
            self.enqueue(self._by_uid[uid])

    # -- sync --------------------------------------------------------------------

    def _context(self, namespace):
        return RequestContext(self._catalog.system_context().user, namespace,
                              field_manager=COMPONENT)

    def _candidate_pods(self, owner):
        meta = owner["metadata"]
        keys = self._owned.get(meta["uid"], set()) | self._orphans.get(
            meta.get("namespace", ""), set())
        cache = self._pods.cache
        return [p for p in (cache.get(self._pod_prefix + k) for k in sorted(keys))
                if p is not None]

    async def _sync(self, key):
        owner = self._owners.cache.get(self._owner_prefix + key)
        if owner is None:
            self.expectations.forget(key)
            self._backoff.succeeded(key)
            for failed in [k for k in self._failed_pods if k[0] == key]:
                del self._failed_pods[failed]
            return
        meta = owner["metadata"]
        if meta.get("deletionTimestamp"):
            return
        namespace = meta.get("namespace", "")
        selector = owner_selector(owner)
        recheck = recheck_owner(self._provider, owner, self._catalog.system_context().user)
        pods, errors = await ControllerRefManager(
            self._catalog.resource("", "pods"), owner, API_VERSION, KIND, selector, recheck,
            self._context(namespace)).claim(self._candidate_pods(owner))
        revisions, more = await ControllerRefManager(
            self._history.provider, owner, API_VERSION, KIND, selector, recheck,
            self._context(namespace)).claim(self._revisions.candidates(owner))
        errors += more
        if errors:
            self.retry_later(key, "DaemonSet", errors[0])
            return
        try:
            current, old = await self._construct_history(owner, revisions)
        except StatusError as e:
            # A refused revision write (a namespace going away, a conflict) is retried.
            self.retry_later(key, "DaemonSet", e)
            return
        if current is None:
            return
        hash = current["metadata"]["labels"][REVISION_LABEL]
        by_node = defaultdict(list)
        for pod in pods:
            by_node[pod["spec"].get("nodeName") or ""].append(pod)
        # Each node's (name, should run, should continue running), worked out once a sync.
        spec = template_spec(owner)
        nodes = [(node["metadata"]["name"], *should_run(spec, node)) for node in
                 sorted(self._nodes.cache.values(), key=lambda n: n["metadata"]["name"])]
        error = None
        if self.expectations.satisfied(key):
            error = await self._manage(key, owner, nodes, by_node, hash)
            # As upstream, an update step waits until what manage wrote has been seen.
            if error is None and is_rolling(owner) and self.expectations.satisfied(key):
                error = await self._rolling_update(key, owner, nodes, by_node, hash)
            if error is None:
                await self._cleanup_history(owner, pods, old)
        await self._write_status(owner, nodes, by_node, hash)
        if error is not None:
            self.retry_later(key, "DaemonSet", error)
            return
        self._backoff.succeeded(key)

    # -- history -----------------------------------------------------------------

    async def _construct_history(self, owner, revisions):
        """
        The current revision (created, or renumbered to be the newest) and
        the others (upstream's C{constructHistory}); None when the
        collision count was raised and the sync must start again.
        """
        template = (owner.get("spec") or {}).get("template") or {}
        data = revision_data(template)
        status = owner.get("status") or {}
        collisions = status.get("collisionCount")
        hash = self._hash(owner, template, collisions)
        current, old = [], []
        for revision in revisions:
            same = equal_data(revision, data)
            labels = revision["metadata"].get("labels") or {}
            if REVISION_LABEL not in labels:
                # An adopted revision without the label gets it (a copy: the cache stays as is).
                wanted = hash if same else revision["metadata"]["name"].rsplit("-", 1)[-1]
                await self._history.relabel(revision, {REVISION_LABEL: wanted})
                revision = dict(revision, metadata=dict(
                    revision["metadata"], labels=dict(labels, **{REVISION_LABEL: wanted})))
            (current if same else old).append(revision)
        latest = next_number(old)
        if not current:
            revision = new_revision(owner, API_VERSION, KIND, template, latest, hash,
                                    {REVISION_LABEL: hash})
            try:
                return await self._history.create(revision), old
            except StatusError as e:
                if e.code != 409:
                    raise
                await self._bump_collisions(owner)
                return None, old
        current = sort_revisions(current)
        keep = current[-1]
        for duplicate in current[:-1]:
            await self._history.delete(duplicate)
        if number(keep) < latest:
            keep = await self._history.renumber(keep, latest)
        return keep, old

    def _hash(self, owner, template, collisions):
        """The template's hash, computed again only when the generation or collisions change."""
        meta = owner["metadata"]
        seen = (meta["uid"], meta.get("generation"), collisions)
        cached = self._hashes.get(meta["uid"])
        if cached is None or cached[0] != seen:
            cached = self._hashes[meta["uid"]] = (seen, compute_hash(template, collisions))
        return cached[1]

    async def _bump_collisions(self, owner):
        meta = owner["metadata"]
        seen = (owner.get("status") or {}).get("collisionCount")

        def change(current):
            status = current.setdefault("status", {})
            if status.get("collisionCount") == seen:
                status["collisionCount"] = (seen or 0) + 1
            current["metadata"].pop("resourceVersion", None)
            return current

        await self._provider.patch(self._context(meta.get("namespace", "")), meta["name"],
                                   change, subresource="status")

    async def _cleanup_history(self, owner, pods, old):
        """
        Delete the oldest old revisions no pod uses, as many as the old ones
        exceed C{revisionHistoryLimit} by (upstream's C{cleanupHistory}: the
        old revisions pods still use count towards the limit).
        """
        live = {(p["metadata"].get("labels") or {}).get(REVISION_LABEL) for p in pods}
        excess = len(old) - history_limit(owner)
        for revision in sort_revisions(old):
            if excess <= 0:
                break
            if (revision["metadata"].get("labels") or {}).get(REVISION_LABEL) in live:
                continue
            await self._history.delete(revision)
            excess -= 1

    # -- pods per node ---------------------------------------------------------------

    async def _manage(self, key, owner, nodes, by_node, hash):
        """Create and delete pods so that each node has what it should (upstream's C{manage})."""
        surge = allows_surge(owner)
        min_ready = min_ready_seconds(owner)
        now = self._clock.seconds()
        create, delete = [], []
        for name, run, keep_running in nodes:
            pods = by_node.get(name, [])
            if run and not pods:
                create.append(name)
            elif keep_running:
                running = []
                for pod in pods:
                    if pod["metadata"].get("deletionTimestamp"):
                        continue
                    if (pod.get("status") or {}).get("phase") == FAILED:
                        wait = self._failed_pod_backoff(key, name, now)
                        if wait:
                            self.enqueue(key, after=wait)
                            continue
                        self._recorder.record(
                            owner, WARNING, "FailedDaemonPod",
                            f"Found failed daemon pod {pod_key(pod)} on node {name}, "
                            f"will try to kill it")
                        delete.append(pod)
                        continue
                    running.append(pod)
                if surge and not running and run:
                    create.append(name)   # surging keeps one pod that is not going
                delete += surplus(running, hash, surge, min_ready, now)
            else:
                delete += [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return await self._sync_nodes(key, owner, delete, create, hash)

    def _failed_pod_backoff(self, key, node, now):
        """
        Seconds to wait before deleting another failed pod of C{key} on
        C{node}, or 0 after starting the next wait: a node whose kubelet
        rejects the pod must not make the controller spin (upstream's
        C{failedPodsBackoff}, 1 s doubling to 15 minutes).
        """
        delay, until = self._failed_pods.get((key, node), (0, 0))
        if now < until:
            return until - now
        if now - until > 2 * FAILED_POD_MAX_BACKOFF:
            delay = 0
        delay = min(delay * 2, FAILED_POD_MAX_BACKOFF) if delay else FAILED_POD_BACKOFF
        self._failed_pods[(key, node)] = (delay, now + delay)
        return 0

    async def _rolling_update(self, key, owner, nodes, by_node, hash):
        """Replace old pods within the RollingUpdate bounds (upstream's C{rollingUpdate})."""
        eligible = [name for name, run, _ in nodes if run]
        surge, unavailable = rolling_bounds(owner, len(eligible))
        to_delete, to_create = replacements(
            [by_node.get(name, []) for name in eligible], eligible, hash, surge, unavailable,
            min_ready_seconds(owner), self._clock.seconds())
        return await self._sync_nodes(key, owner, to_delete, to_create, hash)

    async def _sync_nodes(self, key, owner, delete, create, hash):
        """Create pods for the nodes C{create}, delete the pods C{delete}; the first error."""
        if not delete and not create:
            return None
        create = create[:self._burst]
        delete = delete[:self._burst]
        self.expectations.expect(key, len(create), [pod_key(p) for p in delete])
        template = self._pod_template(owner, hash)
        reference = owner_reference(API_VERSION, KIND, owner)
        nodes = iter(create)
        error = None

        async def one():
            node = next(nodes)
            pinned = dict(template, spec=dict(
                template["spec"], affinity=pinned_affinity(template["spec"].get("affinity"),
                                                           node)))
            try:
                await self._control.create(owner, pinned, reference)
            except StatusError as e:
                if not namespace_terminating(e):
                    raise

        if create:
            successes, error = await slow_start_batch(len(create), one)
            for _ in range(len(create) - successes):
                self.expectations.creation_observed(key)
        if delete:
            results = await DeferredList(
                [ensureDeferred(self._control.delete_expected(owner, p, self.expectations, key)) for p in delete],
                consumeErrors=True)
            for ok, result in results:
                if not ok:
                    result.trap(StatusError)
                    error = error or result.value
        return error

    def _pod_template(self, owner, hash):
        """The template of new pods: the revision hash, the generation and daemon tolerations."""
        template = (owner.get("spec") or {}).get("template") or {}
        template_meta = dict(template.get("metadata") or {})
        labels = dict(template_meta.get("labels") or {})
        labels[REVISION_LABEL] = hash
        labels[GENERATION_LABEL] = str(owner["metadata"].get("generation") or 1)
        template_meta["labels"] = labels
        spec = dict(template.get("spec") or {})
        spec["tolerations"] = with_daemon_tolerations(spec)
        return {"metadata": template_meta, "spec": spec}

    # -- status ------------------------------------------------------------------

    async def _write_status(self, owner, nodes, by_node, hash):
        status = daemon_status(owner, nodes, by_node, hash, self._clock.seconds())
        if status == (owner.get("status") or {}):
            return
        meta = owner["metadata"]
        await write_status(self._provider, self._context(meta.get("namespace", "")), meta,
                           lambda stored: {**stored, **{f: status[f] for f in _STATUS_FIELDS}})
