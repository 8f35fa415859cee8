# -*- test-case-name: tests.controllers.test_ttlafterfinished -*-
"""
The TTL-after-finished controller (upstream's C{pkg/controller/ttlafterfinished}):
deletes a finished Job C{spec.ttlSecondsAfterFinished} seconds after it
finished (its C{Complete} or C{Failed} condition's time), in the
foreground so its pods go first, as upstream does.

A Job is looked at again when its time comes (a timer on the clock, never
a poll), and read from the store before the delete: a Job whose TTL was
raised meanwhile, or that was replaced under the same name, is kept.
"""

from orchd.api.errors import StatusError
from orchd.controllers import jobutil as ju
from orchd.controllers.base import CacheSyncedController
from orchd.controllers.podstate import parse_time
from orchd.registry.context import RequestContext
from orchd.registry.options import DeleteOptions
from orchd.storage.interfaces import DELETED

COMPONENT = "ttl-after-finished-controller"


def expires_at(job):
    """When a finished Job with a TTL is to be deleted (seconds), or None."""
    ttl = ju.job_spec(job).get("ttlSecondsAfterFinished")
    if not isinstance(ttl, int) or isinstance(ttl, bool) or job["metadata"].get(
            "deletionTimestamp"):
        return None
    finished = parse_time(ju.finish_time(job))
    return None if finished is None else finished + ttl


class TTLAfterFinishedController(CacheSyncedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    """

    name = "ttl-after-finished"

    def __init__(self, catalog, clock):
        super().__init__(catalog, clock)
        self._provider = catalog.resource("batch", "jobs")
        self._prefix = self._provider.info.key_prefix()
        self._jobs = self.follow("batch", "jobs", self._changed)

    def _changed(self, type, obj, old):
        if type == DELETED or expires_at(obj) is None:
            return
        meta = obj["metadata"]
        self.enqueue(f"{meta.get('namespace', '')}/{meta['name']}")

    async def _sync(self, key):
        namespace, _, name = key.partition("/")
        job = self._jobs.cache.get(self._prefix + key)
        if job is None or expires_at(job) is None:
            return
        now = self._clock.seconds()
        if expires_at(job) > now:
            self.enqueue(key, after=expires_at(job) - now)
            return
        fresh = await self.get_or_none(self._provider, namespace, name)
        if fresh is None or expires_at(fresh) is None:
            return
        if expires_at(fresh) > now:
            self.enqueue(key, after=expires_at(fresh) - now)
            return
        ctx = RequestContext(self._catalog.system_context().user, namespace,
                             field_manager=COMPONENT)
        try:
            await self._provider.delete(ctx, name, DeleteOptions(
                uid=fresh["metadata"]["uid"], propagation_policy="Foreground"))
        except StatusError as e:
            if e.code not in (404, 409):
                raise
            return
        self.log.info("Deleted Job {key}: finished {ttl}s ago", key=key,
                      ttl=ju.job_spec(fresh).get("ttlSecondsAfterFinished"))
