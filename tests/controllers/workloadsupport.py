"""
What the workload controllers' tests share: an API harness with the
controllers running, a fake kubelet that makes pods ready by writing their
status, an admission plugin that refuses pod creates on demand, and a view
of the catalog whose informers lag behind the store.
"""

from zope.interface import implementer

from orchd.admission.interfaces import CREATE, IAdmissionPlugin
from orchd.api.errors import StatusError
from orchd.api.meta import rfc3339
from orchd.controllers.deployment import DeploymentController
from orchd.controllers.replicaset import ReplicaSetController
from tests.support import APIHarness

PODS = "/api/v1/namespaces/default/pods"
RS = "/apis/apps/v1/namespaces/default/replicasets"
RC = "/api/v1/namespaces/default/replicationcontrollers"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
EVENTS = "/api/v1/namespaces/default/events"
MERGE = {b"content-type": [b"application/merge-patch+json"]}


@implementer(IAdmissionPlugin)
class RefusePods:
    """Refuses pod creates once C{allowed} more have been let through (None: never)."""

    def __init__(self):
        self.allowed = None

    def admit(self, attributes):
        pass

    def validate(self, attributes):
        info = attributes.info
        if (info.group, info.resource) != ("", "pods") or attributes.operation != CREATE:
            return
        if self.allowed is None:
            return
        if self.allowed <= 0:
            raise StatusError.forbidden("pods", "", attributes.name,
                                        "exceeded quota: compute, requested: pods=1")
        self.allowed -= 1


class LaggingReads:
    """
    The catalog's C{reads} with events of the resources under C{lagging}
    (key prefixes) held back while C{holding}: an informer that lags behind
    the store, released with L{release}.
    """

    def __init__(self, reads, lagging):
        self._reads = reads
        self._lagging = tuple(lagging)
        self.holding = False
        self._held = []

    def list(self, prefix):
        return self._reads.list(prefix)

    def watch(self, prefix, after, on_events, on_error):
        def deliver(events):
            if self.holding and prefix.startswith(self._lagging):
                self._held.append((on_events, events))
            else:
                on_events(events)
        return self._reads.watch(prefix, after, deliver, on_error)

    def release(self):
        self.holding = False
        held, self._held = self._held, []
        for on_events, events in held:
            on_events(events)


class CatalogView:
    """
    A catalog whose C{reads} are L{LaggingReads} for pods; everything else
    is the catalog's.
    """

    def __init__(self, catalog):
        self._catalog = catalog
        self.reads = LaggingReads(catalog.reads, [catalog.resource("", "pods").info.key_prefix()])

    def __getattr__(self, name):
        return getattr(self._catalog, name)


class WorkloadHarness:
    """
    An L{APIHarness} with pod creates refusable (C{self.refuse}), and the
    workload controllers started on demand.
    """

    def __init__(self, test):
        self.test = test
        self.refuse = RefusePods()
        self.api = APIHarness(plugins=(self.refuse,))
        self.clock = self.api.clock

    def start(self, controller):
        controller.startService()
        self.test.addCleanup(controller.stopService)
        self.test.successResultOf(controller.started)
        return controller

    def replica_sets(self, **kw):
        return self.start(ReplicaSetController(self.api.catalog, self.clock, **kw))

    def deployments(self):
        return self.start(DeploymentController(self.api.catalog, self.clock))

    def call(self, method, path, body=None, code=None, headers=None):
        result, obj, _ = self.api.call(method, path, body, headers=headers)
        if code is not None:
            self.test.assertEqual(result, code, obj)
        return obj

    def get(self, path):
        code, obj, _ = self.api.call("GET", path)
        return obj if code == 200 else None

    def patch(self, path, body, code=200):
        return self.call("PATCH", path, body, code, MERGE)

    def pods(self, active=True):
        items = self.get(PODS)["items"]
        if active:
            items = [p for p in items if not p["metadata"].get("deletionTimestamp")
                     and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        return sorted(items, key=lambda p: p["metadata"]["name"])

    def pod_names(self):
        return [p["metadata"]["name"] for p in self.pods()]

    def set_pod_status(self, name, node="node-1", phase="Running", ready=True, since=None,
                       **status):
        """The fake kubelet: bind the pod to C{node} and write its phase and readiness."""
        self.patch(f"{PODS}/{name}", {"spec": {"nodeName": node}})
        stamp = rfc3339(self.clock.seconds() if since is None else since)
        status = dict(status, phase=phase, conditions=[
            {"type": "Ready", "status": "True" if ready else "False",
             "lastTransitionTime": stamp}])
        self.patch(f"{PODS}/{name}/status", {"status": status})

    def finish_deletions(self):
        """The fake kubelet: remove terminating pods (grace 0) once no finalizer holds them."""
        count = 0
        for pod in self.pods(active=False):
            meta = pod["metadata"]
            if meta.get("deletionTimestamp") and not meta.get("finalizers"):
                self.api.call("DELETE", f"{PODS}/{meta['name']}?gracePeriodSeconds=0")
                count += 1
        return count

    def make_ready(self, since=None, node="node-1"):
        """
        Make every active pod not yet ready Running and Ready, and finish the
        deletion of terminating ones; returns how many changed.
        """
        count = self.finish_deletions()
        for pod in self.pods():
            name = pod["metadata"]["name"]
            # Each write lets the controllers act, which may remove a pod listed here.
            pod = self.get(f"{PODS}/{name}")
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                continue
            conditions = (pod.get("status") or {}).get("conditions") or []
            if not any(c.get("type") == "Ready" and c.get("status") == "True"
                       for c in conditions):
                self.set_pod_status(name, node=node, since=since)
                count += 1
        return count

    def events(self, kind=None):
        """C{(reason, message)} of the events written so far, oldest first."""
        self.clock.advance(0)
        items = self.get(EVENTS)["items"]
        items.sort(key=lambda e: e["metadata"]["name"].rsplit(".", 1)[-1])
        return [(e["reason"], e["message"]) for e in items
                if kind is None or e["involvedObject"].get("kind") == kind]


def replica_set(name="web", replicas=3, labels=None, selector=None, **spec):
    labels = labels or {"app": name}
    spec.update(replicas=replicas, selector={"matchLabels": selector or labels},
                template={"metadata": {"labels": labels},
                          "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": spec}


def deployment(name="web", replicas=3, image="nginx", strategy=None, **spec):
    labels = {"app": name}
    spec.update(replicas=replicas, selector={"matchLabels": labels},
                template={"metadata": {"labels": labels},
                          "spec": {"containers": [{"name": "nginx", "image": image}]}})
    if strategy is not None:
        spec["strategy"] = strategy
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": spec}


def pod(name, labels=None, owner=None):
    meta = {"name": name, "labels": labels or {"app": "web"}}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
