# -*- test-case-name: tests.controllers.test_statefulset -*-
"""
The StatefulSet controller: pods with stable names, ordinals and claims
(upstream's C{pkg/controller/statefulset}, C{stateful_set_control.go}).

Each StatefulSet is synced alone, keyed C{namespace/name}:

 1. Its pods (those named C{<set>-<n>} its selector matches) and its
    ControllerRevisions are claimed.
 2. The revisions give the current and the update revision (upstream's
    C{getStatefulSetRevisions}): the update revision holds the set's
    template, created when new and renumbered when an older revision
    holds it again (a rollback); the current one is the status's, or the
    update revision when the set has none yet.
 3. Each ordinal in range gets its pod (L{orchd.controllers.statefulsetpods}),
    made at the current revision below the partition and at the update
    revision above it, after its claims from C{volumeClaimTemplates}; a
    finished pod is deleted to be made again; pods of ordinals beyond
    range are deleted, the highest first. With C{OrderedReady} one pod at
    a time: a pod is made only once those below it are Running and Ready,
    and nothing is deleted while another pod is unhealthy; C{Parallel}
    makes and deletes them all at once.
 4. A RollingUpdate deletes, from the highest ordinal down to the
    partition, one pod not at the update revision at a time, once all
    above it are healthy; step 3 makes it again at the update revision.
    OnDelete leaves that to the user.
 5. The claims' owner references follow the retention policy, old
    revisions no pod uses beyond C{revisionHistoryLimit} are deleted and
    the status is written.

No expectations are kept: pod names are fixed, so a create from a cache
behind the store fails with AlreadyExists and the sync is retried.
"""

from twisted.internet.defer import DeferredList, ensureDeferred

from orchd.api.errors import StatusError
from orchd.controllers.base import CacheSyncedController, write_status
from orchd.controllers.controllerref import (
    ControllerRefManager, owner_reference, owner_selector, recheck_owner,
)
from orchd.controllers.events import NORMAL, WARNING, EventRecorder
from orchd.controllers.history import (
    HASH_LABEL, History, RevisionIndex, equal_data, hash_revision, history_limit,
    new_revision, next_number, revision_data, sort_revisions, stale_revisions, template_of,
)
from orchd.controllers.podcontrol import namespace_terminating
from orchd.controllers.podstate import PENDING, controller_ref, keep_pod, ready_since
from orchd.controllers.statefulsetpods import (
    API_VERSION, KIND, claim_name, claim_owners, claim_templates, compute_status,
    identity_labels, in_range, is_created, is_finished, is_healthy, is_member, is_parallel,
    is_terminating, min_ready, new_claim, new_pod, parent_and_ordinal, partition, phase,
    replicas_of, revision_of, running_and_ready, start_ordinal, update_type, with_claim_owners,
)
from orchd.registry.context import RequestContext
from orchd.storage.interfaces import DELETED

COMPONENT = "statefulset-controller"
#: Names tried per sync for a new revision before giving up until the next one.
MAX_COLLISIONS = 10
_STATUS_FIELDS = ("replicas", "readyReplicas", "availableReplicas", "currentReplicas",
                  "updatedReplicas", "currentRevision", "updateRevision", "collisionCount",
                  "observedGeneration")


def keep_claim(claim):
    """An informer C{keep} for claims: identity, owners, deletion."""
    meta = claim["metadata"]
    kept = {"name": meta["name"], "namespace": meta.get("namespace", ""),
            "uid": meta.get("uid", "")}
    for field in ("ownerReferences", "deletionTimestamp"):
        if meta.get(field):
            kept[field] = meta[field]
    return {"metadata": kept}


class _Exit(Exception):
    """The sync waits here (a monotonic set's pod is not yet healthy, or one was just changed)."""


