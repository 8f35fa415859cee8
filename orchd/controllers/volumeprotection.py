# -*- test-case-name: tests.controllers.test_volumeprotection -*-
"""
The volume-protection controllers: a claim being deleted keeps its
C{kubernetes.io/pvc-protection} finalizer while a pod uses it, and a
volume being deleted keeps C{kubernetes.io/pv-protection} while it is
bound (upstream's C{pkg/controller/volume/pvcprotection} and
C{pvprotection}).

A pod uses a claim when one of its volumes names it, it has been placed
on a node and it has not finished (Succeeded or Failed); a pod not yet
placed does not hold a claim, as upstream (its node agent would refuse to
start it on a claim being deleted, and the scheduler does not place it).
Pods are indexed by the claims they use, so a pod's change looks only at
its own claims.
"""

from collections import defaultdict

from orchd.admission.storageprotection import PV_PROTECTION, PVC_PROTECTION
from orchd.api.errors import StatusError
from orchd.controllers.base import CacheSyncedController
from orchd.controllers.volumematch import BOUND
from orchd.registry.context import RequestContext
from orchd.storage.interfaces import DELETED

_TERMINAL = ("Succeeded", "Failed")


def _protected(obj, finalizer):
    """C{(uid, being deleted and holding C{finalizer})}."""
    meta = obj["metadata"]
    finalizers = meta.get("finalizers")
    return meta.get("uid"), bool(meta.get("deletionTimestamp")) and isinstance(
        finalizers, list) and finalizer in finalizers


def _claim_keep(claim):
    return _protected(claim, PVC_PROTECTION)


def _volume_keep(volume):
    status = volume.get("status")
    phase = status.get("phase") if isinstance(status, dict) else None
    return _protected(volume, PV_PROTECTION) + (phase,)


def _pod_keep(pod):
    """C{(claim names, whether it holds them)}."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
    names = []
    volumes = spec.get("volumes")
    for volume in volumes if isinstance(volumes, list) else ():
        source = volume.get("persistentVolumeClaim") if isinstance(volume, dict) else None
        name = source.get("claimName") if isinstance(source, dict) else None
        if isinstance(name, str) and name:
            names.append(name)
    holds = bool(spec.get("nodeName")) and status.get("phase") not in _TERMINAL
    return tuple(names), holds


class _FinalizerRemover(CacheSyncedController):
    """What both controllers share: taking their finalizer off an object."""

    MANAGER = "volume-protection-controller"

    async def _remove(self, provider, namespace, name, uid, finalizer):
        def remove(current):
            meta = current["metadata"]
            finalizers = meta.get("finalizers")
            if meta.get("uid") != uid or not isinstance(finalizers, list) \
                    or finalizer not in finalizers:
                return current
            meta["finalizers"] = [f for f in finalizers if f != finalizer]
            return current

        ctx = RequestContext(self._catalog.system_context().user, namespace,
                             field_manager=self.MANAGER)
        try:
            await provider.patch(ctx, name, remove)
        except StatusError as e:
            if e.code != 404:
                raise
            return
        self.log.info("Removed {finalizer} from {name}", finalizer=finalizer,
                      name=f"{namespace}/{name}" if namespace else name)


class PVCProtectionController(_FinalizerRemover):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    """

    name = "pvc-protection"

    def __init__(self, catalog, clock):
        super().__init__(catalog, clock)
        self._claims = catalog.resource("", "persistentvolumeclaims")
        self._claim_prefix = self._claims.info.key_prefix()
        self._pod_prefix = catalog.resource("", "pods").info.key_prefix()
        #: C{namespace/claim} -> the keys of the pods whose volumes name it.
        self._users = defaultdict(set)
        self._claim_informer = self.follow("", "persistentvolumeclaims", self._claim_changed,
                                           keep=_claim_keep)
        self._pod_informer = self.follow("", "pods", self._pod_changed, keep=_pod_keep)

    def _claim_changed(self, type, obj, old):
        if type != DELETED and _claim_keep(obj)[1]:
            meta = obj["metadata"]
            self.enqueue(f"{meta['namespace']}/{meta['name']}")

    def _pod_changed(self, type, obj, old):
        meta = obj["metadata"]
        namespace = meta["namespace"]
        pod_key = f"{namespace}/{meta['name']}"
        before = old[0] if old is not None else ()
        after = () if type == DELETED else _pod_keep(obj)[0]
        for name in before:
            users = self._users.get(f"{namespace}/{name}")
            if users is not None:
                users.discard(pod_key)
                if not users:
                    del self._users[f"{namespace}/{name}"]
        for name in after:
            self._users[f"{namespace}/{name}"].add(pod_key)
        for name in set(before) | set(after):
            kept = self._claim_informer.cache.get(f"{self._claim_prefix}{namespace}/{name}")
            if kept is not None and kept[1]:
                self.enqueue(f"{namespace}/{name}")

    def in_use(self, key):
        """Whether a pod placed on a node and not finished uses the claim C{key}."""
        for pod_key in self._users.get(key, ()):
            kept = self._pod_informer.cache.get(self._pod_prefix + pod_key)
            if kept is not None and kept[1]:
                return True
        return False

    async def _sync(self, key):
        kept = self._claim_informer.cache.get(self._claim_prefix + key)
        if kept is None or not kept[1] or self.in_use(key):
            return
        namespace, name = key.split("/", 1)
        await self._remove(self._claims, namespace, name, kept[0], PVC_PROTECTION)


class PVProtectionController(_FinalizerRemover):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    """

    name = "pv-protection"

    def __init__(self, catalog, clock):
        super().__init__(catalog, clock)
        self._volumes = catalog.resource("", "persistentvolumes")
        self._prefix = self._volumes.info.key_prefix()
        self._informer = self.follow("", "persistentvolumes", self._changed, keep=_volume_keep)

    def _changed(self, type, obj, old):
        if type != DELETED and _volume_keep(obj)[1]:
            self.enqueue(obj["metadata"]["name"])

    async def _sync(self, name):
        kept = self._informer.cache.get(self._prefix + name)
        if kept is None or not kept[1] or kept[2] == BOUND:
            return
        await self._remove(self._volumes, "", name, kept[0], PV_PROTECTION)
