# -*- test-case-name: tests.controllers.test_deployment -*-
"""
The Deployment controller (upstream's C{pkg/controller/deployment}).

A Deployment runs its pods through replica sets named C{<deployment>-<hash>}
(the hash of the pod template, L{deploymentutil.compute_hash}), one per
template it has had: the replica set whose template is the Deployment's is
the new one, the others old. Each sync claims the replica sets (adopting
orphans its selector matches, releasing those that stopped matching) and
hands them to a L{DeploymentSync}, which scales, rolls out (RollingUpdate
with maxSurge and maxUnavailable, or Recreate), cleans up old replica sets
past C{revisionHistoryLimit}, and writes the status with its
C{Progressing} and C{Available} conditions.

Informers follow Deployments and replica sets whole (their templates are
compared) and pods trimmed to their controller and phase, which a Recreate
rollout waits on. Replica sets are indexed by their controller's uid and
orphans by namespace, so a sync reads only its own.
"""

from collections import defaultdict

from zope.interface import implementer

from orchd.api.errors import StatusError
from orchd.api.selectors import selector_from_label_selector_object
from orchd.controllers.base import CacheSyncedController
from orchd.controllers.controllerref import ControllerRefManager, recheck_owner
from orchd.controllers.deploymentsync import DeploymentSync, IDeploymentWriter
from orchd.controllers.deploymentutil import RECREATE, REVISION
from orchd.controllers.events import WARNING, EventRecorder
from orchd.controllers.podstate import controller_ref
from orchd.registry.context import RequestContext
from orchd.registry.options import DeleteOptions
from orchd.storage.interfaces import ADDED, DELETED

COMPONENT = "deployment-controller"


def _key(meta):
    return f"{meta.get('namespace', '')}/{meta['name']}"


def _keep_pod(pod):
    """What the Deployment controller reads of a pod: its controller, phase and name."""
    meta = pod["metadata"]
    ref = controller_ref(meta)
    return ((ref or {}).get("uid", ""), (pod.get("status") or {}).get("phase") or "",
            meta.get("namespace", ""), meta["name"])


def _selects_all(selector):
    return not isinstance(selector, dict) or not (selector.get("matchLabels")
                                                  or selector.get("matchExpressions"))


