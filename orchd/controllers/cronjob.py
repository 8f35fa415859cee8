# -*- test-case-name: tests.controllers.test_cronjob -*-
"""
The CronJob controller (upstream's C{pkg/controller/cronjob}, v2): starts
a Job at each time of a CronJob's schedule, and keeps its status.

Each CronJob is synced alone, keyed C{namespace/name}, read from the store
(its C{status.active} must not be stale), and requeued on the clock for
its next run time: nothing polls. A sync

 1. reconciles C{status.active} with the Jobs it controls: finished ones
    leave (C{SawCompletedJob}), C{lastSuccessfulTime} follows the latest
    completion, references to Jobs gone are dropped;
 2. deletes the oldest finished Jobs past C{successfulJobsHistoryLimit} and
    C{failedJobsHistoryLimit};
 3. unless suspended, finds the latest missed run time (since
    C{lastScheduleTime}, or creation; not before C{startingDeadlineSeconds}
    ago), skips it when too late (C{MissSchedule}) or already run, honours
    C{concurrencyPolicy} (Forbid: C{JobAlreadyActive}; Replace: the active
    Jobs deleted), and creates the Job C{<cronjob>-<minutes since epoch>}
    with the annotation L{SCHEDULED_TIMESTAMP}.
"""

import copy
from collections import defaultdict
from email.utils import format_datetime
from datetime import datetime, timezone

from orchd.api.errors import StatusError
from orchd.api.meta import rfc3339
from orchd.controllers import jobutil as ju
from orchd.controllers.base import CacheSyncedController
from orchd.controllers.controllerref import owner_reference
from orchd.controllers.cronschedule import MANY_MISSED, CronSchedule, most_recent, next_run_delay
from orchd.controllers.events import NORMAL, WARNING, EventRecorder
from orchd.controllers.podcontrol import namespace_terminating
from orchd.controllers.podstate import controller_ref, parse_time
from orchd.controllers.retry import Backoff
from orchd.registry.context import RequestContext
from orchd.registry.options import DeleteOptions
from orchd.storage.interfaces import DELETED

COMPONENT = "cronjob-controller"
#: When the Job was scheduled, in the CronJob's zone (upstream C{batch.kubernetes.io/...}).
SCHEDULED_TIMESTAMP = "batch.orch.io/cronjob-scheduled-timestamp"


def keep_job(job):
    """A Job trimmed to what this controller reads: identity, owner, finish and times."""
    meta = job["metadata"]
    kept_meta = {"name": meta["name"], "namespace": meta.get("namespace", ""),
                 "uid": meta.get("uid", ""), "creationTimestamp": meta.get("creationTimestamp")}
    if meta.get("ownerReferences"):
        kept_meta["ownerReferences"] = meta["ownerReferences"]
    status = job.get("status") or {}
    kept_status = {k: status[k] for k in ("startTime", "completionTime") if status.get(k)}
    kept_status["conditions"] = [
        {"type": c.get("type"), "status": c.get("status"),
         "lastTransitionTime": c.get("lastTransitionTime")}
        for c in status.get("conditions") or ()
        if isinstance(c, dict) and c.get("type") in (ju.COMPLETE, ju.FAILED_CONDITION)]
    return {"metadata": kept_meta, "status": kept_status}


def job_name(cronjob, scheduled):
    """Upstream's C{getJobName}: C{<cronjob>-<scheduled time in minutes since the epoch>}."""
    return f"{cronjob['metadata']['name']}-{int(scheduled) // 60}"


def _started(job):
    return parse_time((job.get("status") or {}).get("startTime")) \
        or parse_time(job["metadata"].get("creationTimestamp")) or 0.0


def _finished_as(job):
    """C{Complete}, C{Failed}, or None for a Job still running."""
    for type in (ju.COMPLETE, ju.FAILED_CONDITION):
        if ju.find_condition(job, type) is not None:
            return type
    return None


