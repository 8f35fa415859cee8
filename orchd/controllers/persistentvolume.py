# -*- test-case-name: tests.controllers.test_persistentvolume -*-
"""
The persistent-volume binder: claims bind to volumes, volumes are made for
claims of the built-in class, and a volume whose claim went is released.

As upstream's C{pkg/controller/volume/persistentvolume/pv_controller.go}
(C{syncClaim}, C{syncVolume}), with the annotations it writes [COMPAT]:

  - a claim not yet bound takes the volume pre-bound to it, else the
    smallest fitting C{Available} one (L{find_best_match}); the volume's
    C{claimRef} is written first (with C{pv.kubernetes.io/bound-by-controller}
    when this controller chose it), then the claim's C{volumeName} with
    C{pv.kubernetes.io/bind-completed}, then both phases: C{Bound}, the
    claim's status carrying the volume's capacity and access modes;
  - a claim of a C{WaitForFirstConsumer} class waits (event
    C{WaitForFirstConsumer}) until the scheduler names its node
    (C{volume.kubernetes.io/selected-node}), or binds to a volume
    pre-bound to it (the scheduler binds static volumes that way);
  - with no fitting volume, a claim of a class whose provisioner is
    L{PROVISIONER} gets a new volume C{pvc-<claim uid>}: a C{hostPath}
    under the class's C{path} parameter (L{DEFAULT_ROOT}), or for this
    process's node under the data directory, with node affinity to the
    selected node when there is one; a claim of another
    provisioner's class is annotated C{volume.kubernetes.io/storage-provisioner}
    for it (event C{ExternalProvisioning}); a claim with no class waits
    (event C{FailedBinding});
  - a claim that names no class (the field unset, not C{""}) and finds no
    volume of no class gets the default class once there is one
    (upstream's retroactive default StorageClass assignment);
  - a bound claim whose volume is gone, or no longer names it, is C{Lost};
  - a volume with no claim is C{Available}; one whose claim is gone is
    C{Released} and reclaimed as its C{persistentVolumeReclaimPolicy}
    says: C{Retain} keeps it, C{Delete} removes a volume this controller
    provisioned (others are C{Failed}: nothing here can delete them).

A volume provisioned on the node whose agent runs in this process is a
directory under C{<data dir>/volumes} (L{LocalVolumes}), made before the
volume is and removed before it is deleted; volumes of other nodes
(simulated ones) are objects only.
"""

import os


from orchd.api.errors import StatusError
from orchd.api.kinds import STORAGE
from orchd.api.meta import rfc3339
from orchd.controllers.base import CacheSyncedController
from orchd.controllers.events import NORMAL, WARNING, EventRecorder
from orchd.controllers.localvolumes import LocalVolumes, in_thread
from orchd.controllers.volumematch import (
    AVAILABLE, BETA_STORAGE_PROVISIONER, BIND_COMPLETED, BOUND, BOUND_BY_CONTROLLER, FAILED,
    LOST, PENDING, PROVISIONED_BY, RELEASED, SELECTED_NODE, STORAGE_PROVISIONER, ClaimView,
    ClassView, VolumeView, default_class, find_best_match, satisfies,
)
from orchd.registry.context import RequestContext
from orchd.registry.options import DeleteOptions
from orchd.storage.interfaces import DELETED

#: The built-in provisioner's name, as classes name it.
PROVISIONER = "orch.io/host-path"
#: Where its volumes live on a node, unless the class's C{path} parameter says.
DEFAULT_ROOT = "/var/lib/orchd/volumes"
#: Upstream's component name on events, and this controller's field manager.
COMPONENT = "persistentvolume-controller"
MANAGER = "persistentvolume-binder"

NO_CLASS = "no persistent volumes available for this claim and no storage class is set"
WAITING = "waiting for first consumer to be created before binding"
EXTERNAL = ("Waiting for a volume to be created either by the external provisioner '{}' or "
            "manually by the system administrator. If volume creation is delayed, please "
            "verify that the provisioner is running and correctly registered.")
LOST_REFERENCE = "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!"
LOST_VOLUME = "Bound claim has lost its PersistentVolume. Data on the volume is lost!"
MISBOUND = "Two claims are bound to the same volume, this one is bound incorrectly"

_CLAIM, _VOLUME = "claim:", "volume:"


def _annotations(obj):
    meta = obj["metadata"]
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict):
        annotations = meta["annotations"] = {}
    return annotations


def _status(obj):
    status = obj.get("status")
    if not isinstance(status, dict):
        status = obj["status"] = {}
    return status


