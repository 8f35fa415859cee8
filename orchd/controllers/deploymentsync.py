# -*- test-case-name: tests.controllers.test_deployment -*-
"""
One sync of one Deployment: upstream's C{sync.go}, C{rolling.go},
C{recreate.go} and C{progress.go}, step for step.

A L{DeploymentSync} is made per sync with the Deployment (upstream's
defaults filled in), the replica sets it controls and, for Recreate, its
pods by replica set. It decides with the rules of
L{orchd.controllers.deploymentutil} and writes through an L{IDeploymentWriter}
(the controller), keeping its own copies current as it writes, so later
steps of the same sync see what earlier ones did.
"""

import copy

from zope.interface import Interface

from orchd.api.errors import StatusError
from orchd.controllers import deploymentutil as du
from orchd.controllers.controllerref import owner_reference
from orchd.controllers.events import NORMAL, WARNING
from orchd.controllers.podcontrol import namespace_terminating
from orchd.controllers.podstate import FAILED, SUCCEEDED, controller_ref

_COUNTS = ("observedGeneration", "replicas", "updatedReplicas", "readyReplicas",
           "availableReplicas", "unavailableReplicas")


class IDeploymentWriter(Interface):
    """The writes a Deployment's sync makes; each returns the object as stored."""

    def create_replica_set(rs):
        """(awaitable) Create a replica set; raises L{StatusError} when refused."""

    def find_replica_set(namespace, name):
        """(awaitable) A replica set read from the store, or None."""

    def update_replica_set(rs):
        """(awaitable) Store C{rs}'s spec and metadata (not its status)."""

    def delete_replica_set(rs):
        """(awaitable) Delete a replica set (gone already is no error)."""

    def write_revision(d):
        """(awaitable) Store the Deployment's revision annotation."""

    def write_status(d):
        """(awaitable) Store the Deployment's status."""

    def record(d, type, reason, message):
        """Record an event about the Deployment."""

    def requeue_after(d, delay):
        """Look at the Deployment again in C{delay} seconds."""


def same_status(a, b):
    """Statuses equal but for counts written as 0 or left out."""
    a, b = dict(a or {}), dict(b or {})
    for status in (a, b):
        for field in _COUNTS:
            if not status.get(field):
                status.pop(field, None)
    return a == b


