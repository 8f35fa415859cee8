# -*- test-case-name: tests.controllers.test_job -*-
"""
The Job controller (upstream's C{pkg/controller/job}): runs a Job's pods
until enough succeed or the Job fails, and keeps its status.

Each Job is synced alone, keyed C{namespace/name}, from the store (not the
cache: its counters must never go back):

 1. Its pods are claimed (L{orchd.controllers.controllerref}), finished
    ones included.
 2. Finished pods are counted exactly once, as upstream: a pod is created
    with the finalizer L{TRACKING_FINALIZER}; once it has succeeded or
    failed its uid goes to C{status.uncountedTerminatedPods}, the finalizer
    is removed, and the uid moves to C{succeeded} or C{failed}. A pod whose
    finalizer this controller removed is never counted again, even from a
    cache that lags behind.
 3. The Job's outcome: a C{FailureTarget} condition (pod failure policy
    C{FailJob}, failures over C{backoffLimit}, C{activeDeadlineSeconds}
    passed) or C{SuccessCriteriaMet}, after which the remaining pods are
    deleted, and the terminal C{Failed} or C{Complete} once none is left.
 4. Otherwise pods are created (after the failure back-off, 10 s doubling)
    or deleted towards the parallelism: NonIndexed as
    C{min(parallelism, completions - succeeded)}, Indexed the lowest
    pending indexes first, each pod named C{<job>-<index>-xxxxx} with
    hostname C{<job>-<index>}. A suspended Job has no pods.

Pods left with the finalizer when their Job is gone (or being deleted)
have it removed, so the garbage collector can take them.
"""

import copy
from collections import defaultdict

from twisted.internet.defer import DeferredList, ensureDeferred

from orchd.api.errors import StatusError
from orchd.controllers import jobutil as ju
from orchd.controllers.base import CacheSyncedController
from orchd.controllers.controllerref import ControllerRefManager, owner_selector, recheck_owner
from orchd.controllers.events import NORMAL, WARNING, EventRecorder
from orchd.controllers.expectations import Expectations
from orchd.controllers.jobpods import pod_for, removal_order
from orchd.controllers.podcontrol import namespace_terminating, slow_start_batch
from orchd.controllers.podstate import controller_ref, is_active, parse_time, pod_key
from orchd.registry.context import RequestContext
from orchd.registry.kinds.batch import CONTROLLER_UID
from orchd.registry.options import DeleteOptions
from orchd.storage.interfaces import DELETED

COMPONENT = "job-controller"
#: Upstream's C{MaxPodCreateDeletePerSync}.
MAX_CREATE_DELETE = 500
#: Keys of pods whose finalizer is to go (their Job is gone) start with this.
_ORPHAN = "~"