@implementer(IDeploymentWriter)
class DeploymentController(CacheSyncedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    @param recorder: an L{EventRecorder}; one of C{deployment-controller} if None.
    """

    name = "deployment"

    def __init__(self, catalog, clock, recorder=None):
        super().__init__(catalog, clock)
        self._provider = catalog.resource("apps", "deployments")
        self._rs_provider = catalog.resource("apps", "replicasets")
        self._prefix = self._provider.info.key_prefix()
        self._rs_prefix = self._rs_provider.info.key_prefix()
        self._pod_prefix = catalog.resource("", "pods").info.key_prefix()
        self._recorder = recorder or EventRecorder(catalog, clock, COMPONENT)
        self._names = defaultdict(set)
        self._selectors = {}
        self._rs_owned = defaultdict(set)
        self._rs_orphans = defaultdict(set)
        self._rs_keys = {}
        self._pods_owned = defaultdict(set)
        self._deployments = self.follow("apps", "deployments", self._deployment_changed)
        self._replica_sets = self.follow("apps", "replicasets", self._replica_set_changed)
        self._pods = self.follow("", "pods", self._pod_changed, keep=_keep_pod)

    # -- informer handlers -------------------------------------------------------

    def _deployment_changed(self, type, obj, old):
        meta = obj["metadata"]
        key, namespace = _key(meta), meta.get("namespace", "")
        if type == DELETED:
            self._names[namespace].discard(meta["name"])
            self._selectors.pop(key, None)
        else:
            self._names[namespace].add(meta["name"])
            selector = (obj.get("spec") or {}).get("selector")
            try:
                self._selectors[key] = None if _selects_all(selector) else \
                    selector_from_label_selector_object(selector)
            except StatusError as e:
                self.log.warn("Deployment {key} has an invalid selector: {error}", key=key,
                              error=e.message)
                self._selectors[key] = None
        self.enqueue(key)

    def _deployment_of(self, namespace, ref):
        """The key of the cached Deployment C{ref} names, or None."""
        if ref is None or ref.get("kind") != "Deployment":
            return None
        key = f"{namespace}/{ref.get('name')}"
        d = self._deployments.cache.get(self._prefix + key)
        if d is None or d["metadata"].get("uid") != ref["uid"]:
            return None
        return key

    def _index_replica_set(self, rs, add):
        meta = rs["metadata"]
        key = _key(meta)
        ref = controller_ref(meta)
        bucket = self._rs_owned[ref["uid"]] if ref is not None else \
            self._rs_orphans[meta.get("namespace", "")]
        if add:
            bucket.add(key)
            self._rs_keys[meta.get("uid")] = key
        else:
            bucket.discard(key)
            self._rs_keys.pop(meta.get("uid"), None)

    def _replica_set_changed(self, type, obj, old):
        if old is not None:
            self._index_replica_set(old, False)
        if type != DELETED:
            self._index_replica_set(obj, True)
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        ref = controller_ref(meta)
        if type == DELETED or (type == ADDED and meta.get("deletionTimestamp")):
            self._enqueue_deployment(namespace, ref)
            return
        if type == ADDED or old is None:
            if ref is not None:
                self._enqueue_deployment(namespace, ref)
            else:
                self._enqueue_matching(namespace, meta.get("labels"))
            return
        old_meta = old["metadata"]
        if old_meta.get("resourceVersion") == meta.get("resourceVersion"):
            return
        old_ref = controller_ref(old_meta)
        ref_changed = (old_ref or {}).get("uid") != (ref or {}).get("uid")
        if ref_changed and old_ref is not None:
            self._enqueue_deployment(namespace, old_ref)
        if ref is not None:
            self._enqueue_deployment(namespace, ref)
            return
        if ref_changed or (old_meta.get("labels") or {}) != (meta.get("labels") or {}):
            self._enqueue_matching(namespace, meta.get("labels"))

    def _enqueue_deployment(self, namespace, ref):
        key = self._deployment_of(namespace, ref)
        if key is not None:
            self.enqueue(key)

    def _enqueue_matching(self, namespace, labels):
        """Queue the Deployments of the namespace whose selector matches an orphan's labels."""
        for name in sorted(self._names.get(namespace, ())):
            key = f"{namespace}/{name}"
            selector = self._selectors.get(key)
            if selector is not None and selector.matches(labels or {}):
                self.enqueue(key)

    def _pod_changed(self, type, obj, old):
        kept = old if type == DELETED else _keep_pod(obj)
        if kept is None:
            return
        pod = f"{kept[2]}/{kept[3]}"
        if old is not None and old[0]:
            self._pods_owned[old[0]].discard(pod)
            if not self._pods_owned[old[0]]:
                del self._pods_owned[old[0]]
        if type != DELETED:
            if kept[0]:
                self._pods_owned[kept[0]].add(pod)
            return
        # A Recreate rollout waits for the old pods to be gone.
        rs_key = self._rs_keys.get(kept[0])
        rs = self._replica_sets.cache.get(self._rs_prefix + rs_key) if rs_key else None
        if rs is None:
            return
        key = self._deployment_of(kept[2], controller_ref(rs["metadata"]))
        if key is None:
            return
        d = self._deployments.cache.get(self._prefix + key)
        if ((d.get("spec") or {}).get("strategy") or {}).get("type") == RECREATE:
            self.enqueue(key)

    # -- sync --------------------------------------------------------------------

    def _context(self, namespace):
        return RequestContext(self._catalog.system_context().user, namespace,
                              field_manager=COMPONENT)

    async def _sync(self, key):
        d = self._deployments.cache.get(self._prefix + key)
        if d is None:
            self._backoff.succeeded(key)
            return
        try:
            await self._sync_deployment(key, d)
        except StatusError as e:
            self.retry_later(key, "Deployment", e)
        else:
            self._backoff.succeeded(key)

    async def _sync_deployment(self, key, d):
        meta = d["metadata"]
        if _selects_all((d.get("spec") or {}).get("selector")):
            self.record(d, WARNING, "SelectingAll",
                        "This deployment is selecting all pods. A non-empty selector is required.")
            status = d.get("status") or {}
            if (status.get("observedGeneration") or 0) < (meta.get("generation") or 0):
                await self.write_status(dict(d, status=dict(
                    status, observedGeneration=meta.get("generation"))))
            return
        selector = self._selectors.get(key)
        if selector is None:
            return
        replica_sets = await self._claim(d, selector)
        pods = {}
        if ((d.get("spec") or {}).get("strategy") or {}).get("type") == RECREATE:
            cache = self._pods.cache
            for rs in replica_sets:
                uid = rs["metadata"]["uid"]
                kept = (cache.get(self._pod_prefix + pod) for pod in self._pods_owned.get(uid, ()))
                pods[uid] = [pod[1] for pod in kept if pod is not None]
        await DeploymentSync(self, d, replica_sets, pods, self._clock.seconds()).run()

    async def _claim(self, d, selector):
        """The replica sets the Deployment controls once claimed."""
        meta = d["metadata"]
        namespace = meta.get("namespace", "")
        keys = self._rs_owned.get(meta["uid"], set()) | self._rs_orphans.get(namespace, set())
        candidates = [rs for rs in (self._replica_sets.cache.get(self._rs_prefix + key)
                                    for key in sorted(keys)) if rs is not None]
        manager = ControllerRefManager(
            self._rs_provider, d, "apps/v1", "Deployment", selector,
            recheck_owner(self._provider, d, self._catalog.system_context().user),
            self._context(namespace))
        claimed, errors = await manager.claim(candidates)
        if errors:
            raise errors[0]
        return claimed

    # -- IDeploymentWriter -------------------------------------------------------

    async def create_replica_set(self, rs):
        return await self._rs_provider.create(self._context(rs["metadata"]["namespace"]), rs)

    async def find_replica_set(self, namespace, name):
        return await self._rs_provider.find(self._context(namespace), name)

    async def update_replica_set(self, rs):
        meta = rs["metadata"]
        uid, spec = meta["uid"], rs.get("spec") or {}
        annotations = dict(meta.get("annotations") or {})

        def change(current):
            self._same_uid(current, uid, self._rs_provider.info)
            current_spec = current.setdefault("spec", {})
            for field in ("replicas", "minReadySeconds"):
                if field in spec:
                    current_spec[field] = spec[field]
            current["metadata"]["annotations"] = annotations
            current["metadata"].pop("resourceVersion", None)
            return current

        return await self._rs_provider.patch(self._context(meta["namespace"]), meta["name"],
                                             change)

    async def delete_replica_set(self, rs):
        meta = rs["metadata"]
        try:
            await self._rs_provider.delete(self._context(meta["namespace"]), meta["name"],
                                           DeleteOptions(uid=meta["uid"]))
        except StatusError as e:
            if e.code not in (404, 409):
                raise

    @staticmethod
    def _same_uid(current, uid, info):
        meta = current["metadata"]
        if meta.get("uid") != uid:
            raise StatusError.not_found(info.resource, info.group, meta.get("name", ""))

    async def write_revision(self, d):
        meta = d["metadata"]
        uid, revision = meta["uid"], (meta.get("annotations") or {}).get(REVISION)

        def change(current):
            self._same_uid(current, uid, self._provider.info)
            current_meta = current["metadata"]
            current_meta["annotations"] = dict(current_meta.get("annotations") or {},
                                               **{REVISION: revision})
            current_meta.pop("resourceVersion", None)
            return current

        return await self._provider.patch(self._context(meta["namespace"]), meta["name"], change)

    async def write_status(self, d):
        meta = d["metadata"]
        uid, status = meta["uid"], d.get("status") or {}

        def change(current):
            self._same_uid(current, uid, self._provider.info)
            current["status"] = status
            current["metadata"].pop("resourceVersion", None)
            return current

        return await self._provider.patch(self._context(meta["namespace"]), meta["name"], change,
                                          subresource="status")

    def record(self, d, type, reason, message):
        self._recorder.record(d, type, reason, message)

    def requeue_after(self, d, delay):
        self.enqueue(_key(d["metadata"]), after=delay)