def _spec(obj):
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    return spec


def claim_object(claim):
    """An event's involved object for a L{ClaimView}."""
    return {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
            "metadata": {"namespace": claim.namespace, "name": claim.name, "uid": claim.uid}}


def volume_object(volume):
    return {"kind": "PersistentVolume", "apiVersion": "v1",
            "metadata": {"name": volume.name, "uid": volume.uid}}


def provisioned_volume(claim, storage_class, root=DEFAULT_ROOT, path=None):
    """
    The volume L{PROVISIONER} makes for C{claim} (the stored object) of
    C{storage_class} (a L{ClassView}), pre-bound to it.

    @param path: its directory, if not under the class's C{path} parameter
        (or C{root}).
    """
    meta, spec = claim["metadata"], claim.get("spec") or {}
    name = f"pvc-{meta['uid']}"
    requests = ((spec.get("resources") or {}).get("requests") or {})
    base = str(storage_class.parameters.get("path") or root).rstrip("/")
    if path is None:
        path = f"{base}/{name}_{meta['namespace']}_{meta['name']}"
    volume_spec = {
        "capacity": {"storage": requests["storage"]},
        "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
        "persistentVolumeReclaimPolicy": storage_class.reclaim_policy,
        "storageClassName": storage_class.name,
        "volumeMode": spec.get("volumeMode") or "Filesystem",
        "hostPath": {"path": path, "type": "DirectoryOrCreate"},
        "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                     "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"],
                     "resourceVersion": meta.get("resourceVersion", "")},
    }
    if storage_class.mount_options:
        volume_spec["mountOptions"] = list(storage_class.mount_options)
    node = (meta.get("annotations") or {}).get(SELECTED_NODE)
    if node:
        volume_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {PROVISIONED_BY: PROVISIONER,
                                                       BOUND_BY_CONTROLLER: "yes"}},
            "spec": volume_spec}