def _generated_uid(job):
    """The uid a Job's selector requires of pods' controller-uid label, or None."""
    match = ((job.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    uid = match.get(CONTROLLER_UID)
    return uid if isinstance(uid, str) else None


class JobController(CacheSyncedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    """

    name = "job"

    def __init__(self, catalog, clock, recorder=None):
        super().__init__(catalog, clock)
        self._jobs_provider = catalog.resource("batch", "jobs")
        self._pods_provider = catalog.resource("", "pods")
        self._job_prefix = self._jobs_provider.info.key_prefix()
        self._pod_prefix = self._pods_provider.info.key_prefix()
        self._recorder = recorder or EventRecorder(catalog, clock, COMPONENT)
        self.expectations = Expectations(clock)
        self._owned = defaultdict(set)
        self._orphans = defaultdict(set)
        #: (namespace, controller-uid label) -> orphan pod keys: the only orphans a
        #: Job with a generated selector can match, found without scanning them all.
        self._orphans_by_uid = defaultdict(set)
        #: Job uid -> uids of pods whose finalizer was removed here (counted).
        self._uncounting = defaultdict(set)
        #: Job uid -> (failures in a row, time of the last).
        self._failures = {}
        self._names = defaultdict(set)
        #: (namespace, uid) -> name of the Job whose generated selector is on that uid,
        #: and namespace -> names of Jobs with selectors of their own: the only Jobs
        #: an orphan pod can match, found without trying every Job of the namespace.
        self._generated = {}
        self._manual = defaultdict(set)
        self._jobs = self.follow("batch", "jobs", self._job_changed)
        self._pods = self.follow("", "pods", self._pod_changed, keep=ju.keep_job_pod)

    # -- informer handlers -----------------------------------------------------------

    def _job_changed(self, type, obj, old):
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        key = f"{namespace}/{meta['name']}"
        if old is not None:
            self._index_job(old, False)
        if type != DELETED:
            self._names[namespace].add(meta["name"])
            self._index_job(obj, True)
        else:
            self._names[namespace].discard(meta["name"])
            if not self._names[namespace]:
                del self._names[namespace]
            uid = meta.get("uid")
            for pod_name in sorted(self._owned.get(uid, ())):
                self.enqueue(_ORPHAN + pod_name)
            self._failures.pop(uid, None)
            self._uncounting.pop(uid, None)
        self.enqueue(key)

    def _index_job(self, job, add):
        meta = job["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        uid = _generated_uid(job)
        if uid is not None:
            if add:
                self._generated[(namespace, uid)] = name
            elif self._generated.get((namespace, uid)) == name:
                del self._generated[(namespace, uid)]
        elif add:
            self._manual[namespace].add(name)
        else:
            self._manual[namespace].discard(name)
            if not self._manual[namespace]:
                del self._manual[namespace]

    def _job_key(self, namespace, ref):
        """The key of the cached Job C{ref} names, or None."""
        if ref is None or ref.get("kind") != "Job":
            return None
        key = f"{namespace}/{ref.get('name')}"
        job = self._jobs.cache.get(self._job_prefix + key)
        if job is None or job["metadata"].get("uid") != ref["uid"]:
            return None
        return key

    def _index(self, pod, add):
        meta = pod["metadata"]
        ref = controller_ref(meta)
        buckets = [(self._owned, ref["uid"])] if ref is not None else \
            [(self._orphans, meta.get("namespace", ""))]
        label = (meta.get("labels") or {}).get(CONTROLLER_UID)
        if ref is None and isinstance(label, str):
            buckets.append((self._orphans_by_uid, (meta.get("namespace", ""), label)))
        for index, name in buckets:
            bucket = index[name]
            if add:
                bucket.add(pod_key(pod))
            else:
                bucket.discard(pod_key(pod))
                if not bucket:
                    del index[name]

    def _pod_changed(self, type, obj, old):
        if old is not None:
            self._index(old, False)
        kept = old if type == DELETED else self._pods.cache.get(
            self._pod_prefix + pod_key(obj)) or ju.keep_job_pod(obj)
        if kept is None:
            return
        if type != DELETED:
            self._index(kept, True)
        meta = kept["metadata"]
        namespace = meta.get("namespace", "")
        ref = ju.owned_by_job(kept)
        if ref is None:
            if type != DELETED and old is None and controller_ref(meta) is None:
                self._enqueue_matching(namespace, meta.get("labels"))
            return
        if type == DELETED or not ju.has_tracking_finalizer(kept):
            removed = self._uncounting.get(ref["uid"])
            if removed is not None:
                removed.discard(meta.get("uid"))
        key = self._job_key(namespace, ref)
        if key is None:
            if type != DELETED and ju.has_tracking_finalizer(kept):
                self.enqueue(_ORPHAN + pod_key(kept))
            return
        if old is None and type != DELETED:
            self.expectations.creation_observed(key)
        if type == DELETED or (meta.get("deletionTimestamp")
                               and not (old or {}).get("metadata", {}).get("deletionTimestamp")):
            self.expectations.deletion_observed(key, pod_key(kept))
        self.enqueue(key)

    def _enqueue_matching(self, namespace, labels):
        names = set(self._manual.get(namespace, ()))
        uid = (labels or {}).get(CONTROLLER_UID)
        if isinstance(uid, str) and (namespace, uid) in self._generated:
            names.add(self._generated[(namespace, uid)])
        for name in sorted(names):
            job = self._jobs.cache.get(f"{self._job_prefix}{namespace}/{name}")
            if job is not None and owner_selector(job).matches(labels or {}):
                self.enqueue(f"{namespace}/{name}")

    # -- helpers ---------------------------------------------------------------------

    def _context(self, namespace):
        return RequestContext(self._catalog.system_context().user, namespace,
                              field_manager=COMPONENT)

    def _orphan_candidates(self, job):
        """The orphans of C{job}'s namespace its selector may match."""
        namespace = job["metadata"].get("namespace", "")
        uid = _generated_uid(job)
        if uid is not None:
            return self._orphans_by_uid.get((namespace, uid), set())
        return self._orphans.get(namespace, set())

    def _cached_pods(self, keys):
        cache, prefix = self._pods.cache, self._pod_prefix
        return [pod for pod in (cache.get(prefix + key) for key in sorted(keys))
                if pod is not None]

    async def _remove_finalizer(self, pod):
        """Remove our finalizer from C{pod}; True once it is gone (or the pod is)."""
        meta = pod["metadata"]
        uid = meta.get("uid")

        def change(current):
            current_meta = current["metadata"]
            if current_meta.get("uid") != uid:
                raise StatusError.not_found("pods", "", meta["name"])
            finalizers = [f for f in current_meta.get("finalizers") or ()
                          if f != ju.TRACKING_FINALIZER]
            if finalizers:
                current_meta["finalizers"] = finalizers
            else:
                current_meta.pop("finalizers", None)
            current_meta.pop("resourceVersion", None)
            return current

        try:
            await self._pods_provider.patch(self._context(meta.get("namespace", "")),
                                            meta["name"], change)
        except StatusError as e:
            if e.code != 404:
                raise
        return True

    async def _release_orphan(self, key):
        """A pod whose Job is gone loses our finalizer (checked against the store)."""
        pod = self._pods.cache.get(self._pod_prefix + key)
        if pod is None or not ju.has_tracking_finalizer(pod):
            return
        ref = ju.owned_by_job(pod)
        if ref is not None:
            namespace = pod["metadata"].get("namespace", "")
            job = await self.get_or_none(self._jobs_provider, namespace, ref.get("name"))
            if job is not None and job["metadata"].get("uid") == ref.get("uid") \
                    and not job["metadata"].get("deletionTimestamp") and not ju.is_finished(job):
                self.enqueue(f"{namespace}/{ref.get('name')}")
                return
        await self._remove_finalizer(pod)

    # -- sync ------------------------------------------------------------------------

    async def _sync(self, key):
        if key.startswith(_ORPHAN):
            await self._release_orphan(key[len(_ORPHAN):])
            return
        namespace, _, name = key.partition("/")
        job = await self.get_or_none(self._jobs_provider, namespace, name)
        if job is None:
            self.expectations.forget(key)
            self._backoff.succeeded(key)
            return
        try:
            await self._sync_job(key, job)
        except StatusError as e:
            if e.code == 404:
                return
            self.retry_later(key, "Job", e)
            return
        self._backoff.succeeded(key)

    async def _claim(self, job):
        meta = job["metadata"]
        namespace = meta.get("namespace", "")
        candidates = self._cached_pods(self._owned.get(meta["uid"], set()))
        candidates += [p for p in self._cached_pods(self._orphan_candidates(job))
                       if is_active(p)]
        manager = ControllerRefManager(
            self._pods_provider, job, "batch/v1", "Job", owner_selector(job),
            recheck_owner(self._jobs_provider, job, self._catalog.system_context().user),
            self._context(namespace))
        pods, errors = await manager.claim(candidates)
        if errors:
            raise errors[0]
        return pods

    async def _sync_job(self, key, job):
        meta = job["metadata"]
        uid = meta["uid"]
        pods = await self._claim(job)
        if meta.get("deletionTimestamp") or ju.is_finished(job):
            # Nothing more is counted: every pod may go.
            await self._release_all(job, pods)
            return
        now = self._clock.seconds()
        status = copy.deepcopy(job.get("status") or {})
        fail_job = await self._count_finished(job, pods, status, now)
        removed = self._uncounting.get(uid, set())
        active = [p for p in pods if is_active(p)]
        terminating = [p for p in pods if ju.is_terminating(p)]
        conditions = [c for c in status.get("conditions") or () if isinstance(c, dict)]
        interim = ju.interim_condition(job)
        if interim is None:
            outcome = self._outcome(job, status, active, fail_job, now)
            if outcome is not None:
                interim = ju.new_condition(*outcome, now)
                conditions = ju.set_condition(conditions, interim)
        suspended = ju.job_spec(job).get("suspend") is True
        if interim is not None or suspended:
            deleted = await self._delete_pods(key, job, active)
            active = [p for p in active if pod_key(p) not in deleted]
            terminating += [p for p in pods if pod_key(p) in deleted]
        if interim is None:
            conditions = self._suspension(job, status, conditions, suspended, now)
            if not suspended:
                if not status.get("startTime"):
                    status["startTime"] = ju.rfc3339(now)
                active = await self._manage(key, job, status, active, now,
                                            len({pod_key(p) for p in terminating}))
        else:
            uncounted = status.get("uncountedTerminatedPods") or {}
            left = [p for p in pods if is_active(p) or ju.is_terminating(p)
                    or (ju.has_tracking_finalizer(p) and p["metadata"]["uid"] not in removed)]
            if not left and not uncounted.get("succeeded") and not uncounted.get("failed"):
                terminal = ju.TERMINAL_OF[interim["type"]]
                conditions = ju.set_condition(conditions, ju.new_condition(
                    terminal, interim.get("reason", ""), interim.get("message", ""), now))
                if terminal == ju.COMPLETE:
                    status["completionTime"] = ju.rfc3339(now)
                    self._recorder.record(job, NORMAL, "Completed", "Job completed")
                else:
                    self._recorder.record(job, WARNING, interim.get("reason", ""),
                                          interim.get("message", ""))
        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if ju.is_job_pod_ready(p))
        status["terminating"] = len({pod_key(p) for p in terminating})
        if conditions:
            status["conditions"] = conditions
        else:
            status.pop("conditions", None)
        status.setdefault("uncountedTerminatedPods", {})
        await self._write_status(job, status)
        self._requeue_deadline(key, job, status, now)

    # -- counting --------------------------------------------------------------------

    async def _count_finished(self, job, pods, status, now):
        """
        Count the pods that finished, exactly once (see the module's
        docstring); C{status} is updated in place and written. Returns the
        message of a pod failure policy C{FailJob} match, or None.
        """
        uid = job["metadata"]["uid"]
        removed = self._uncounting[uid]
        uncounted = status.get("uncountedTerminatedPods") or {}
        pending = {"succeeded": list(uncounted.get("succeeded") or ()),
                   "failed": list(uncounted.get("failed") or ())}
        indexed = ju.is_indexed(job)
        total = ju.completions(job) or 0
        done = ju.parse_indexes(status.get("completedIndexes"), total) if indexed else set()
        finishing = ju.interim_condition(job) is not None
        release, fail_job, new_failures, new_success = [], None, 0, False
        by_uid = {p["metadata"]["uid"]: p for p in pods}
        for pod in pods:
            pod_uid = pod["metadata"]["uid"]
            if not ju.has_tracking_finalizer(pod) or pod_uid in removed:
                continue
            if pod_uid in pending["succeeded"] or pod_uid in pending["failed"]:
                release.append(pod)
                continue
            if ju.is_succeeded(pod):
                index = ju.completion_index(pod)
                if indexed and index is not None and index < total:
                    done.add(index)
                pending["succeeded"].append(pod_uid)
                new_success = True
                release.append(pod)
            elif ju.is_failed(pod, job) or (finishing and not is_active(pod)) \
                    or (finishing and pod["metadata"].get("deletionTimestamp")):
                action, message = ju.failure_policy_action(job, pod)
                release.append(pod)
                index = ju.completion_index(pod)
                if action == "Ignore" or (indexed and (index is None or index >= total)):
                    # Ignored, or an index the Job no longer has: not a failure.
                    continue
                if action == "FailJob" and fail_job is None:
                    fail_job = message
                pending["failed"].append(pod_uid)
                new_failures += 1
        if not release and not any(pending.values()):
            return fail_job
        if new_success:
            self._failures.pop(uid, None)
        if new_failures:
            count, _ = self._failures.get(uid, (0, now))
            self._failures[uid] = (count + new_failures, now)
        if indexed:
            status["completedIndexes"] = ju.format_indexes(done)
            status["succeeded"] = len(done)
        status["uncountedTerminatedPods"] = {k: v for k, v in pending.items() if v}
        if status != (job.get("status") or {}):
            await self._write_status(job, status)
        results = await DeferredList([ensureDeferred(self._remove_finalizer(p)) for p in release],
                                     consumeErrors=True)
        for pod, (ok, result) in zip(release, results):
            if ok:
                removed.add(pod["metadata"]["uid"])
            else:
                result.trap(StatusError)
        for field in ("succeeded", "failed"):
            # Counted: the uids whose pod lost its finalizer, here or before
            # (by a controller stopped between its two writes), or is gone.
            moved = [u for u in pending[field]
                     if u in removed or u not in by_uid
                     or not ju.has_tracking_finalizer(by_uid[u])]
            pending[field] = [u for u in pending[field] if u not in moved]
            if not (field == "succeeded" and indexed):
                status[field] = (status.get(field) or 0) + len(moved)
            if not status.get(field):
                status.pop(field, None)
        status["uncountedTerminatedPods"] = {k: v for k, v in pending.items() if v}
        return fail_job

    # -- outcome ---------------------------------------------------------------------

    def _outcome(self, job, status, active, fail_job, now):
        """The C{(type, reason, message)} of the interim condition reached, or None."""
        if fail_job is not None:
            return ju.FAILURE_TARGET, ju.POD_FAILURE_POLICY, fail_job
        limit = ju.backoff_limit(job)
        failed = status.get("failed") or 0
        if failed > limit:
            return (ju.FAILURE_TARGET,) + ju.BACKOFF_LIMIT_EXCEEDED
        if ju.restart_policy(job) == "OnFailure":
            restarts = sum(ju.restarts(p) for p in active)
            if (limit == 0 and restarts > 0) or (limit > 0 and restarts >= limit):
                return (ju.FAILURE_TARGET,) + ju.BACKOFF_LIMIT_EXCEEDED
        if self._past_deadline(job, status, now):
            return (ju.FAILURE_TARGET,) + ju.DEADLINE_EXCEEDED
        succeeded = status.get("succeeded") or 0
        total = ju.completions(job)
        if total is None:
            reached = succeeded > 0 and not active
        else:
            reached = succeeded >= total
        if reached:
            return (ju.SUCCESS_CRITERIA_MET,) + ju.COMPLETIONS_REACHED
        return None

    @staticmethod
    def _deadline(job, status):
        seconds = ju.job_spec(job).get("activeDeadlineSeconds")
        start = parse_time(status.get("startTime"))
        if not isinstance(seconds, int) or isinstance(seconds, bool) or start is None \
                or ju.job_spec(job).get("suspend") is True:
            return None
        return start + seconds

    def _past_deadline(self, job, status, now):
        deadline = self._deadline(job, status)
        return deadline is not None and now >= deadline

    def _requeue_deadline(self, key, job, status, now):
        deadline = self._deadline(job, status)
        if deadline is not None and deadline > now and ju.interim_condition(
                {"status": status}) is None:
            self.enqueue(key, after=deadline - now)

    def _suspension(self, job, status, conditions, suspended, now):
        """The Suspended condition after a suspend or resume, with its event."""
        current = next((c for c in conditions if c.get("type") == ju.SUSPENDED), None)
        was = current is not None and current.get("status") == "True"
        if suspended and not was:
            self._recorder.record(job, NORMAL, "Suspended", "Job suspended")
            status.pop("startTime", None)
            return ju.set_condition(conditions, ju.new_condition(
                ju.SUSPENDED, "JobSuspended", "Job suspended", now))
        if not suspended and was:
            self._recorder.record(job, NORMAL, "Resumed", "Job resumed")
            status["startTime"] = ju.rfc3339(now)
            return ju.set_condition(conditions, ju.new_condition(
                ju.SUSPENDED, "JobResumed", "Job resumed", now, status="False"))
        return conditions

    # -- pods ------------------------------------------------------------------------

    async def _manage(self, key, job, status, active, now, terminating=0):
        """
        Create or delete pods towards the parallelism; returns the pods now
        active. With C{podReplacementPolicy: Failed} (or a pod failure
        policy) the C{terminating} pods still take their place.
        """
        if not self.expectations.satisfied(key):
            return active
        want = ju.parallelism(job)
        if ju.only_replace_failed(job):
            want = max(want - terminating, 0)
        total = ju.completions(job)
        succeeded = status.get("succeeded") or 0
        surplus = []
        if ju.is_indexed(job):
            done = ju.parse_indexes(status.get("completedIndexes"), total)
            running = set()
            for pod in removal_order(active)[::-1]:
                index = ju.completion_index(pod)
                # An index out of range (completions lowered), already done, or
                # run twice: the pod goes (upstream keeps one pod per index).
                if index is None or index >= total or index in done or index in running:
                    surplus.append(pod)
                else:
                    running.add(index)
            kept = len(active) - len(surplus)
            pending = [i for i in range(total) if i not in done and i not in running]
            want = min(want, kept + len(pending))
            surplus += [p for p in removal_order(active) if p not in surplus][:kept - want]
            indexes = pending[:max(want - kept, 0)]
        else:
            if total is None:
                want = len(active) if succeeded > 0 else want
            else:
                want = min(want, max(total - succeeded, 0))
            surplus = removal_order(active)[:max(len(active) - want, 0)]
            indexes = [None] * max(want - len(active), 0)
        if surplus:
            deleted = await self._delete_pods(key, job, surplus)
            return [p for p in active if pod_key(p) not in deleted]
        if not indexes:
            return active
        failures, last = self._failures.get(job["metadata"]["uid"], (0, now))
        wait = last + ju.failure_backoff(failures) - now
        if wait > 0:
            self.enqueue(key, after=wait)
            return active
        indexes = indexes[:MAX_CREATE_DELETE]
        await self._create_pods(key, job, indexes)
        return active

    async def _create_pods(self, key, job, indexes):
        namespace = job["metadata"].get("namespace", "")
        self.expectations.expect_creations(key, len(indexes))
        pending = list(indexes)

        async def create():
            index = pending.pop(0)
            try:
                pod = pod_for(job, index)
                created = await self._pods_provider.create(self._context(namespace), pod)
            except StatusError as e:
                if namespace_terminating(e):
                    return
                self._recorder.record(job, WARNING, "FailedCreate",
                                      f"Error creating: {e.message}")
                raise
            self._recorder.record(job, NORMAL, "SuccessfulCreate",
                                  f"Created pod: {created['metadata']['name']}")

        successes, error = await slow_start_batch(len(indexes), create)
        for _ in range(len(indexes) - successes):
            self.expectations.creation_observed(key)
        if error is not None:
            raise error

    async def _delete_pods(self, key, job, pods):
        """Delete C{pods} (keeping their finalizer); returns the keys deleted."""
        if not pods:
            return set()
        pods = pods[:MAX_CREATE_DELETE]
        self.expectations.expect_deletions(key, [pod_key(p) for p in pods])

        async def delete(pod):
            meta = pod["metadata"]
            try:
                await self._pods_provider.delete(self._context(meta.get("namespace", "")),
                                                 meta["name"], DeleteOptions(uid=meta["uid"]))
            except StatusError as e:
                self.expectations.deletion_observed(key, pod_key(pod))
                if e.code not in (404, 409):
                    self._recorder.record(job, WARNING, "FailedDelete",
                                          f"Error deleting: {e.message}")
                    raise
                return False
            self._recorder.record(job, NORMAL, "SuccessfulDelete",
                                  f"Deleted pod: {meta['name']}")
            return True

        results = await DeferredList([ensureDeferred(delete(p)) for p in pods],
                                     consumeErrors=True)
        deleted = set()
        for pod, (ok, result) in zip(pods, results):
            if ok and result:
                deleted.add(pod_key(pod))
            elif not ok:
                result.trap(StatusError)
        return deleted

    async def _release_all(self, job, pods):
        """A finished or deleted Job lets go of every pod it still holds."""
        held = [p for p in pods if ju.has_tracking_finalizer(p)]
        if ju.is_finished(job) and not job["metadata"].get("deletionTimestamp"):
            await self._delete_pods(_key(job), job, [p for p in held if is_active(p)])
        results = await DeferredList([ensureDeferred(self._remove_finalizer(p)) for p in held],
                                     consumeErrors=True)
        for ok, result in results:
            if not ok:
                result.trap(StatusError)
                raise result.value

    async def _write_status(self, job, status):
        """Write C{status} when it differs from the Job's; C{job} then holds it."""
        if status == (job.get("status") or {}):
            return
        meta = job["metadata"]
        uid = meta["uid"]
        written = copy.deepcopy(status)

        def change(current):
            if current["metadata"].get("uid") != uid:
                raise StatusError.not_found("jobs", "batch", meta["name"])
            current["status"] = copy.deepcopy(written)
            current["metadata"].pop("resourceVersion", None)
            return current

        await self._jobs_provider.patch(self._context(meta.get("namespace", "")), meta["name"],
                                        change, subresource="status")
        job["status"] = written


def _key(job):
    meta = job["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"
