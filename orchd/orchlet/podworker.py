# -*- test-case-name: tests.orchlet.test_podworker -*-
"""
The pods bound to one node: run them, report them, stop them, finish
deleting them.

Work is driven by changes, never by a timer: a pod listed or watched
(L{orchd.orchlet.podwatch}), or a pod whose state the runtime changed by
itself (its observer), is marked, and marked pods are handled one at a
time in the order they were marked. Handling a pod

 - hands it to the runtime when its object changed (C{sync_pod}, idempotent);
 - writes its status when what the runtime reports (with upstream's
   conditions, L{orchd.orchlet.podstatus}) differs from what is stored, as
   a strategic merge patch of C{pods/<p>/status} that leaves conditions of
   others alone;
 - for a pod being deleted (C{deletionTimestamp}), asks the runtime to stop
   it within its C{deletionGracePeriodSeconds}, writes the terminal status
   once it has stopped, then deletes it with grace period 0 and a uid
   precondition (so a pod created anew under the same name is safe): the
   kubelet's order, which is what ends a graceful deletion;
 - for a pod gone from the API, kills it in the runtime.

A request that fails for a reason that may pass (a lost connection, a 5xx,
a 429) marks the pod again after a back-off. Events the runtime reports go
to the API through an event recorder.
"""

from twisted.internet.defer import Deferred, maybeDeferred, succeed
from twisted.logger import Logger
from zope.interface import implementer

from orchd.orchlet.heartbeat import Backoff
from orchd.orchlet.podstatus import merge_status, same_status, status_patch
from orchd.orchlet.podwatch import pod_key
from orchd.orchlet.runtime import IRuntimeObserver

STRATEGIC = "application/strategic-merge-patch+json"