class StatefulSetController(CacheSyncedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    """

    name = "statefulset"

    def __init__(self, catalog, clock, recorder=None):
        super().__init__(catalog, clock)
        self._provider = catalog.resource("apps", "statefulsets")
        self._pods_provider = catalog.resource("", "pods")
        self._claims_provider = catalog.resource("", "persistentvolumeclaims")
        self._owner_prefix = self._provider.info.key_prefix()
        self._pod_prefix = self._pods_provider.info.key_prefix()
        self._claim_prefix = self._claims_provider.info.key_prefix()
        self._recorder = recorder or EventRecorder(catalog, clock, COMPONENT)
        self._history = History(catalog, COMPONENT)
        self._by_uid = {}
        self._names = {}
        #: Pod keys by (namespace, the set name their name gives).
        self._members = {}
        self._revisions = RevisionIndex()
        self._owners = self.follow("apps", "statefulsets", self._owner_changed)
        self._pods = self.follow("", "pods", self._pod_changed, keep=keep_pod)
        self.follow("apps", "controllerrevisions", self._revision_changed)
        self._claims = self.follow("", "persistentvolumeclaims", self._claim_changed,
                                   keep=keep_claim)

    # -- informer handlers -------------------------------------------------------

    def _owner_changed(self, type, obj, old):
        meta = obj["metadata"]
        key = f"{meta.get('namespace', '')}/{meta['name']}"
        if type == DELETED:
            self._by_uid.pop(meta.get("uid"), None)
            self._names.pop(key, None)
        else:
            self._by_uid[meta.get("uid")] = key
            self._names[key] = meta["uid"]
        self.enqueue(key)

    def _pod_changed(self, type, obj, old):
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        parent, _ = parent_and_ordinal(obj)
        if parent is not None:
            members = self._members.setdefault((namespace, parent), set())
            key = f"{namespace}/{meta['name']}"
            if type == DELETED:
                members.discard(key)
                if not members:
                    del self._members[(namespace, parent)]
            else:
                members.add(key)
        for pod in (obj, old):
            if pod is None:
                continue
            ref = controller_ref(pod["metadata"])
            if ref is not None:
                if ref["uid"] in self._by_uid:
                    self.enqueue(self._by_uid[ref["uid"]])
                continue
            parent, _ = parent_and_ordinal(pod)
            if parent is not None and f"{namespace}/{parent}" in self._names:
                self.enqueue(f"{namespace}/{parent}")
        pod = self._pods.cache.get(f"{self._pod_prefix}{namespace}/{meta['name']}")
        ref = controller_ref(meta)
        if pod is not None and ref is not None and ref["uid"] in self._by_uid \
                and running_and_ready(pod) and (old is None or not running_and_ready(old)):
            owner = self._owners.cache.get(self._owner_prefix + self._by_uid[ref["uid"]])
            seconds = min_ready(owner) if owner else 0
            if seconds:
                self.enqueue(self._by_uid[ref["uid"]], after=seconds + 1)

    def _revision_changed(self, type, obj, old):
        uid = self._revisions.changed(type, obj, old, type == DELETED)
        if uid in self._by_uid:
            self.enqueue(self._by_uid[uid])

    def _claim_changed(self, type, obj, old):
        for ref in obj["metadata"].get("ownerReferences") or ():
            if isinstance(ref, dict) and ref.get("uid") in self._by_uid:
                self.enqueue(self._by_uid[ref["uid"]])

    # -- sync --------------------------------------------------------------------

    def _context(self, namespace):
        return RequestContext(self._catalog.system_context().user, namespace,
                              field_manager=COMPONENT)

    def _candidate_pods(self, owner):
        """The cached pods named C{<set>-<n>}: the only ones a set may claim."""
        meta = owner["metadata"]
        keys = self._members.get((meta.get("namespace", ""), meta["name"]), ())
        cache = self._pods.cache
        pods = (cache.get(self._pod_prefix + key) for key in sorted(keys))
        return [pod for pod in pods if pod is not None and is_member(owner, pod)]

    async def _sync(self, key):
        owner = self._owners.cache.get(self._owner_prefix + key)
        if owner is None:
            self._backoff.succeeded(key)
            return
        meta = owner["metadata"]
        namespace = meta.get("namespace", "")
        selector = owner_selector(owner)
        recheck = recheck_owner(self._provider, owner, self._catalog.system_context().user)
        pods, errors = await ControllerRefManager(
            self._pods_provider, owner, API_VERSION, KIND, selector, recheck,
            self._context(namespace)).claim(self._candidate_pods(owner))
        revisions, more = await ControllerRefManager(
            self._history.provider, owner, API_VERSION, KIND, selector, recheck,
            self._context(namespace)).claim(self._revisions.candidates(owner))
        errors += more
        if errors:
            self.retry_later(key, "StatefulSet", errors[0])
            return
        revisions = sort_revisions(revisions)
        try:
            current, update, collisions = await self._revisions_of(owner, revisions)
        except StatusError as e:
            # A refused revision write (a namespace going away, a conflict) is retried.
            self.retry_later(key, "StatefulSet", e)
            return
        error = None
        if not meta.get("deletionTimestamp"):
            try:
                await self._update(owner, pods, current, update)
            except _Exit:
                pass
            except StatusError as e:
                error = e
        status = compute_status(owner, [p for p in pods if is_created(p)],
                                current["metadata"]["name"], update["metadata"]["name"],
                                collisions, self._clock.seconds())
        await self._write_status(owner, status)
        if not meta.get("deletionTimestamp"):
            await self._truncate_history(owner, pods, revisions, status)
        if error is not None:
            self.retry_later(key, "StatefulSet", error)
            return
        self._backoff.succeeded(key)

    # -- revisions ---------------------------------------------------------------

    async def _revisions_of(self, owner, revisions):
        """C{(current, update, collision count)} (upstream's C{getStatefulSetRevisions})."""
        status = owner.get("status") or {}
        collisions = status.get("collisionCount") or 0
        template = (owner.get("spec") or {}).get("template") or {}
        data = revision_data(template)
        latest = next_number(revisions)
        equal = [r for r in revisions if equal_data(r, data)]
        if equal and revisions and equal[-1] is revisions[-1]:
            update = revisions[-1]
        elif equal:
            update = await self._history.renumber(equal[-1], latest)
        else:
            for attempt in range(MAX_COLLISIONS):
                hash = hash_revision(data, collisions)
                made = new_revision(owner, API_VERSION, KIND, template, latest, hash,
                                    {HASH_LABEL: hash})
                try:
                    update = await self._history.create(made)
                    break
                except StatusError as e:
                    if e.code != 409 or attempt == MAX_COLLISIONS - 1:
                        raise
                    collisions += 1
        current = next((r for r in revisions if r["metadata"]["name"] ==
                        status.get("currentRevision")), None)
        return current or update, update, collisions

    async def _truncate_history(self, owner, pods, revisions, status):
        live = {revision_of(p) for p in pods}
        live |= {status["currentRevision"], status["updateRevision"]}
        for revision in stale_revisions(revisions, live, history_limit(owner)):
            await self._history.delete(revision)

    # -- pods --------------------------------------------------------------------

    async def _update(self, owner, pods, current, update):
        """
        Make, remake and delete pods (upstream's C{updateStatefulSet});
        raises L{_Exit} where the set waits.
        """
        start, count = start_ordinal(owner), replicas_of(owner)
        replicas, condemned = [None] * count, []
        for pod in pods:
            _, ordinal = parent_and_ordinal(pod)
            if in_range(owner, ordinal):
                replicas[ordinal - start] = pod
            else:
                condemned.append(pod)
        condemned.sort(key=lambda p: -parent_and_ordinal(p)[1])
        current_template = template_of(current)
        update_template = (owner.get("spec") or {}).get("template") or {}
        rolling = update_type(owner) == "RollingUpdate"
        for i, pod in enumerate(replicas):
            if pod is None:
                ordinal = start + i
                if rolling and ordinal < start + partition(owner):
                    replicas[i] = new_pod(owner, current_template, ordinal,
                                          current["metadata"]["name"])
                else:
                    replicas[i] = new_pod(owner, update_template, ordinal,
                                          update["metadata"]["name"])
        # The first unhealthy pod by ordinal: a monotonic set may delete it though unhealthy.
        unhealthy = next((p for p in replicas + condemned[::-1] if not is_healthy(p)), None)
        monotonic = not is_parallel(owner)
        now = self._clock.seconds()
        work = []
        for pod in replicas:
            step = self._replica(owner, pod, monotonic, now)
            if monotonic:
                await step
            else:
                work.append(ensureDeferred(step))
        await self._gather(work)
        work = []
        for pod in condemned:
            if is_terminating(pod):
                if monotonic:
                    raise _Exit()
                continue
            if monotonic and pod is not unhealthy and not self._available(owner, pod, now):
                raise _Exit()
            step = self._delete_condemned(owner, pod)
            if monotonic:
                await step
                raise _Exit()
            work.append(ensureDeferred(step))
        await self._gather(work)
        if not rolling:
            return
        for target in range(len(replicas) - 1, partition(owner) - 1, -1):
            pod = replicas[target]
            if revision_of(pod) != update["metadata"]["name"] and not is_terminating(pod):
                await self._delete_pod(owner, pod)
                raise _Exit()
            if not is_healthy(pod):
                raise _Exit()

    async def _gather(self, work):
        """Wait for parallel steps; the first error (a wait is none) is raised."""
        if not work:
            return
        results = await DeferredList(work, consumeErrors=True)
        for ok, result in results:
            if not ok and not result.check(_Exit):
                result.raiseException()

    async def _replica(self, owner, pod, monotonic, now):
        """One ordinal in range (upstream's C{processReplica})."""
        if is_created(pod) and is_finished(pod):
            if not is_terminating(pod):
                meta = owner["metadata"]
                failed = (pod.get("status") or {}).get("phase") == "Failed"
                self._recorder.record(
                    owner, WARNING, "RecreatingFailedPod" if failed else "RecreatingTerminatedPod",
                    f"StatefulSet {meta.get('namespace', '')}/{meta['name']} is recreating "
                    f"{'failed' if failed else 'terminated'} Pod {pod['metadata']['name']}")
                await self._delete_pod(owner, pod)
            raise _Exit()
        if not is_created(pod):
            await self._create_claims(owner, pod)
            await self._create_pod(owner, pod)
            raise _Exit()
        if phase(pod) == PENDING and not is_terminating(pod):
            await self._create_claims(owner, pod)     # claims deleted under a waiting pod
        if monotonic:
            if is_terminating(pod) or not running_and_ready(pod):
                raise _Exit()
            seconds = min_ready(owner)
            since = ready_since(pod)
            if seconds and (since is None or not since + seconds < now):
                self.enqueue(self._key(owner), after=max((since or now) + seconds - now, 0) + 1)
                raise _Exit()
        await self._update_claim_owners(owner, pod)
        if not is_terminating(pod):
            await self._restore_identity(owner, pod)

    async def _restore_identity(self, owner, pod):
        """Put back the identity labels a user removed or changed (upstream's C{updateIdentity})."""
        meta = pod["metadata"]
        wanted = identity_labels(pod)
        labels = meta.get("labels") or {}
        if all(labels.get(k) == v for k, v in wanted.items()):
            return
        uid = meta.get("uid")

        def change(current):
            if current["metadata"].get("uid") != uid:
                raise StatusError.conflict("pods", "", meta["name"], "the pod was replaced")
            current["metadata"].setdefault("labels", {}).update(wanted)
            current["metadata"].pop("resourceVersion", None)
            return current

        try:
            await self._pods_provider.patch(
                self._context(meta.get("namespace", "")), meta["name"], change)
        except StatusError as e:
            if e.code != 404:
                raise

    @staticmethod
    def _available(owner, pod, now):
        """Running, ready and available (upstream's C{isRunningAndAvailable})."""
        if not running_and_ready(pod):
            return False
        seconds = min_ready(owner)
        since = ready_since(pod)
        return not seconds or (since is not None and since + seconds < now)

    @staticmethod
    def _key(owner):
        meta = owner["metadata"]
        return f"{meta.get('namespace', '')}/{meta['name']}"

    async def _delete_condemned(self, owner, pod):
        await self._update_claim_owners(owner, pod)
        await self._delete_pod(owner, pod)

    async def _create_pod(self, owner, pod):
        name = pod["metadata"]["name"]
        pod["metadata"]["ownerReferences"] = [owner_reference(API_VERSION, KIND, owner)]
        namespace = owner["metadata"].get("namespace", "")
        set_name = owner["metadata"]["name"]
        try:
            await self._pods_provider.create(self._context(namespace), pod)
        except StatusError as e:
            if not namespace_terminating(e) and e.code != 409:
                self._recorder.record(owner, WARNING, "FailedCreate",
                                      f"create Pod {name} in StatefulSet {set_name} failed "
                                      f"error: {e.message}")
            raise
        self._recorder.record(owner, NORMAL, "SuccessfulCreate",
                              f"create Pod {name} in StatefulSet {set_name} successful")

    async def _delete_pod(self, owner, pod):
        name = pod["metadata"]["name"]
        set_name = owner["metadata"]["name"]
        try:
            await self._pods_provider.delete(self._context(owner["metadata"].get(
                "namespace", "")), name)
        except StatusError as e:
            if e.code == 404:
                return
            self._recorder.record(owner, WARNING, "FailedDelete",
                                  f"delete Pod {name} in StatefulSet {set_name} failed "
                                  f"error: {e.message}")
            raise
        self._recorder.record(owner, NORMAL, "SuccessfulDelete",
                              f"delete Pod {name} in StatefulSet {set_name} successful")

    # -- claims ------------------------------------------------------------------

    def _cached_claim(self, namespace, name):
        return self._claims.cache.get(f"{self._claim_prefix}{namespace}/{name}")

    async def _create_claims(self, owner, pod):
        """
        Create the pod's missing claims before the pod (upstream's
        C{createPersistentVolumeClaims}).
        """
        namespace = owner["metadata"].get("namespace", "")
        _, ordinal = parent_and_ordinal(pod)
        set_name, name = owner["metadata"]["name"], pod["metadata"]["name"]
        for template in claim_templates(owner):
            claim = new_claim(owner, template, ordinal)
            cached = self._cached_claim(namespace, claim["metadata"]["name"])
            if cached is not None:
                if is_terminating(cached):
                    raise StatusError.conflict(
                        "persistentvolumeclaims", "", claim["metadata"]["name"],
                        f"pvc {claim['metadata']['name']} is being deleted")
                continue
            refs = claim_owners(owner, None, ordinal)
            if refs:
                claim["metadata"]["ownerReferences"] = refs
            try:
                await self._claims_provider.create(self._context(namespace), claim)
            except StatusError as e:
                if e.code == 409:
                    continue
                self._recorder.record(
                    owner, WARNING, "FailedCreate",
                    f"create Claim {claim['metadata']['name']} for Pod {name} in StatefulSet "
                    f"{set_name} failed error: {e.message}")
                raise
            self._recorder.record(
                owner, NORMAL, "SuccessfulCreate",
                f"create Claim {claim['metadata']['name']} Pod {name} in StatefulSet "
                f"{set_name} success")

    async def _update_claim_owners(self, owner, pod):
        """Give the pod's claims the owners the retention policy asks for."""
        namespace = owner["metadata"].get("namespace", "")
        _, ordinal = parent_and_ordinal(pod)
        for template in claim_templates(owner):
            name = claim_name(template, owner, ordinal)
            cached = self._cached_claim(namespace, name)
            if cached is None or is_terminating(cached):
                continue
            refs = cached["metadata"].get("ownerReferences") or []
            wanted = with_claim_owners(refs, owner, pod, claim_owners(owner, pod, ordinal))
            if wanted == refs:
                continue

            def change(current, wanted=wanted):
                if wanted:
                    current["metadata"]["ownerReferences"] = wanted
                else:
                    current["metadata"].pop("ownerReferences", None)
                current["metadata"].pop("resourceVersion", None)
                return current

            try:
                await self._claims_provider.patch(self._context(namespace), name, change)
            except StatusError as e:
                if e.code != 404:
                    raise

    # -- status ------------------------------------------------------------------

    async def _write_status(self, owner, status):
        stored = owner.get("status") or {}
        if all(stored.get(f) == status.get(f) for f in _STATUS_FIELDS):
            return
        meta = owner["metadata"]

        def new_status(stored):
            new = dict(stored)
            new.update({f: status[f] for f in _STATUS_FIELDS})
            # A count raised by a sync whose write the cache has not shown yet stays.
            new["collisionCount"] = max(status["collisionCount"],
                                        stored.get("collisionCount") or 0)
            return new

        await write_status(self._provider, self._context(meta.get("namespace", "")), meta,
                           new_status)

