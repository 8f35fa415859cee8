"""Fakes for the node agent's unit tests: an API answering from a function, a runtime."""

from twisted.internet.defer import Deferred
from zope.interface import implementer

from orchd.orchlet.runtime import CheckpointUnsupported, IRuntime


class FakeAPI:
    """Records requests; C{answer(method, path, body)} gives C{(code, body)} or raises."""

    def __init__(self, answer=None):
        self.requests = []
        self.answer = answer or (lambda method, path, body: (200, body or {}))

    async def request(self, method, path, body=None, content_type="application/json"):
        self.requests.append((method, path, body, content_type))
        return self.answer(method, path, body)

    def calls(self, method=None):
        return [(m, p) for m, p, _, _ in self.requests if method is None or m == method]

    async def watch(self, path, on_event):
        """Records a C{WATCH}; C{answer("WATCH", ...)} may refuse it, else a L{FakeStream}."""
        self.requests.append(("WATCH", path, None, None))
        code, body = self.answer("WATCH", path, None)
        if code != 200:
            return code, body
        self.stream = FakeStream(on_event)
        return 200, self.stream


class FakeStream:
    """An open watch: L{push} hands it an event; L{stop} (or the server) ends it."""

    def __init__(self, on_event):
        self.on_event = on_event
        self.ended = Deferred()

    def push(self, kind, obj):
        self.on_event({"type": kind, "object": obj})

    def stop(self):
        if not self.ended.called:
            self.ended.callback(None)


@implementer(IRuntime)
class FakeRuntime:
    """
    Runs nothing: a synced pod reports C{{"phase": "Running"}}; a stop
    waits until the test fires C{stops[(namespace, name)]}.
    """

    name = "fake://1.0"
    default_checkpoint_timeout = 0

    def __init__(self):
        self.synced = []
        self.killed = []
        self.stopping = []
        self.stops = {}
        self.statuses = {}
        self.observer = None

    def observe(self, observer):
        self.observer = observer

    def sync_pod(self, pod):
        self.synced.append(pod["metadata"]["name"])
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        status = self.statuses.get(key, (None, {"phase": "Running"}))[1]
        self.statuses[key] = (pod, status)

    def set_status(self, namespace, name, status):
        """What the runtime now reports for a pod, told to the observer."""
        pod = self.statuses[(namespace, name)][0]
        self.statuses[(namespace, name)] = (pod, status)
        self.observer.pod_changed(namespace, name)

    def stop_pod(self, namespace, name, grace):
        self.stopping.append((name, grace))
        if (namespace, name) not in self.stops:
            self.stops[(namespace, name)] = Deferred()
        return self.stops[(namespace, name)]

    def kill_pod(self, namespace, name):
        self.killed.append(name)
        self.statuses.pop((namespace, name), None)

    def close(self):
        self.closed = True

    def pod_status(self, namespace, name):
        entry = self.statuses.get((namespace, name))
        return None if entry is None else entry[1]

    def pods(self):
        return list(self.statuses.values())

    def container_logs(self, namespace, pod, container):
        return b""

    def stats(self):
        return {"node": {}, "pods": []}

    def checkpoint(self, namespace, pod, container, path, timeout):
        raise CheckpointUnsupported("the fake runtime does not checkpoint")
