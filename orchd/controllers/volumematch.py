# -*- test-case-name: tests.controllers.test_volumematch -*-
"""
What the persistent-volume binder and the scheduler's volume binding read
of claims, volumes and classes, and which volume a claim should bind to.

Both follow these kinds with informers that keep a L{ClaimView},
L{VolumeView} or L{ClassView} instead of the object: sizes parsed,
selectors compiled, annotations looked up once per version.

The matching is upstream's C{findMatchingVolume}
(C{pkg/controller/volume/persistentvolume/util}): a volume pre-bound to
the claim wins outright; otherwise the smallest C{Available} volume, not
claimed by another, of the claim's class and volume mode, whose labels
the claim's selector matches, that offers every access mode the claim asks
for and at least its size (and, for the scheduler, that the node can
reach).

The annotations keep their upstream spelling [COMPAT]: external
provisioners and C{kubectl describe} read them.
"""

from orchd.api import quantity
from orchd.api.errors import StatusError
from orchd.api.printers.storage import BETA_STORAGE_CLASS_ANNOTATION, DEFAULT_CLASS_ANNOTATIONS
from orchd.api.selectors import EVERYTHING, NOTHING, selector_from_label_selector_object

BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
#: Classes of volumes made by hand: nothing provisions them.
NO_PROVISIONER = ("kubernetes.io/no-provisioner", "orch.io/no-provisioner")
IMMEDIATE = "Immediate"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
FILESYSTEM = "Filesystem"

# Phases of claims and volumes.
PENDING, BOUND, LOST = "Pending", "Bound", "Lost"
AVAILABLE, RELEASED, FAILED = "Available", "Released", "Failed"


def _dict(value):
    return value if isinstance(value, dict) else {}


