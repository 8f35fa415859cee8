# -*- test-case-name: tests.orchlet.test_podwatch -*-
"""
The pods bound to a set of nodes, followed with one list and one watch.

A node agent lists C{/api/v1/pods?fieldSelector=spec.nodeName=<node>}
once, then watches from that list's resourceVersion, so an idle node costs
the API server one open stream, not a list every few seconds. The
simulated nodes of one process share a single list and watch
(C{spec.nodeName!=}: every bound pod), each pod handed to the worker of
its node, so that N nodes cost one stream, not N. Pods of nodes this
process does not run are dropped on arrival.

When the watch ends it is opened again from the last resourceVersion
seen (bookmarks keep that fresh); when the server refuses that version
(410 Gone) or the connection fails, everything is listed again, after a
back-off if the failure repeats. Each (re)list gives every worker the full
set of its pods, so a pod deleted meanwhile is noticed.
"""

from urllib.parse import quote

from twisted.internet.defer import CancelledError, Deferred
from twisted.logger import Logger

from orchd.orchlet.heartbeat import Backoff


def pod_key(pod):
    meta = pod.get("metadata") or {}
    return meta.get("namespace"), meta.get("name")


def node_of(pod):
    return (pod.get("spec") or {}).get("nodeName") or ""


class PodWatch:
    """
    One list-then-watch of pods, dispatched by C{spec.nodeName}.

    @param api: an L{orchd.orchlet.apiclient.APIClient}, whose identity may
        list and watch the selected pods.
    @param selector: the field selector, e.g. C{spec.nodeName=n1}.
    @param workers: C{{node name: worker}}, read at each event (it may grow);
        a worker has C{replace(pods)}, C{upsert(pod)} and C{remove(key)}.
    """

    log = Logger()

    def __init__(self, clock, api, selector, workers, backoff=None):
        self.clock = clock
        self.api = api
        self.workers = workers
        self.path = "/api/v1/pods?fieldSelector=" + quote(selector, safe="")
        self.backoff = backoff or Backoff()
        self.stream = None
        self.version = None          # the last resourceVersion seen, to watch from
        self.lists = 0               # how many lists were made (for tests and logs)
        self.listed = Deferred()     # fires after the first successful list
        self._running = False
        self._work = None
        self._pause = None

    def start(self):
        self._running = True
        self._work = Deferred.fromCoroutine(self._loop())
        self._work.addErrback(self._failed)

    def _failed(self, failure):
        if not failure.check(CancelledError):
            self.log.failure("The pod watch stopped", failure)

    def stop(self):
        """Stop; a Deferred that fires once the loop has ended."""
        self._running = False
        if self.stream is not None:
            self.stream.stop()
        if self._pause is not None and not self._pause.called:
            self._pause.cancel()
        done = Deferred()
        if self._work is None or self._work.called:
            done.callback(None)
        else:
            self._work.addBoth(lambda _: done.callback(None))
        return done

    def relist(self):
        """List again soon (a worker was added): end the open watch."""
        self.version = None
        if self.stream is not None:
            self.stream.stop()

    async def _loop(self):
        while self._running:
            try:
                ok = await self._cycle()
            except CancelledError:
                raise
            except Exception as e:
                self.log.warn("Following pods failed: {error}", error=e)
                ok = False
            if not self._running:
                return
            if ok:
                self.backoff.reset()
                continue
            self._pause = Deferred()
            call = self.clock.callLater(self.backoff.next(), self._pause.callback, None)
            self._pause.addErrback(lambda f: call.cancel() if call.active() else f)
            try:
                await self._pause
            except CancelledError:
                return
            finally:
                self._pause = None

    async def _cycle(self):
        """List if needed, then watch until the stream ends; False after a failure."""
        if self.version is None and not await self._list():
            return False
        if not self._running:           # stopped while listing
            return True
        try:
            code, stream = await self.api.watch(
                f"{self.path}&watch=true&allowWatchBookmarks=true"
                f"&resourceVersion={quote(self.version, safe='')}", self._event)
        except Exception as e:
            code, stream = 0, str(e)
        if code != 200:
            self.log.warn("Cannot watch pods: {code} {body}", code=code, body=stream)
            self.version = None
            return False
        self.stream = stream
        if not self._running:           # stopped while the watch was being opened
            stream.stop()
        ended = Deferred()
        stream.ended.addBoth(lambda _: ended.callback(None))
        try:
            await ended
        finally:
            self.stream = None
        return True

    async def _list(self):
        code, body = await self.api.request("GET", self.path)
        if code != 200 or not isinstance(body, dict):
            self.log.warn("Cannot list pods: {code} {body}", code=code, body=body)
            return False
        by_node = {}
        for pod in body.get("items") or ():
            by_node.setdefault(node_of(pod), []).append(pod)
        for name, worker in list(self.workers.items()):
            worker.replace(by_node.get(name, []))
        self.version = (body.get("metadata") or {}).get("resourceVersion") or "0"
        self.lists += 1
        if not self.listed.called:
            self.listed.callback(None)
        return True

    def _event(self, event):
        kind, pod = event.get("type"), event.get("object") or {}
        if not isinstance(pod, dict):
            return
        if kind == "ERROR":
            # Usually 410 Gone: list again once the stream has ended.
            self.log.info("The pod watch ended: {status}", status=pod.get("message", pod))
            self.version = None
            if self.stream is not None:
                self.stream.stop()
            return
        version = (pod.get("metadata") or {}).get("resourceVersion")
        if version:
            self.version = version
        if kind == "BOOKMARK":
            return
        worker = self.workers.get(node_of(pod))
        if worker is None:
            return
        if kind in ("ADDED", "MODIFIED"):
            worker.upsert(pod)
        elif kind == "DELETED":
            worker.remove(pod_key(pod))
