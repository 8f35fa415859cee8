# -*- test-case-name: tests.orchlet.test_podsync -*-
"""
Pods bound to this node: run them, stop them, report their status.

The agent lists C{/api/v1/pods?fieldSelector=spec.nodeName=<node>} once,
then watches from that list's resourceVersion, so an idle node costs the
API server one open stream, not a list every few seconds (which, over
thousands of nodes, would have the server filter every pod hundreds of
times a second). A change to one of its pods starts a pass at once; a
pass also runs every L{SYNC_INTERVAL} seconds to report what the runtime
changed by itself. Each pass hands new or changed pods to the runtime
(C{sync_pod}, idempotent), kills those gone or being deleted, and patches
C{pods/<p>/status} when the runtime's view differs from what was last
written. When the watch ends (a server timeout, a compacted
resourceVersion, a lost connection), the next pass lists again.
"""

import inspect
from urllib.parse import quote

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from orchd.orchlet.heartbeat import Repeater

SYNC_INTERVAL = 2.0


def _key(pod):
    meta = pod.get("metadata") or {}
    return meta.get("namespace"), meta.get("name")


async def call(method, *args):
    """Call a runtime method that may answer at once, with a Deferred or a coroutine."""
    result = method(*args)
    if isinstance(result, Deferred) or inspect.isawaitable(result):
        result = await result
    return result


class PodSync:
    """One list-watch-and-sync loop for the pods of C{node_name}."""

    log = Logger()

    def __init__(self, clock, api, runtime, node_name, interval=SYNC_INTERVAL):
        self.clock = clock
        self.api = api
        self.runtime = runtime
        self.node_name = node_name
        self.seen = {}               # (namespace, name) -> resourceVersion handed to the runtime
        self.written = {}            # (namespace, name) -> status last patched
        self.pods = {}               # (namespace, name) -> pod, as listed and watched
        self.stream = None           # the open watch, if any
        self._path = "/api/v1/pods?fieldSelector=" + quote(
            f"spec.nodeName={node_name}", safe="")
        self.repeater = Repeater(clock, self.sync, interval, "Syncing pods")

    def start(self, delay=0):
        self.repeater.start(delay)

    def stop(self):
        if self.stream is not None:
            self.stream.stop()
        return self.repeater.stop()

    async def sync(self):
        """One pass; True if this node's pods are known (watched, or just listed)."""
        if self.stream is None and not await self._list_and_watch():
            return False
        current = dict(self.pods)    # a watch event may change self.pods during the pass
        for key in list(self.seen):
            if key not in current:
                await self._kill(key)
        for key, pod in current.items():
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                await self._delete(key, pod)
            elif self.seen.get(key) != meta.get("resourceVersion"):
                try:
                    await call(self.runtime.sync_pod, pod)
                except Exception as e:
                    self.log.warn("Cannot run pod {ns}/{name}: {error}", ns=key[0], name=key[1],
                                  error=e)
                    continue
                self.seen[key] = meta.get("resourceVersion")
        await self._report(current)
        return True

    async def _list_and_watch(self):
        code, body = await self.api.request("GET", self._path)
        if code != 200:
            self.log.warn("Cannot list this node's pods: {code} {body}", code=code, body=body)
            return False
        self.pods = {}
        for pod in body.get("items") or ():
            self.pods[_key(pod)] = pod
        version = (body.get("metadata") or {}).get("resourceVersion", "")
        try:
            code, stream = await self.api.watch(
                f"{self._path}&watch=true&allowWatchBookmarks=true&resourceVersion={version}",
                self._event)
        except Exception as e:
            code, stream = 0, str(e)
        if code != 200:
            # This pass goes on with the list; the next one lists again.
            self.log.warn("Cannot watch this node's pods: {code} {body}", code=code, body=stream)
            return True
        self.stream = stream
        stream.ended.addBoth(lambda _: self._ended(stream))
        return True

    def _ended(self, stream):
        if self.stream is stream:
            self.stream = None

    def _event(self, event):
        kind, pod = event.get("type"), event.get("object") or {}
        if kind in ("ADDED", "MODIFIED"):
            self.pods[_key(pod)] = pod
        elif kind == "DELETED":
            self.pods.pop(_key(pod), None)
        elif kind == "ERROR":
            # Usually 410 Gone: the pass after the stream's end lists again.
            self.log.info("The pod watch ended: {status}", status=pod.get("message", pod))
            if self.stream is not None:
                self.stream.stop()
            return
        else:
            return       # BOOKMARK
        self.repeater.poke()

    async def _kill(self, key):
        try:
            await call(self.runtime.kill_pod, *key)
        except Exception as e:
            self.log.warn("Cannot stop pod {ns}/{name}: {error}", ns=key[0], name=key[1], error=e)
            return
        self.seen.pop(key, None)
        self.written.pop(key, None)

    async def _delete(self, key, pod):
        """Stop a pod being deleted, then finish its deletion (grace period 0)."""
        await self._kill(key)
        uid = pod["metadata"].get("uid")
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        if uid:
            options["preconditions"] = {"uid": uid}
        code, body = await self.api.request(
            "DELETE", f"/api/v1/namespaces/{key[0]}/pods/{key[1]}", options)
        if code not in (200, 202, 404, 409):
            self.log.warn("Cannot delete pod {ns}/{name}: {code} {body}", ns=key[0],
                          name=key[1], code=code, body=body)

    async def _report(self, current):
        for pod, status in await call(self.runtime.pods):
            meta = pod.get("metadata") or {}
            key = (meta.get("namespace"), meta.get("name"))
            live = current.get(key)
            if live is None or live["metadata"].get("deletionTimestamp"):
                continue
            if self.written.get(key) == status or live.get("status") == status:
                self.written[key] = status
                continue
            code, body = await self.api.request(
                "PATCH", f"/api/v1/namespaces/{key[0]}/pods/{key[1]}/status", {"status": status},
                content_type="application/merge-patch+json")
            if code == 200:
                self.written[key] = status
            else:
                self.log.warn("Cannot write the status of pod {ns}/{name}: {code} {body}",
                              ns=key[0], name=key[1], code=code, body=body)