def _bytes(text):
    """A storage size in bytes (rounded up); 0 when absent or not a quantity."""
    try:
        value = quantity.parse(text).value
    except (ValueError, TypeError):
        return 0
    return -(-value.numerator // value.denominator)


def _modes(value):
    return frozenset(m for m in value if isinstance(m, str)) if isinstance(value, list) else \
        frozenset()


def _selector(value):
    if value is None:
        return EVERYTHING
    if not isinstance(value, dict):
        return NOTHING
    try:
        return selector_from_label_selector_object(value)
    except (StatusError, AttributeError, TypeError):
        return NOTHING


def class_of(obj):
    """The class a claim or volume names: the field, else the beta annotation, else ""."""
    spec = _dict(obj.get("spec"))
    name = spec.get("storageClassName")
    if name is None:
        name = _dict(_dict(obj.get("metadata")).get("annotations")).get(
            BETA_STORAGE_CLASS_ANNOTATION)
    return name if isinstance(name, str) else ""


class ClaimView:
    """One version of a PersistentVolumeClaim, as the binders read it."""

    __slots__ = ("namespace", "name", "key", "uid", "class_name", "class_unset", "request",
                 "access_modes", "volume_mode", "selector", "volume_name", "bind_completed",
                 "phase", "selected_node", "provisioner", "deleting")

    def __init__(self, claim):
        meta = _dict(claim.get("metadata"))
        spec = _dict(claim.get("spec"))
        annotations = _dict(meta.get("annotations"))
        self.namespace = meta.get("namespace") or ""
        self.name = meta.get("name") or ""
        self.key = f"{self.namespace}/{self.name}"
        self.uid = meta.get("uid") or ""
        self.class_name = class_of(claim)
        #: Neither the field nor the beta annotation names a class ("" names none).
        self.class_unset = (spec.get("storageClassName") is None
                            and BETA_STORAGE_CLASS_ANNOTATION not in annotations)
        self.request = _bytes(_dict(_dict(spec.get("resources")).get("requests")).get("storage"))
        self.access_modes = _modes(spec.get("accessModes"))
        self.volume_mode = spec.get("volumeMode") or FILESYSTEM
        self.selector = _selector(spec.get("selector"))
        self.volume_name = spec.get("volumeName") or ""
        self.bind_completed = BIND_COMPLETED in annotations
        self.phase = _dict(claim.get("status")).get("phase") or PENDING
        self.selected_node = annotations.get(SELECTED_NODE) or ""
        self.provisioner = annotations.get(STORAGE_PROVISIONER) or ""
        self.deleting = bool(meta.get("deletionTimestamp"))

    @property
    def fully_bound(self):
        """Upstream's C{isPVCFullyBound}: it names its volume and the binding is complete."""
        return bool(self.volume_name) and self.bind_completed

    def reference(self):
        """The claim as a volume's C{claimRef} (and an event's object) names it."""
        return {"kind": "PersistentVolumeClaim", "namespace": self.namespace,
                "name": self.name, "uid": self.uid, "apiVersion": "v1"}

    def __repr__(self):
        return f"<ClaimView {self.key} {self.phase}>"


class VolumeView:
    """One version of a PersistentVolume, as the binders read it."""

    __slots__ = ("name", "uid", "class_name", "capacity", "access_modes", "volume_mode",
                 "labels", "claim_ref", "phase", "node_terms", "reclaim_policy",
                 "provisioned_by", "bound_by_controller", "deleting", "host_path")

    def __init__(self, volume):
        meta = _dict(volume.get("metadata"))
        spec = _dict(volume.get("spec"))
        annotations = _dict(meta.get("annotations"))
        self.name = meta.get("name") or ""
        self.uid = meta.get("uid") or ""
        self.class_name = class_of(volume)
        self.capacity = _bytes(_dict(spec.get("capacity")).get("storage"))
        self.access_modes = _modes(spec.get("accessModes"))
        self.volume_mode = spec.get("volumeMode") or FILESYSTEM
        labels = meta.get("labels")
        self.labels = labels if isinstance(labels, dict) else {}
        ref = spec.get("claimRef")
        self.claim_ref = None
        if isinstance(ref, dict) and ref.get("name"):
            self.claim_ref = (ref.get("namespace") or "", ref["name"], ref.get("uid") or "")
        self.phase = _dict(volume.get("status")).get("phase") or PENDING
        terms = _dict(_dict(_dict(spec.get("nodeAffinity")).get("required"))).get(
            "nodeSelectorTerms")
        self.node_terms = tuple(terms) if isinstance(terms, list) else None
        self.reclaim_policy = spec.get("persistentVolumeReclaimPolicy") or "Retain"
        self.provisioned_by = annotations.get(PROVISIONED_BY) or ""
        self.bound_by_controller = BOUND_BY_CONTROLLER in annotations
        self.deleting = bool(meta.get("deletionTimestamp"))
        self.host_path = _dict(spec.get("hostPath")).get("path") or ""

    @property
    def claim_key(self):
        """C{namespace/name} of the claim it is bound to, or None."""
        return None if self.claim_ref is None else f"{self.claim_ref[0]}/{self.claim_ref[1]}"

    def bound_to(self, claim):
        """Upstream's C{IsVolumeBoundToClaim}: its claimRef names C{claim} (uid, if set, too)."""
        ref = self.claim_ref
        return (ref is not None and ref[0] == claim.namespace and ref[1] == claim.name
                and (not ref[2] or ref[2] == claim.uid))

    def __repr__(self):
        return f"<VolumeView {self.name} {self.phase}>"


class ClassView:
    """One version of a StorageClass, as the binders read it."""

    __slots__ = ("name", "provisioner", "binding_mode", "reclaim_policy", "mount_options",
                 "parameters", "is_default", "created")

    def __init__(self, storage_class):
        meta = _dict(storage_class.get("metadata"))
        self.name = meta.get("name") or ""
        annotations = _dict(meta.get("annotations"))
        self.is_default = any(annotations.get(key) == "true" for key in DEFAULT_CLASS_ANNOTATIONS)
        self.created = str(meta.get("creationTimestamp") or "")
        self.provisioner = storage_class.get("provisioner") or ""
        self.binding_mode = storage_class.get("volumeBindingMode") or IMMEDIATE
        self.reclaim_policy = storage_class.get("reclaimPolicy") or "Delete"
        options = storage_class.get("mountOptions")
        self.mount_options = list(options) if isinstance(options, list) else []
        self.parameters = _dict(storage_class.get("parameters"))

    @property
    def delays_binding(self):
        return self.binding_mode == WAIT_FOR_FIRST_CONSUMER

    @property
    def provisions(self):
        """Whether anything can make volumes of this class (not a class of hand-made ones)."""
        return bool(self.provisioner) and self.provisioner not in NO_PROVISIONER

    def __eq__(self, other):
        return isinstance(other, ClassView) and all(
            getattr(self, slot) == getattr(other, slot) for slot in self.__slots__)


def default_class(classes):
    """The default class among C{classes} (L{ClassView}s): the newest, then first by name."""
    best = None
    for view in classes:
        if view.is_default and (best is None or view.created > best.created or (
                view.created == best.created and view.name < best.name)):
            best = view
    return best


def satisfies(volume, claim):
    """
    Why C{volume} cannot serve C{claim} (upstream's C{checkVolumeSatisfyClaim}),
    or None when it can.
    """
    if volume.capacity < claim.request:
        return "requested PV is too small"
    if volume.class_name != claim.class_name:
        return "storageClassName does not match"
    if volume.volume_mode != claim.volume_mode:
        return "incompatible volumeMode"
    if not claim.access_modes <= volume.access_modes:
        return "incompatible accessMode"
    return None


def find_best_match(claim, volumes, reachable=None, delay_binding=False):
    """
    The volume C{claim} should bind to among C{volumes}, or None.

    @param reachable: C{reachable(volume)}: whether the node being tried
        can reach it (its node affinity), or None when no node is chosen.
    @param delay_binding: the claim waits for its first consumer and no
        node is chosen: only a volume pre-bound to it is taken.
    """
    best = None
    for volume in volumes:
        if volume.volume_mode != claim.volume_mode:
            continue
        if volume.bound_to(claim):
            if reachable is not None and not reachable(volume):
                return None
            return volume
        if delay_binding and reachable is None:
            continue
        if volume.claim_ref is not None or volume.phase != AVAILABLE or volume.deleting:
            continue
        if volume.class_name != claim.class_name or not claim.selector.matches(volume.labels):
            continue
        if not claim.access_modes <= volume.access_modes or volume.capacity < claim.request:
            continue
        if reachable is not None and not reachable(volume):
            continue
        if best is None or (volume.capacity, volume.name) < (best.capacity, best.name):
            best = volume
    return best