def _version(pod):
    try:
        return int((pod.get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


def _uid(pod):
    return (pod.get("metadata") or {}).get("uid")


def _retryable(code):
    return code == 0 or code == 429 or code >= 500


@implementer(IRuntimeObserver)
class PodWorker:
    """
    The pods of node C{node_name}, run through C{runtime}.

    @param api: the node's L{orchd.orchlet.apiclient.APIClient}.
    @param recorder: an event recorder (C{record(obj, type, reason,
        message, field_path)}), or None to record nothing.
    """

    log = Logger()

    def __init__(self, clock, api, runtime, node_name, recorder=None):
        self.clock = clock
        self.api = api
        self.runtime = runtime
        self.node_name = node_name
        self.recorder = recorder
        self.pods = {}               # (namespace, name) -> pod, newest seen
        self.seen = {}               # (namespace, name) -> resourceVersion given to the runtime
        self.stopping = {}           # (namespace, name) -> grace the runtime was given
        self.stopped = set()         # pods whose containers have all stopped
        self.deleted = set()         # pods whose final DELETE was accepted
        self.uids = {}               # (namespace, name) -> uid of the pod the above are about
        self.backoff = Backoff()
        self._marked = {}            # ordered set of keys to handle
        self._busy = False
        self._retry = None
        self._running = True
        self._idle = None
        runtime.observe(self)

    # -- what comes in ---------------------------------------------------------------------

    def replace(self, pods):
        """The full set of this node's pods, as just listed."""
        listed = {pod_key(pod): pod for pod in pods}
        for key in set(self.pods) | set(self.seen) | set(listed):
            self._mark(key)
        self.pods = listed

    def upsert(self, pod):
        """A pod added or changed; an older version than one already seen is ignored."""
        key = pod_key(pod)
        current = self.pods.get(key)
        if current is not None and _uid(current) == _uid(pod) \
                and _version(current) > _version(pod):
            return
        self.pods[key] = pod
        self._mark(key)

    def remove(self, key):
        """A pod deleted from the API."""
        self.pods.pop(key, None)
        self._mark(key)

    def pod_changed(self, namespace, name):
        self._mark((namespace, name))

    def pod_event(self, pod, type, reason, message, field_path):
        if self.recorder is None:
            return
        self.recorder.record(dict(pod, kind="Pod", apiVersion="v1"), type, reason, message,
                             field_path)

    # -- the work loop ---------------------------------------------------------------------

    def _mark(self, key):
        self._marked[key] = None
        if not self._busy and self._running:
            self._busy = True
            # In the next turn: marks made in this one are handled together.
            self.clock.callLater(0, self._drain)

    def _drain(self):
        Deferred.fromCoroutine(self._handle_marked()).addErrback(
            lambda f: self.log.failure("Handling pods failed", f))

    async def _handle_marked(self):
        failed = []
        try:
            while self._marked and self._running:
                key = next(iter(self._marked))
                del self._marked[key]
                try:
                    ok = await self._handle(key)
                except Exception as e:
                    self.log.warn("Handling pod {ns}/{name} failed: {error}", ns=key[0],
                                  name=key[1], error=e)
                    ok = False
                if not ok:
                    failed.append(key)
        finally:
            self._busy = False
            if self._idle is not None and not (self._marked and self._running):
                idle, self._idle = self._idle, None
                idle.callback(None)
        if failed and self._running:
            self._retry_later(failed)
        elif not failed:
            self.backoff.reset()

    def _retry_later(self, keys):
        def retry():
            self._retry = None
            for key in keys:
                self._mark(key)
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._retry = self.clock.callLater(self.backoff.next(), retry)

    def stop(self):
        """Handle nothing more; a Deferred that fires once the pod at hand is done."""
        self._running = False
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._retry = None
        if not self._busy:
            return succeed(None)
        self._idle = Deferred()
        return self._idle

    # -- one pod ---------------------------------------------------------------------------

    async def _handle(self, key):
        """Bring pod C{key} one step on; False if it must be tried again later."""
        live = self.pods.get(key)
        if live is None:
            if key in self.seen or self.runtime.pod_status(*key) is not None:
                await maybeDeferred(self.runtime.kill_pod, *key)
            self._forget(key)
            return True
        uid = _uid(live)
        if self.uids.get(key, uid) != uid:
            # Another pod under the same name (the old one's DELETED and this
            # one's ADDED handled in one pass): what was known is the old one's.
            self._forget(key)
        self.uids[key] = uid
        meta = live.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return await self._terminate(key, live)
        if self.seen.get(key) != meta.get("resourceVersion"):
            await maybeDeferred(self.runtime.sync_pod, live)
            self.seen[key] = meta.get("resourceVersion")
        return await self._report(key, live)

    async def _report(self, key, live):
        """Write the pod's status if the runtime's differs from the stored one."""
        reported = self.runtime.pod_status(*key)
        if reported is None:
            return True
        stored = live.get("status") or {}
        merged = merge_status(stored, reported)
        if same_status(merged, stored):
            return True
        code, body = await self._request(
            "PATCH", f"/api/v1/namespaces/{key[0]}/pods/{key[1]}/status", status_patch(merged),
            content_type=STRATEGIC)
        if code == 200:
            if isinstance(body, dict) and _uid(body) == _uid(live):
                self._keep_answer(key, body)
            return True
        if code == 404:
            return True                  # gone: its DELETED event follows
        self.log.warn("Cannot write the status of pod {ns}/{name}: {code} {body}", ns=key[0],
                      name=key[1], code=code, body=body)
        return not _retryable(code)

    def _keep_answer(self, key, pod):
        """Keep C{pod} (an answer of ours) as the newest version seen, without handling it again."""
        current = self.pods.get(key)
        if current is None or _version(pod) >= _version(current):
            self.pods[key] = pod
            if self.seen.get(key) == (current or {}).get("metadata", {}).get("resourceVersion"):
                # Only the status changed: the runtime has seen this object.
                self.seen[key] = pod["metadata"].get("resourceVersion")

    async def _terminate(self, key, live):
        """Stop a pod being deleted; once stopped, write its last status and delete it."""
        if key in self.deleted:
            return True                  # its DELETED event is on the way
        if self.runtime.pod_status(*key) is None and key not in self.seen:
            return await self._delete(key, live)      # it never ran here
        grace = (live.get("metadata") or {}).get("deletionGracePeriodSeconds") or 0
        grace = max(int(grace), 0) if isinstance(grace, (int, float)) else 0
        if key not in self.stopped:
            before = self.stopping.get(key)
            if before is None or grace < before:
                self.stopping[key] = grace
                stopping = maybeDeferred(self.runtime.stop_pod, key[0], key[1], grace)
                if before is None:
                    stopping.addCallback(lambda _, uid=_uid(live): self._stopped(key, uid))
        if key not in self.stopped:
            return await self._report(key, live)
        if not await self._report(key, live):
            return False
        return await self._delete(key, live)

    def _forget(self, key):
        """Drop what is known of the pod under C{key}."""
        self.seen.pop(key, None)
        self.stopping.pop(key, None)
        self.stopped.discard(key)
        self.deleted.discard(key)
        self.uids.pop(key, None)

    def _stopped(self, key, uid):
        if key in self.stopping and self.uids.get(key) == uid:
            self.stopped.add(key)
            self._mark(key)

    async def _delete(self, key, live):
        """Finish the deletion: grace period 0, for this pod's uid only."""
        if key in self.deleted:
            return True
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        uid = _uid(live)
        if uid:
            options["preconditions"] = {"uid": uid}
        code, body = await self._request(
            "DELETE", f"/api/v1/namespaces/{key[0]}/pods/{key[1]}", options)
        if code in (200, 202):
            self.deleted.add(key)
            return True
        if code in (404, 409):
            return True                  # gone already, or another pod by now
        self.log.warn("Cannot delete pod {ns}/{name}: {code} {body}", ns=key[0], name=key[1],
                      code=code, body=body)
        return not _retryable(code)

    async def _request(self, method, path, body=None, content_type="application/json"):
        """C{api.request}, with a failed connection as code 0."""
        try:
            return await self.api.request(method, path, body, content_type=content_type)
        except Exception as e:
            return 0, str(e)
