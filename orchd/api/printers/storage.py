# -*- test-case-name: tests.api.test_tables -*-
"""
Printers of storage: C{storage.orch.io}, and the core group's persistent
volumes and claims, after upstream's C{printers.go}.
"""

from orchd.api.printers.base import (
    BOOLEAN, INTEGER, NAME_DESCRIPTION, STRING, Column, Printer, age_column, as_dict, as_list,
    field, name_column,
)

#: [renamed] Annotations that make a storage class the default (stable and beta
#: spellings), and [COMPAT] upstream's, which public manifests and
#: provisioners' charts set.
DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.orch.io/is-default-class",
    "storageclass.beta.orch.io/is-default-class",
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)


def _class_name(row):
    name = row.meta.get("name", "")
    annotations = as_dict(row.meta.get("annotations"))
    if any(annotations.get(key) == "true" for key in DEFAULT_CLASS_ANNOTATIONS):
        name += " (default)"
    return name


STORAGE_CLASS = Printer(
    Column("Name", STRING, NAME_DESCRIPTION, _class_name, format="name"),
    Column("Provisioner", STRING, "The driver that provisions volumes of this class.",
           field("provisioner")),
    Column("ReclaimPolicy", STRING, "What happens to volumes of this class when released.",
           field("reclaimPolicy", default="Delete")),
    Column("VolumeBindingMode", STRING, "When volumes are bound and provisioned.",
           field("volumeBindingMode", default="Immediate")),
    # A string column with a boolean cell, as upstream declares it.
    Column("AllowVolumeExpansion", STRING, "Whether volumes of this class may grow.",
           field("allowVolumeExpansion", default=False)),
    age_column(),
)


def _token_requests(row):
    requests = row.get("spec", "tokenRequests")
    if requests is None:
        return "<unset>"
    return ",".join(str(as_dict(r).get("audience", "")) for r in as_list(requests))


CSI_DRIVER = Printer(
    name_column(),
    Column("AttachRequired", BOOLEAN, "Whether volumes need an attach operation.",
           field("spec", "attachRequired", default=True)),
    Column("PodInfoOnMount", BOOLEAN, "Whether pod information is passed on mount.",
           field("spec", "podInfoOnMount", default=False)),
    Column("StorageCapacity", BOOLEAN, "Whether the driver reports storage capacity.",
           field("spec", "storageCapacity", default=False)),
    Column("TokenRequests", STRING, "Audiences of the service account tokens passed on mount.",
           _token_requests),
    Column("RequiresRepublish", BOOLEAN, "Whether volumes are mounted again periodically.",
           field("spec", "requiresRepublish", default=False)),
    Column("Modes", STRING, "The volume lifecycle modes the driver supports.",
           lambda row: ",".join(as_list(row.get("spec", "volumeLifecycleModes"))) or "<none>"),
    age_column(),
)

CSI_NODE = Printer(
    name_column(),
    Column("Drivers", INTEGER, "Drivers indicates the number of CSI drivers registered on the node",
           lambda row: len(as_list(row.get("spec", "drivers")))),
    age_column(),
)

CSI_STORAGE_CAPACITY = Printer(
    name_column(),
    Column("StorageClassName", STRING, "The storage class the capacity applies to.",
           field("storageClassName")),
    Column("Capacity", STRING, "The capacity available for new volumes.",
           field("capacity", default="<unset>")),
)

VOLUME_ATTACHMENT = Printer(
    name_column(),
    # Upstream marks this column "name" too; kept so clients see the same table.
    Column("Attacher", STRING, "The volume driver that attaches the volume.",
           field("spec", "attacher"), format="name"),
    Column("PV", STRING, "The persistent volume being attached.",
           field("spec", "source", "persistentVolumeName")),
    Column("Node", STRING, "The node the volume is attached to.", field("spec", "nodeName")),
    Column("Attached", BOOLEAN, "Whether the attach operation succeeded.",
           field("status", "attached", default=False)),
    age_column(),
)

# -- volumes and claims (core) ---------------------------------------------------

#: [renamed] The beta annotation that names a storage class before the field existed.
BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.orch.io/storage-class"
_ACCESS_MODES = (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"),
                 ("ReadWriteOncePod", "RWOP"))


def access_modes(modes):
    """Upstream's C{GetAccessModesAsString}: C{RWO,ROX,RWX,RWOP} in that order, no repeats."""
    modes = set(as_list(modes))
    return ",".join(short for mode, short in _ACCESS_MODES if mode in modes)


def _storage_class(row):
    annotations = as_dict(row.meta.get("annotations"))
    if BETA_STORAGE_CLASS_ANNOTATION in annotations:
        return annotations[BETA_STORAGE_CLASS_ANNOTATION]
    return row.get("spec", "storageClassName", default="")


def _volume_phase(default):
    def cell(row):
        if row.meta.get("deletionTimestamp"):
            return "Terminating"
        return row.get("status", "phase", default=default)
    return cell


def _claim_ref(row):
    ref = row.get("spec", "claimRef")
    if not isinstance(ref, dict):
        return ""
    return f"{ref.get('namespace', '')}/{ref.get('name', '')}"


def _bound(cell):
    """A PVC cell that is only filled once the claim is bound to a volume."""
    return lambda row: cell(row) if row.get("spec", "volumeName") else ""


_VOLUME_ATTRIBUTES_CLASS = field("spec", "volumeAttributesClassName", default="<unset>")
_VOLUME_MODE = field("spec", "volumeMode", default="Filesystem")

PERSISTENT_VOLUME = Printer(
    name_column(),
    Column("Capacity", STRING, "The storage capacity of the volume.",
           field("spec", "capacity", "storage", default="0")),
    Column("Access Modes", STRING, "The ways the volume can be mounted.",
           lambda row: access_modes(row.get("spec", "accessModes"))),
    Column("Reclaim Policy", STRING, "What happens to the volume when released from its claim.",
           field("spec", "persistentVolumeReclaimPolicy", default="Retain")),
    Column("Status", STRING, "The phase of the volume.", _volume_phase("Pending")),
    Column("Claim", STRING, "The claim bound to the volume.", _claim_ref),
    Column("StorageClass", STRING, "StorageClass of the pv", _storage_class),
    Column("VolumeAttributesClass", STRING, "VolumeAttributesClass of the pv",
           _VOLUME_ATTRIBUTES_CLASS),
    Column("Reason", STRING, "Why the volume is in its phase.", field("status", "reason")),
    age_column(),
    Column("VolumeMode", STRING, "Whether the volume is a filesystem or a raw block device.",
           _VOLUME_MODE, priority=1),
)

PERSISTENT_VOLUME_CLAIM = Printer(
    name_column(),
    Column("Status", STRING, "The phase of the claim.", _volume_phase("Pending")),
    Column("Volume", STRING, "The volume bound to the claim.", field("spec", "volumeName")),
    Column("Capacity", STRING, "The actual capacity of the bound volume.",
           _bound(field("status", "capacity", "storage", default="0"))),
    Column("Access Modes", STRING, "The access modes of the bound volume.",
           _bound(lambda row: access_modes(row.get("status", "accessModes")))),
    Column("StorageClass", STRING, "StorageClass of the pvc", _storage_class),
    Column("VolumeAttributesClass", STRING, "VolumeAttributesClass of the pvc",
           _VOLUME_ATTRIBUTES_CLASS),
    age_column(),
    Column("VolumeMode", STRING, "Whether the claim wants a filesystem or a raw block device.",
           _VOLUME_MODE, priority=1),
)
