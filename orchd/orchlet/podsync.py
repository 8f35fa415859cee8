# -*- test-case-name: tests.orchlet.test_podsync -*-
"""
Pods bound to this node: run them, stop them, report their status.

The agent relists C{/api/v1/pods?fieldSelector=spec.nodeName=<node>} every
few seconds instead of holding a watch: one short request, nothing to
resume after a dropped stream or a compacted resourceVersion, and the Node
authorizer allows exactly this list. Each pass hands new or changed pods to
the runtime (C{sync_pod}, idempotent), kills those gone or being deleted,
and patches C{pods/<p>/status} when the runtime's view differs from what
was last written.
"""

import inspect
from urllib.parse import quote

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from orchd.orchlet.heartbeat import Repeater

RELIST_INTERVAL = 2.0


async def call(method, *args):
    """Call a runtime method that may answer at once, with a Deferred or a coroutine."""
    result = method(*args)
    if isinstance(result, Deferred) or inspect.isawaitable(result):
        result = await result
    return result


class PodSync:
    """One relist-and-sync loop for the pods of C{node_name}."""

    log = Logger()

    def __init__(self, clock, api, runtime, node_name, interval=RELIST_INTERVAL):
        self.clock = clock
        self.api = api
        self.runtime = runtime
        self.node_name = node_name
        self.seen = {}               # (namespace, name) -> resourceVersion handed to the runtime
        self.written = {}            # (namespace, name) -> status last patched
        self.repeater = Repeater(clock, self.sync, interval, "Syncing pods")

    def start(self, delay=0):
        self.repeater.start(delay)

    def stop(self):
        return self.repeater.stop()

    async def sync(self):
        """One pass; True if the list could be read."""
        selector = quote(f"spec.nodeName={self.node_name}", safe="")
        code, body = await self.api.request("GET", f"/api/v1/pods?fieldSelector={selector}")
        if code != 200:
            self.log.warn("Cannot list this node's pods: {code} {body}", code=code, body=body)
            return False
        current = {}
        for pod in body.get("items") or ():
            meta = pod.get("metadata") or {}
            current[(meta.get("namespace"), meta.get("name"))] = pod
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