class PersistentVolumeController(CacheSyncedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    @param root: where provisioned volumes live on their node, for classes
        without a C{path} parameter.
    @param local: the L{LocalVolumes} of this process's node, or None.
    """

    name = "persistentvolume-binder"

    def __init__(self, catalog, clock, root=DEFAULT_ROOT, local=None):
        super().__init__(catalog, clock)
        self._root = root
        self._local = local
        self._claims = catalog.resource("", "persistentvolumeclaims")
        self._volumes = catalog.resource("", "persistentvolumes")
        self._claim_prefix = self._claims.info.key_prefix()
        self._volume_prefix = self._volumes.info.key_prefix()
        self._class_prefix = catalog.resource(STORAGE, "storageclasses").info.key_prefix()
        self._recorder = EventRecorder(catalog, clock, COMPONENT)
        self._claim_informer = self.follow("", "persistentvolumeclaims", self._claim_changed,
                                           keep=ClaimView)
        self._volume_informer = self.follow("", "persistentvolumes", self._volume_changed,
                                            keep=VolumeView)
        self._class_informer = self.follow(STORAGE, "storageclasses", self._class_changed,
                                           keep=ClassView)

    @classmethod
    def from_environment(cls, env):
        """With L{LocalVolumes} when a node agent runs in this process."""
        config, local = env.config, None
        if config is not None and not config.no_orchlet and not config.orchlet_only:
            local = LocalVolumes(config.node_name, os.path.join(config.data_dir, "volumes"),
                                 in_thread(env.clock))
        return cls(env.catalog, env.clock, local=local)

    # -- informers ------------------------------------------------------------

    def _claim_changed(self, type, obj, old):
        meta = obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        self.enqueue(_CLAIM + key)
        if type == DELETED:
            for volume in self._volume_informer.cache.values():
                if volume.claim_key == key:
                    self.enqueue(_VOLUME + volume.name)

    def _volume_changed(self, type, obj, old):
        name = obj["metadata"]["name"]
        self.enqueue(_VOLUME + name)
        new = None if type == DELETED else self._volume_informer.cache.get(
            self._volume_prefix + name)
        for view in (old, new):
            if view is not None and view.claim_key is not None:
                self.enqueue(_CLAIM + view.claim_key)
        if new is not None and new.phase == AVAILABLE and new.claim_ref is None and (
                old is None or old.phase != AVAILABLE or old.claim_ref is not None):
            # A volume free to take: the claims of its class that wait may take it.
            for claim in self._claim_informer.cache.values():
                if claim.class_name == new.class_name and not claim.bind_completed:
                    self.enqueue(_CLAIM + claim.key)

    def _class_changed(self, type, obj, old):
        name = obj["metadata"]["name"]
        new = None if type == DELETED else self._class(name)
        for claim in self._claim_informer.cache.values():
            if claim.bind_completed:
                continue
            if claim.class_name == name or (claim.class_unset and new is not None
                                            and new.is_default):
                self.enqueue(_CLAIM + claim.key)

    # -- reads ----------------------------------------------------------------

    def _claim(self, key):
        return self._claim_informer.cache.get(self._claim_prefix + key)

    def _volume(self, name):
        return self._volume_informer.cache.get(self._volume_prefix + name)

    def _class(self, name):
        return self._class_informer.cache.get(self._class_prefix + name) if name else None

    def _context(self, namespace=""):
        return RequestContext(self._catalog.system_context().user, namespace,
                              field_manager=MANAGER)

    async def _sync(self, key):
        if key.startswith(_CLAIM):
            claim = self._claim(key[len(_CLAIM):])
            if claim is not None:
                await self._sync_claim(claim)
        else:
            volume = self._volume(key[len(_VOLUME):])
            if volume is not None:
                await self._sync_volume(volume)

    # -- claims ---------------------------------------------------------------

    async def _sync_claim(self, claim):
        if not claim.bind_completed:
            await self._sync_unbound_claim(claim)
            return
        if not claim.volume_name:
            await self._lose(claim, LOST_REFERENCE)
            return
        volume = self._volume(claim.volume_name)
        if volume is None:
            stored = await self.get_or_none(self._volumes, "", claim.volume_name)
            if stored is not None:
                volume = VolumeView(stored)     # the informer lags behind the store
        if volume is None:
            await self._lose(claim, LOST_VOLUME)
        elif volume.claim_ref is None or volume.bound_to(claim):
            await self._bind(claim, volume)
        else:
            await self._lose(claim, MISBOUND, reason="ClaimMisbound")

    async def _sync_unbound_claim(self, claim):
        if claim.volume_name:
            # Pre-bound by its author to a volume.
            volume = self._volume(claim.volume_name)
            if volume is None or (volume.claim_ref is not None and not volume.bound_to(claim)):
                await self._claim_phase(claim, PENDING)
                return
            if volume.claim_ref is None:
                why = satisfies(volume, claim)
                if why is not None:
                    self._event(claim, WARNING, "VolumeMismatch",
                                f'Cannot bind to requested volume "{volume.name}": {why}')
                    await self._claim_phase(claim, PENDING)
                    return
            await self._bind(claim, volume)
            return
        storage_class = self._class(claim.class_name)
        # A claim waiting for its consumer takes only a volume pre-bound to it:
        # the scheduler, which knows the node, binds static volumes so.
        delay = storage_class is not None and storage_class.delays_binding
        volume = find_best_match(claim, self._volume_informer.cache.values(), delay_binding=delay)
        if volume is not None:
            await self._bind(claim, volume)
            return
        await self._claim_phase(claim, PENDING)
        if delay and not claim.selected_node:
            self._event(claim, NORMAL, "WaitForFirstConsumer", WAITING)
        elif not claim.class_name:
            default = default_class(self._class_informer.cache.values())
            if claim.class_unset and default is not None:
                await self._assign_class(claim, default.name)   # synced again then
            else:
                self._event(claim, NORMAL, "FailedBinding", NO_CLASS)
        elif storage_class is None:
            self._event(claim, WARNING, "ProvisioningFailed",
                        f'storageclass.storage.orch.io "{claim.class_name}" not found')
        elif not storage_class.provisions:
            self._event(claim, WARNING, "ProvisioningFailed",
                        f"no volume plugin matched name: {storage_class.provisioner}")
        elif storage_class.provisioner == PROVISIONER:
            await self._provision(claim, storage_class)
        else:
            await self._annotate_provisioner(claim, storage_class.provisioner)
            self._event(claim, NORMAL, "ExternalProvisioning",
                        EXTERNAL.format(storage_class.provisioner))

    async def _assign_class(self, claim, name):
        """
        Upstream's retroactive default class (GA in 1.28): a Pending claim
        made while no class was default gets the default once there is one.
        """
        def assign(current):
            spec = _spec(current)
            if current["metadata"].get("uid") != claim.uid or spec.get("volumeName") or \
                    spec.get("storageClassName") is not None:
                return current
            spec["storageClassName"] = name
            return current

        await self._patch(self._claims, claim.namespace, claim.name, assign)
        self.log.info("Claim {claim} gets the default StorageClass {name}", claim=claim.key,
                      name=name)

    async def _bind(self, claim, volume):
        """Upstream's C{bind}: the volume names the claim, the claim the volume, both Bound."""
        written = await self._bind_volume(claim, volume)
        ref = ((written or {}).get("spec") or {}).get("claimRef") or {}
        if written is None or ref.get("uid") != claim.uid:
            return                  # gone, replaced or taken by another claim meanwhile
        await self._volume_phase(volume, BOUND)
        updated = await self._bind_claim(claim, volume)
        if updated is None or (updated.get("spec") or {}).get("volumeName") != volume.name:
            return
        volume_spec = written["spec"]

        def bound(current):
            if current["metadata"].get("uid") != claim.uid:
                return current
            status = _status(current)
            status["phase"] = BOUND
            if volume_spec.get("accessModes"):
                status["accessModes"] = list(volume_spec["accessModes"])
            if volume_spec.get("capacity"):
                status["capacity"] = dict(volume_spec["capacity"])
            return current

        await self._patch(self._claims, claim.namespace, claim.name, bound, "status")

    async def _bind_volume(self, claim, volume):
        """The volume's C{claimRef} set to the claim, unless another claim holds it."""
        def bind(current):
            if current["metadata"].get("uid") != volume.uid:
                return current
            spec = _spec(current)
            ref = spec.get("claimRef")
            named = isinstance(ref, dict) and bool(ref.get("name"))
            if named and not (ref.get("namespace") == claim.namespace
                              and ref.get("name") == claim.name
                              and ref.get("uid") in (None, "", claim.uid)):
                return current
            if named and ref.get("uid") == claim.uid:
                return current
            if not named:
                _annotations(current)[BOUND_BY_CONTROLLER] = "yes"
            spec["claimRef"] = claim.reference()
            return current

        return await self._patch(self._volumes, "", volume.name, bind)

    async def _bind_claim(self, claim, volume):
        def bind(current):
            if current["metadata"].get("uid") != claim.uid:
                return current
            spec = _spec(current)
            annotations = _annotations(current)
            if spec.get("volumeName") != volume.name:
                if spec.get("volumeName"):
                    return current          # its author named another volume meanwhile
                spec["volumeName"] = volume.name
                annotations[BOUND_BY_CONTROLLER] = "yes"
            annotations[BIND_COMPLETED] = "yes"
            return current

        return await self._patch(self._claims, claim.namespace, claim.name, bind)

    async def _lose(self, claim, message, reason="ClaimLost"):
        if claim.phase != LOST:
            self._event(claim, WARNING, reason, message)
        await self._claim_phase(claim, LOST)

    async def _claim_phase(self, claim, phase):
        if claim.phase == phase:
            return

        def change(current):
            if current["metadata"].get("uid") != claim.uid:
                return current
            status = _status(current)
            status["phase"] = phase
            if phase != BOUND:
                status.pop("capacity", None)
                status.pop("accessModes", None)
            return current

        await self._patch(self._claims, claim.namespace, claim.name, change, "status")

    async def _annotate_provisioner(self, claim, provisioner):
        if claim.provisioner == provisioner:
            return

        def annotate(current):
            if current["metadata"].get("uid") != claim.uid:
                return current
            annotations = _annotations(current)
            annotations[STORAGE_PROVISIONER] = provisioner
            annotations[BETA_STORAGE_PROVISIONER] = provisioner
            return current

        return await self._patch(self._claims, claim.namespace, claim.name, annotate)

    async def _provision(self, claim, storage_class):
        """Make the volume of a claim of L{PROVISIONER}'s class (once: its name is fixed)."""
        if claim.deleting or self._volume(f"pvc-{claim.uid}") is not None:
            return
        current = await self._annotate_provisioner(claim, PROVISIONER)
        if current is None:
            current = await self.get_or_none(self._claims, claim.namespace, claim.name)
        if current is None or current["metadata"].get("uid") != claim.uid:
            return
        requests = ((current.get("spec") or {}).get("resources") or {}).get("requests") or {}
        if not requests.get("storage"):
            self._event(claim, WARNING, "ProvisioningFailed",
                        "failed to provision volume: the claim requests no storage")
            return
        path = None
        local = self._local
        node = (current["metadata"].get("annotations") or {}).get(SELECTED_NODE)
        if local is not None and node == local.node_name:
            path = local.path(f"pvc-{claim.uid}")
            await local.create(path)
        volume = provisioned_volume(current, storage_class, self._root, path)
        try:
            await self._volumes.create(self._context(), volume)
        except StatusError as e:
            if e.code == 409:
                return              # made already; its claim is synced when it is seen
            self._event(claim, WARNING, "ProvisioningFailed",
                        f"failed to provision volume with StorageClass "
                        f'"{storage_class.name}": {e.message}')
            raise
        self.log.info("Provisioned volume {volume} for claim {claim}",
                      volume=volume["metadata"]["name"], claim=claim.key)
        self._event(claim, NORMAL, "ProvisioningSucceeded",
                    f"Successfully provisioned volume {volume['metadata']['name']} "
                    f"using {PROVISIONER}")

    # -- volumes --------------------------------------------------------------

    async def _sync_volume(self, volume):
        if volume.claim_ref is None:
            await self._volume_phase(volume, AVAILABLE)
            return
        namespace, name, uid = volume.claim_ref
        key = f"{namespace}/{name}"
        if not uid:
            # Pre-bound by its author; the claim's sync binds it.
            await self._volume_phase(volume, AVAILABLE)
            self.enqueue(_CLAIM + key)
            return
        claim = self._claim(key)
        if claim is None or claim.uid != uid:
            found = await self.get_or_none(self._claims, namespace, name)
            if found is not None and found["metadata"].get("uid") == uid:
                self.enqueue(_CLAIM + key)          # the informer lags behind
                return
            if volume.phase not in (RELEASED, FAILED):
                await self._volume_phase(volume, RELEASED)
            await self._reclaim(volume)
        elif not claim.volume_name:
            self.enqueue(_CLAIM + key)              # half bound: the claim's sync finishes
        elif claim.volume_name == volume.name:
            await self._volume_phase(volume, BOUND)
        else:
            await self._unbind(volume)

    async def _unbind(self, volume):
        """The claim went to another volume: give this one up (upstream's C{unbindVolume})."""
        def unbind(current):
            if current["metadata"].get("uid") != volume.uid:
                return current
            spec = _spec(current)
            annotations = _annotations(current)
            if BOUND_BY_CONTROLLER in annotations:
                spec.pop("claimRef", None)
                del annotations[BOUND_BY_CONTROLLER]
            elif isinstance(spec.get("claimRef"), dict):
                spec["claimRef"].pop("uid", None)
            return current

        await self._patch(self._volumes, "", volume.name, unbind)

    async def _reclaim(self, volume):
        policy = volume.reclaim_policy
        if policy == "Retain":
            return
        if policy == "Delete" and volume.provisioned_by == PROVISIONER:
            if self._local is not None and self._local.holds(volume.host_path):
                await self._local.remove(volume.host_path)
            try:
                await self._volumes.delete(self._context(), volume.name,
                                           DeleteOptions(uid=volume.uid))
            except StatusError as e:
                if e.code not in (404, 409):
                    raise
                return
            self.log.info("Deleted released volume {volume}", volume=volume.name)
            return
        if policy == "Delete" and volume.provisioned_by:
            return                  # its external provisioner deletes it
        if volume.phase == FAILED:
            return
        if policy == "Delete":
            reason, message = "VolumeFailedDelete", (
                f'error getting deleter volume plugin for volume "{volume.name}": '
                "no deletable volume plugin matched")
        else:
            reason, message = "VolumeFailedRecycle", (
                f'error getting recycler volume plugin for volume "{volume.name}": '
                "no recyclable volume plugin matched")
        self._recorder.record(volume_object(volume), WARNING, reason, message)
        await self._volume_phase(volume, FAILED, message)

    async def _volume_phase(self, volume, phase, message=None):
        if volume.phase == phase:
            return
        stamp = rfc3339(self._clock.seconds())

        def change(current):
            if current["metadata"].get("uid") != volume.uid:
                return current
            status = _status(current)
            if status.get("phase") != phase:
                status["phase"] = phase
                status["lastPhaseTransitionTime"] = stamp
            if message:
                status["message"] = message
            else:
                status.pop("message", None)
            return current

        await self._patch(self._volumes, "", volume.name, change, "status")

    # -- writes ---------------------------------------------------------------

    async def _patch(self, provider, namespace, name, change, subresource=""):
        """C{change} applied to the stored object; the object written, None when gone."""
        try:
            return await provider.patch(self._context(namespace), name, change,
                                        subresource=subresource)
        except StatusError as e:
            if e.code == 404:
                return None
            raise

    def _event(self, claim, type, reason, message):
        self._recorder.record(claim_object(claim), type, reason, message)