class DeploymentSync:
    """
    @param writer: an L{IDeploymentWriter}.
    @param deployment: the Deployment as cached.
    @param replica_sets: the replica sets it controls (as cached; not modified).
    @param pods: C{{replica set uid: [phase, ...]}} of its pods, for Recreate.
    @param now: the current time in seconds.
    """

    def __init__(self, writer, deployment, replica_sets, pods, now):
        self.writer = writer
        self.d = du.with_defaults(deployment)
        self.rs_list = list(replica_sets)
        self.pods = pods
        self.now = now

    # -- bookkeeping ---------------------------------------------------------------

    def _replace(self, rs):
        uid = rs["metadata"]["uid"]
        self.rs_list = [rs if r["metadata"]["uid"] == uid else r for r in self.rs_list]
        return rs

    def _event(self, type, reason, message):
        self.writer.record(self.d, type, reason, message)

    async def _write_status(self, status):
        if same_status(self.d["status"], status):
            return
        self.d["status"] = status
        stored = await self.writer.write_status(self.d)
        if stored is not None:
            self.d["metadata"]["resourceVersion"] = stored["metadata"].get("resourceVersion")

    async def _set_revision(self, revision):
        """Upstream's C{SetDeploymentRevision}, written at once; True if it changed."""
        annotations = self.d["metadata"].setdefault("annotations", {})
        if annotations.get(du.REVISION) == revision:
            return False
        annotations[du.REVISION] = revision
        await self.writer.write_revision(self.d)
        return True

    # -- entry ---------------------------------------------------------------------

    async def run(self):
        """Upstream's C{syncDeployment} once the replica sets are claimed."""
        d = self.d
        if d["metadata"].get("deletionTimestamp"):
            return await self.sync_status_only()
        await self.check_paused_conditions()
        if d["spec"].get("paused"):
            return await self.sync()
        if await self.is_scaling_event():
            return await self.sync()
        if d["spec"]["strategy"].get("type") == du.RECREATE:
            return await self.rollout_recreate()
        if du.is_rolling_update(d):
            return await self.rollout_rolling()
        raise StatusError.unprocessable(
            f"unexpected deployment strategy type: {d['spec']['strategy'].get('type')}")

    async def sync_status_only(self):
        new, olds = await self.all_replica_sets(False)
        await self.sync_deployment_status(olds + [new], new)

    async def sync(self):
        """Scaling, or a paused Deployment: no rollout step."""
        new, olds = await self.all_replica_sets(False)
        await self.scale(new, olds)
        if self.d["spec"].get("paused"):
            await self.cleanup(olds)
        await self.sync_deployment_status(olds + [new], new)

    async def check_paused_conditions(self):
        d = self.d
        if not du.has_progress_deadline(d):
            return
        condition = du.get_condition(d["status"], du.PROGRESSING)
        if condition is not None and condition.get("reason") == du.TIMED_OUT:
            return
        paused_recorded = condition is not None and condition.get("reason") == du.PAUSED
        status = copy.deepcopy(d["status"])
        if d["spec"].get("paused") and not paused_recorded:
            du.set_condition(status, du.new_condition(du.PROGRESSING, "Unknown", du.PAUSED,
                                                      "Deployment is paused", self.now))
        elif not d["spec"].get("paused") and paused_recorded:
            du.set_condition(status, du.new_condition(du.PROGRESSING, "Unknown", du.RESUMED,
                                                      "Deployment is resumed", self.now))
        else:
            return
        await self._write_status(status)

    async def is_scaling_event(self):
        new, olds = await self.all_replica_sets(False)
        for rs in du.active(olds + [new]):
            desired, ok = du.desired_replicas_annotation(rs)
            if ok and desired != du.replicas(self.d):
                return True
        return False

    # -- the new replica set ---------------------------------------------------------

    async def all_replica_sets(self, create):
        """C{(new or None, olds)}, with the new one's revision synced."""
        olds = du.find_old_replica_sets(self.d, self.rs_list)
        new = await self.new_replica_set(olds, create)
        return new, du.find_old_replica_sets(self.d, self.rs_list)

    async def new_replica_set(self, olds, create):
        d = self.d
        existing = du.find_new_replica_set(d, self.rs_list)
        new_revision = str(du.max_revision(olds) + 1)
        if existing is not None:
            rs = copy.deepcopy(existing)
            changed = du.set_new_replica_set_annotations(d, rs, new_revision, True)
            spec = rs.setdefault("spec", {})
            if changed or (spec.get("minReadySeconds") or 0) != d["spec"]["minReadySeconds"]:
                spec["minReadySeconds"] = d["spec"]["minReadySeconds"]
                return self._replace(await self.writer.update_replica_set(rs))
            await self._set_revision(rs["metadata"]["annotations"].get(du.REVISION, ""))
            if du.has_progress_deadline(d) and du.get_condition(d["status"], du.PROGRESSING) is None:
                status = copy.deepcopy(d["status"])
                du.set_condition(status, du.new_condition(
                    du.PROGRESSING, "True", du.FOUND_NEW_RS,
                    f'Found new replica set "{rs["metadata"]["name"]}"', self.now))
                await self._write_status(status)
            return rs
        if not create:
            return None
        rs = self._new_replica_set_object(new_revision, olds)
        name = rs["metadata"]["name"]
        exists = False
        try:
            created = await self.writer.create_replica_set(rs)
        except StatusError as e:
            if e.code == 409 and e.reason == "AlreadyExists":
                created = await self._existing_or_collision(rs, e)
                exists = True
            elif namespace_terminating(e):
                raise
            else:
                message = f'Failed to create new replica set "{name}": {e.message}'
                if du.has_progress_deadline(d):
                    status = copy.deepcopy(d["status"])
                    du.set_condition(status, du.new_condition(
                        du.PROGRESSING, "False", du.FAILED_RS_CREATE, message, self.now))
                    try:
                        await self._write_status(status)
                    except StatusError:
                        pass
                self._event(WARNING, du.FAILED_RS_CREATE, message)
                raise
        wanted = du.replicas(rs)
        if not exists and wanted > 0:
            self._event(NORMAL, "ScalingReplicaSet",
                        f"Scaled up replica set {name} from 0 to {wanted}")
        self.rs_list.append(created)
        await self._set_revision(new_revision)
        if not exists and du.has_progress_deadline(d):
            status = copy.deepcopy(d["status"])
            du.set_condition(status, du.new_condition(
                du.PROGRESSING, "True", du.NEW_RS_CREATED,
                f'Created new replica set "{name}"', self.now))
            await self._write_status(status)
        return created

    def _new_replica_set_object(self, new_revision, olds):
        d = self.d
        meta = d["metadata"]
        template = copy.deepcopy(d["spec"].get("template") or {})
        hash_ = du.compute_hash(template, d["status"].get("collisionCount"))
        template_meta = template.setdefault("metadata", {})
        template_meta["labels"] = dict(template_meta.get("labels") or {}, **{du.HASH_LABEL: hash_})
        selector = copy.deepcopy(d["spec"].get("selector") or {})
        selector["matchLabels"] = dict(selector.get("matchLabels") or {}, **{du.HASH_LABEL: hash_})
        rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
              "metadata": {"name": f"{meta['name']}-{hash_}",
                           "namespace": meta.get("namespace", ""),
                           "labels": dict(template_meta["labels"]),
                           "ownerReferences": [owner_reference("apps/v1", "Deployment", d)]},
              "spec": {"replicas": 0, "minReadySeconds": d["spec"]["minReadySeconds"],
                       "selector": selector, "template": template}}
        rs["spec"]["replicas"] = du.new_rs_new_replicas(d, olds + [rs], rs)
        du.set_new_replica_set_annotations(d, rs, new_revision, False)
        return rs

    async def _existing_or_collision(self, rs, error):
        """
        The replica set already at the new one's name: ours when we control it
        and it has our template; otherwise a hash collision, recorded in
        C{collisionCount} so that the next sync picks another name.
        """
        d = self.d
        meta = rs["metadata"]
        found = await self.writer.find_replica_set(meta["namespace"], meta["name"])
        if found is None:
            raise error
        ref = controller_ref(found["metadata"])
        if ref is not None and ref["uid"] == d["metadata"]["uid"] and du.equal_ignore_hash(
                d["spec"].get("template"), (found.get("spec") or {}).get("template")):
            return found
        status = copy.deepcopy(d["status"])
        status["collisionCount"] = (status.get("collisionCount") or 0) + 1
        await self._write_status(status)
        raise error

    # -- scaling ---------------------------------------------------------------------

    async def scale(self, new, olds):
        """Upstream's C{scale}: proportional scaling of every active replica set."""
        d = self.d
        only = du.find_active_or_latest(new, olds)
        if only is not None:
            if du.replicas(only) != du.replicas(d):
                await self.scale_and_record(only, du.replicas(d))
            return
        if du.is_saturated(d, new):
            for old in du.active(olds):
                await self.scale_and_record(old, 0)
            return
        if not du.is_rolling_update(d):
            return
        actives = du.active(olds + [new])
        allowed = du.replicas(d) + du.max_surge(d) if du.replicas(d) > 0 else 0
        to_add = allowed - du.sum_replicas(actives)
        operation = ""
        if to_add > 0:
            actives, operation = du.by_size_newer(actives), "up"
        elif to_add < 0:
            actives, operation = du.by_size_older(actives), "down"
        added, sizes = 0, []
        for rs in actives:
            share = du.proportion(rs, d, to_add, added) if to_add else 0
            sizes.append(du.replicas(rs) + share)
            added += share
        for index, rs in enumerate(actives):
            size = sizes[index]
            if index == 0 and to_add:
                size = max(0, size + to_add - added)
            await self.scale_replica_set(rs, size, operation)

    async def scale_and_record(self, rs, size):
        if du.replicas(rs) == size:
            return False, rs
        operation = "up" if du.replicas(rs) < size else "down"
        return await self.scale_replica_set(rs, size, operation)

    async def scale_replica_set(self, rs, size, operation):
        d = self.d
        wanted, most = du.replicas(d), du.replicas(d) + du.max_surge(d)
        resize = du.replicas(rs) != size
        if not resize and not du.replicas_annotations_need_update(rs, wanted, most):
            return False, rs
        before = du.replicas(rs)
        changed = copy.deepcopy(rs)
        changed.setdefault("spec", {})["replicas"] = size
        du.set_replicas_annotations(changed, wanted, most)
        stored = self._replace(await self.writer.update_replica_set(changed))
        if resize:
            self._event(NORMAL, "ScalingReplicaSet",
                        f"Scaled {operation} replica set {rs['metadata']['name']} to {size} "
                        f"from {before}")
        return resize, stored

    async def cleanup(self, olds):
        """Delete the oldest idle replica sets past C{revisionHistoryLimit}."""
        d = self.d
        if not du.has_revision_history_limit(d):
            return
        alive = [rs for rs in olds if not rs["metadata"].get("deletionTimestamp")]
        extra = len(alive) - d["spec"]["revisionHistoryLimit"]
        if extra <= 0:
            return
        for rs in du.by_revision(alive)[:extra]:
            status = rs.get("status") or {}
            if (status.get("replicas") or 0) != 0 or du.replicas(rs) != 0 \
                    or (rs["metadata"].get("generation") or 0) > \
                    (status.get("observedGeneration") or 0):
                continue
            await self.writer.delete_replica_set(rs)
            uid = rs["metadata"]["uid"]
            self.rs_list = [r for r in self.rs_list if r["metadata"]["uid"] != uid]

    # -- rollouts --------------------------------------------------------------------

    async def rollout_rolling(self):
        new, olds = await self.all_replica_sets(True)
        if await self.reconcile_new(olds + [new], new):
            return await self.sync_rollout_status(*self._current(olds, new))
        olds, new = self._fresh_list(olds), self._fresh(new)
        if await self.reconcile_olds(olds + [new], du.active(olds), new):
            return await self.sync_rollout_status(*self._current(olds, new))
        if du.deployment_complete(self.d, self.d["status"]):
            await self.cleanup(self._fresh_list(olds))
        await self.sync_rollout_status(*self._current(olds, new))

    def _fresh(self, rs):
        """The replica set as last written in this sync; None if removed (or None)."""
        if rs is None:
            return None
        uid = rs["metadata"]["uid"]
        return next((r for r in self.rs_list if r["metadata"]["uid"] == uid), None)

    def _fresh_list(self, rss):
        return [r for r in (self._fresh(rs) for rs in rss) if r is not None]

    def _current(self, olds, new):
        """
        C{(all replica sets, new)} as last written in this sync: the old
        ones still there, then the new one (or None).
        """
        fresh_new = self._fresh(new)
        return self._fresh_list(olds) + [fresh_new], fresh_new

    async def reconcile_new(self, all_rss, new):
        d = self.d
        if du.replicas(new) == du.replicas(d):
            return False
        if du.replicas(new) > du.replicas(d):
            scaled, _ = await self.scale_and_record(new, du.replicas(d))
            return scaled
        scaled, _ = await self.scale_and_record(new, du.new_rs_new_replicas(d, all_rss, new))
        return scaled

    async def reconcile_olds(self, all_rss, olds, new):
        d = self.d
        if du.sum_replicas(olds) == 0:
            return False
        min_available = du.replicas(d) - du.max_unavailable(d)
        new_unavailable = du.replicas(new) - du.status_count(new, "availableReplicas")
        most = du.sum_replicas(all_rss) - min_available - new_unavailable
        if most <= 0:
            return False
        olds, cleaned = await self.cleanup_unhealthy(olds, most)
        scaled_down = await self.scale_down_olds_for_rolling(olds + [new], olds)
        return cleaned + scaled_down > 0

    async def cleanup_unhealthy(self, olds, most):
        """Scale old replica sets down by their unavailable replicas first, oldest first."""
        olds = du.by_creation(olds)
        total = 0
        for index, rs in enumerate(olds):
            if total >= most:
                break
            unhealthy = du.replicas(rs) - du.status_count(rs, "availableReplicas")
            if du.replicas(rs) == 0 or unhealthy <= 0:
                continue
            count = min(most - total, unhealthy)
            _, olds[index] = await self.scale_and_record(rs, du.replicas(rs) - count)
            total += count
        return olds, total

    async def scale_down_olds_for_rolling(self, all_rss, olds):
        d = self.d
        min_available = du.replicas(d) - du.max_unavailable(d)
        available = du.sum_status(all_rss, "availableReplicas")
        if available <= min_available:
            return 0
        total, budget = 0, available - min_available
        for rs in du.by_creation(olds):
            if total >= budget:
                break
            if du.replicas(rs) == 0:
                continue
            count = min(du.replicas(rs), budget - total)
            await self.scale_and_record(rs, du.replicas(rs) - count)
            total += count
        return total

    async def rollout_recreate(self):
        new, olds = await self.all_replica_sets(False)
        scaled = False
        for rs in du.active(olds):
            did, _ = await self.scale_and_record(rs, 0)
            scaled = scaled or did
        if scaled:
            return await self.sync_rollout_status(*self._current(olds, new))
        if self.old_pods_running(new, olds):
            return await self.sync_rollout_status(*self._current(olds, new))
        if new is None:
            new, olds = await self.all_replica_sets(True)
        await self.scale_and_record(new, du.replicas(self.d))
        if du.deployment_complete(self.d, self.d["status"]):
            await self.cleanup(self._fresh_list(olds))
        await self.sync_rollout_status(*self._current(olds, new))

    def old_pods_running(self, new, olds):
        """Old replica sets that think they run pods, or old pods not finished."""
        if du.sum_status(olds, "replicas") > 0:
            return True
        new_uid = new["metadata"]["uid"] if new is not None else None
        return any(phase not in (FAILED, SUCCEEDED)
                   for uid, phases in self.pods.items() if uid != new_uid for phase in phases)

    # -- status ----------------------------------------------------------------------

    async def sync_deployment_status(self, all_rss, new):
        await self._write_status(du.calculate_status(all_rss, new, self.d, self.now))

    async def sync_rollout_status(self, all_rss, new):
        """Upstream's C{syncRolloutStatus}: the status with the Progressing condition."""
        d, now = self.d, self.now
        status = du.calculate_status(all_rss, new, d, now)
        if not du.has_progress_deadline(d):
            du.remove_condition(status, du.PROGRESSING)
        current = du.get_condition(d["status"], du.PROGRESSING)
        complete = (du.status_count({"status": status}, "replicas")
                    == du.status_count({"status": status}, "updatedReplicas")
                    and current is not None and current.get("reason") == du.NEW_RS_AVAILABLE)
        new_name = new["metadata"]["name"] if new is not None else None
        if du.has_progress_deadline(d) and not complete:
            if du.deployment_complete(d, status):
                message = (f'ReplicaSet "{new_name}" has successfully progressed.' if new_name
                           else f'Deployment "{d["metadata"]["name"]}" has successfully '
                                "progressed.")
                du.set_condition(status, du.new_condition(
                    du.PROGRESSING, "True", du.NEW_RS_AVAILABLE, message, now))
            elif du.deployment_progressing(d, status):
                message = (f'ReplicaSet "{new_name}" is progressing.' if new_name
                           else f'Deployment "{d["metadata"]["name"]}" is progressing.')
                condition = du.new_condition(du.PROGRESSING, "True", du.REPLICA_SET_UPDATED,
                                             message, now)
                if current is not None:
                    if current.get("status") == "True":
                        condition["lastTransitionTime"] = current.get("lastTransitionTime")
                    du.remove_condition(status, du.PROGRESSING)
                du.set_condition(status, condition)
            elif du.deployment_timed_out(d, status, now):
                message = (f'ReplicaSet "{new_name}" has timed out progressing.' if new_name
                           else f'Deployment "{d["metadata"]["name"]}" has timed out '
                                "progressing.")
                du.set_condition(status, du.new_condition(
                    du.PROGRESSING, "False", du.TIMED_OUT, message, now))
        failures = self._replica_failures(all_rss, new)
        if failures:
            du.set_condition(status, failures[0])
        else:
            du.remove_condition(status, du.REPLICA_FAILURE)
        if same_status(d["status"], status):
            delay = du.progress_check_delay(d, status, now)
            if delay is not None:
                self.writer.requeue_after(d, delay)
            return
        await self._write_status(status)

    @staticmethod
    def _replica_failures(all_rss, new):
        def failures(rs):
            return [du.replica_set_to_deployment_condition(c)
                    for c in (rs.get("status") or {}).get("conditions") or ()
                    if isinstance(c, dict) and c.get("type") == du.REPLICA_FAILURE]
        if new is not None and failures(new):
            return failures(new)
        return [c for rs in all_rss if rs is not None for c in failures(rs)]