class CronJobController(CacheSyncedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    """

    name = "cronjob"

    def __init__(self, catalog, clock, recorder=None):
        super().__init__(catalog, clock)
        self._provider = catalog.resource("batch", "cronjobs")
        self._jobs_provider = catalog.resource("batch", "jobs")
        self._cron_prefix = self._provider.info.key_prefix()
        self._job_prefix = self._jobs_provider.info.key_prefix()
        self._recorder = recorder or EventRecorder(catalog, clock, COMPONENT)
        self._backoff = Backoff()
        self._owned = defaultdict(set)
        self._cronjobs = self.follow("batch", "cronjobs", self._cronjob_changed)
        self._jobs = self.follow("batch", "jobs", self._job_changed, keep=keep_job)

    def _cronjob_changed(self, type, obj, old):
        meta = obj["metadata"]
        if type != DELETED:
            self.enqueue(f"{meta.get('namespace', '')}/{meta['name']}")

    def _job_changed(self, type, obj, old):
        meta = obj["metadata"]
        key = f"{meta.get('namespace', '')}/{meta['name']}"
        for version in (old, None if type == DELETED else obj):
            if version is None:
                continue
            ref = controller_ref(version["metadata"])
            if ref is None or ref.get("kind") != "CronJob":
                continue
            if version is old:
                self._owned[ref["uid"]].discard(key)
                if not self._owned[ref["uid"]]:
                    del self._owned[ref["uid"]]
            else:
                self._owned[ref["uid"]].add(key)
            self.enqueue(f"{meta.get('namespace', '')}/{ref.get('name')}")

    def _context(self, namespace):
        return RequestContext(self._catalog.system_context().user, namespace,
                              field_manager=COMPONENT)

    async def _sync(self, key):
        namespace, _, name = key.partition("/")
        cronjob = await self.get_or_none(self._provider, namespace, name)
        if cronjob is None:
            self._backoff.succeeded(key)
            return
        try:
            delay = await self._sync_cronjob(cronjob)
        except StatusError as e:
            if e.code == 404:
                return
            delay = self._backoff.failed(key)
            self.log.info("Sync of CronJob {key} failed ({error}); retrying in {delay:.1f}s",
                          key=key, error=e.message, delay=delay)
            self.enqueue(key, after=delay)
            return
        self._backoff.succeeded(key)
        if delay is not None:
            self.enqueue(key, after=delay)

    async def _sync_cronjob(self, cronjob):
        """One sync; returns the seconds until the next one is due, or None."""
        meta = cronjob["metadata"]
        status = copy.deepcopy(cronjob.get("status") or {})
        jobs = [job for job in (self._jobs.cache.get(self._job_prefix + k)
                                for k in sorted(self._owned.get(meta["uid"], ())))
                if job is not None]
        active, by_uid = self._reconcile_active(cronjob, jobs, status)
        await self._drop_gone(cronjob, active, by_uid, status)
        await self._remove_old_jobs(cronjob, jobs)
        if meta.get("deletionTimestamp"):
            await self._write_status(cronjob, status)
            return None
        spec = cronjob.get("spec") or {}
        try:
            schedule = CronSchedule(spec.get("schedule") or "", spec.get("timeZone"))
        except ValueError as e:
            reason, message = ("UnknownTimeZone", f"invalid timeZone: {spec.get('timeZone')!r}: "
                               f"{e}") if "time zone" in str(e) else (
                "UnparseableSchedule", f"unparseable schedule: {spec.get('schedule')!r} : {e}")
            self._recorder.record(cronjob, WARNING, reason, message)
            await self._write_status(cronjob, status)
            return None
        if spec.get("suspend") is True:
            await self._write_status(cronjob, status)
            return None
        delay = await self._maybe_run(cronjob, schedule, status)
        await self._write_status(cronjob, status)
        return delay

    def _earliest(self, cronjob, status):
        return parse_time(status.get("lastScheduleTime")) \
            or parse_time(cronjob["metadata"].get("creationTimestamp")) or 0.0

    async def _maybe_run(self, cronjob, schedule, status):
        spec = cronjob.get("spec") or {}
        now = self._clock.seconds()
        earliest = self._earliest(cronjob, status)
        deadline = spec.get("startingDeadlineSeconds")
        if not isinstance(deadline, int) or isinstance(deadline, bool):
            deadline = None
        window_start = earliest if deadline is None else max(earliest, now - deadline)
        try:
            scheduled, missed = most_recent(schedule, window_start, now)
        except ValueError as e:
            self._recorder.record(cronjob, WARNING, "InvalidSchedule",
                                  f"invalid schedule: {spec.get('schedule')} : {e}")
            return None
        if missed > MANY_MISSED:
            self._recorder.record(cronjob, WARNING, "TooManyMissedTimes",
                                  "too many missed start times. Set or decrease "
                                  ".spec.startingDeadlineSeconds or check clock skew")
        after = lambda: next_run_delay(schedule, self._earliest(cronjob, status), now)  # noqa
        if scheduled is None:
            return after()
        if deadline is not None and scheduled + deadline < now:
            when = format_datetime(datetime.fromtimestamp(scheduled, timezone.utc))
            self._recorder.record(cronjob, WARNING, "MissSchedule",
                                  f"Missed scheduled time to start a job: {when}")
            return after()
        name = job_name(cronjob, scheduled)
        active = status.get("active") or []
        if any(ref.get("name") == name for ref in active) \
                or parse_time(status.get("lastScheduleTime")) == scheduled:
            return after()
        policy = spec.get("concurrencyPolicy") or "Allow"
        if policy == "Forbid" and active:
            self._recorder.record(cronjob, NORMAL, "JobAlreadyActive",
                                  "Not starting job because prior execution is running and "
                                  "concurrency policy is Forbid")
            return after()
        if policy == "Replace":
            for ref in list(active):
                await self._delete_job(cronjob, ref.get("name"), ref.get("uid"))
                status["active"] = [r for r in status.get("active") or () if r is not ref]
        created = await self._create_job(cronjob, schedule, scheduled)
        if created is None:
            return None
        created_meta = created["metadata"]
        reference = {"kind": "Job", "namespace": created_meta.get("namespace", ""),
                     "name": created_meta["name"], "uid": created_meta["uid"],
                     "apiVersion": "batch/v1",
                     "resourceVersion": created_meta.get("resourceVersion", "")}
        if not any(r.get("uid") == created_meta["uid"] for r in status.get("active") or ()):
            status["active"] = list(status.get("active") or ()) + [reference]
        status["lastScheduleTime"] = rfc3339(scheduled)
        return after()

    async def _create_job(self, cronjob, schedule, scheduled):
        """Create the Job of the run at C{scheduled}; returns it, or None when not ours."""
        meta = cronjob["metadata"]
        namespace = meta.get("namespace", "")
        template = copy.deepcopy((cronjob.get("spec") or {}).get("jobTemplate") or {})
        template_meta = template.get("metadata") or {}
        annotations = dict(template_meta.get("annotations") or {})
        annotations[SCHEDULED_TIMESTAMP] = schedule.format(scheduled)
        job_meta = {"name": job_name(cronjob, scheduled), "namespace": namespace,
                    "annotations": annotations,
                    "ownerReferences": [owner_reference("batch/v1", "CronJob", cronjob)]}
        if template_meta.get("labels"):
            job_meta["labels"] = dict(template_meta["labels"])
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta,
               "spec": template.get("spec") or {}}
        try:
            created = await self._jobs_provider.create(self._context(namespace), job)
        except StatusError as e:
            if namespace_terminating(e):
                return None
            if e.code != 409:
                self._recorder.record(cronjob, WARNING, "FailedCreate",
                                      f"Error creating job: {e.message}")
                raise
            existing = await self.get_or_none(self._jobs_provider, namespace, job_meta["name"])
            ref = controller_ref(existing["metadata"]) if existing is not None else None
            if ref is None or ref.get("uid") != meta["uid"]:
                return None
            return existing
        self._recorder.record(cronjob, NORMAL, "SuccessfulCreate",
                              f"Created job {created['metadata']['name']}")
        return created

    def _reconcile_active(self, cronjob, jobs, status):
        """C{status.active} and C{lastSuccessfulTime} from the Jobs this CronJob controls."""
        active = list(status.get("active") or ())
        by_uid = {job["metadata"]["uid"]: job for job in jobs}
        active_uids = {ref.get("uid") for ref in active}
        last_success = parse_time(status.get("lastSuccessfulTime"))
        for job in jobs:
            job_meta = job["metadata"]
            finished = _finished_as(job)
            if job_meta["uid"] not in active_uids and finished is None:
                self._recorder.record(cronjob, WARNING, "UnexpectedJob",
                                      "Saw a job that the controller did not create or forgot: "
                                      f"{job_meta['name']}")
            elif job_meta["uid"] in active_uids and finished is not None:
                active = [r for r in active if r.get("uid") != job_meta["uid"]]
                self._recorder.record(cronjob, NORMAL, "SawCompletedJob",
                                      f"Saw completed job: {job_meta['name']}, "
                                      f"status: {finished}")
            if finished == ju.COMPLETE:
                done = parse_time((job.get("status") or {}).get("completionTime"))
                if done is not None and (last_success is None or done > last_success):
                    last_success = done
                    status["lastSuccessfulTime"] = rfc3339(done)
        return active, by_uid

    async def _drop_gone(self, cronjob, active, by_uid, status):
        """
        C{status.active} without references to Jobs that are gone; one the
        cache does not hold (yet) is looked up in the store first.
        """
        namespace = cronjob["metadata"].get("namespace", "")
        kept = []
        for ref in active:
            if ref.get("uid") not in by_uid:
                job = await self.get_or_none(self._jobs_provider, namespace, ref.get("name"))
                if job is None or job["metadata"].get("uid") != ref.get("uid"):
                    continue
            kept.append(ref)
        if kept:
            status["active"] = kept
        else:
            status.pop("active", None)

    async def _remove_old_jobs(self, cronjob, jobs):
        """Delete the oldest finished Jobs past the history limits (upstream's C{cleanupFinishedJobs})."""
        spec = cronjob.get("spec") or {}
        for outcome, field in ((ju.COMPLETE, "successfulJobsHistoryLimit"),
                               (ju.FAILED_CONDITION, "failedJobsHistoryLimit")):
            limit = spec.get(field)
            if not isinstance(limit, int) or isinstance(limit, bool):
                continue
            finished = sorted((j for j in jobs if _finished_as(j) == outcome), key=_started)
            for job in finished[:max(len(finished) - limit, 0)]:
                await self._delete_job(cronjob, job["metadata"]["name"], job["metadata"]["uid"])

    async def _delete_job(self, cronjob, name, uid):
        namespace = cronjob["metadata"].get("namespace", "")
        try:
            await self._jobs_provider.delete(self._context(namespace), name, DeleteOptions(
                uid=uid, propagation_policy="Background"))
        except StatusError as e:
            if e.code in (404, 409):
                return
            self._recorder.record(cronjob, WARNING, "FailedDelete",
                                  f"Deleted job: {e.message}")
            raise
        self._recorder.record(cronjob, NORMAL, "SuccessfulDelete", f"Deleted job {name}")

    async def _write_status(self, cronjob, status):
        if status == (cronjob.get("status") or {}):
            return
        meta = cronjob["metadata"]
        uid = meta["uid"]
        written = copy.deepcopy(status)

        def change(current):
            if current["metadata"].get("uid") != uid:
                raise StatusError.not_found("cronjobs", "batch", meta["name"])
            current["status"] = copy.deepcopy(written)
            current["metadata"].pop("resourceVersion", None)
            return current

        await self._provider.patch(self._context(meta.get("namespace", "")), meta["name"],
                                   change, subresource="status")
        cronjob["status"] = written
