# -*- test-case-name: tests.admission.test_defaultclasses -*-
"""
DefaultStorageClass admission: a new PersistentVolumeClaim that names no
class gets the cluster's default StorageClass.

A StorageClass is the default when C{storageclass.orch.io/is-default-class}
(or its beta spelling, or the upstream spellings
C{storageclass.kubernetes.io/is-default-class} that public manifests
carry [COMPAT]) is exactly C{"true"}. On create (upstream
C{plugin/pkg/admission/storage/storageclass/setdefault}) a claim whose
C{spec.storageClassName} is unset and that lacks the beta annotation
C{volume.beta.orch.io/storage-class} gets the default's name; an explicit
C{""} asks for no class and is kept. With several defaults the newest
wins, the first by name among equally new ones (upstream's
C{GetDefaultClass} since 1.26): installing a provisioner that marks its
class default must not break every claim made without a class.
"""

import orjson
from zope.interface import implementer

from orchd.admission.defaultingressclass import annotations_of, creates
from orchd.admission.interfaces import IAdmissionPlugin
from orchd.api.kinds import CORE, STORAGE, key_prefix_of
from orchd.api.printers.storage import BETA_STORAGE_CLASS_ANNOTATION, DEFAULT_CLASS_ANNOTATIONS


def claim_has_class(claim):
    """Upstream's C{PersistentVolumeClaimHasClass}: the beta annotation or the field is set."""
    spec = claim.get("spec")
    return (BETA_STORAGE_CLASS_ANNOTATION in annotations_of(claim)
            or (isinstance(spec, dict) and spec.get("storageClassName") is not None))


async def default_class(store):
    """
    The name of the default StorageClass (the newest of several), or None.

    @param store: an IStore, or the watch caches.
    """
    listed = await store.list(key_prefix_of(STORAGE, "storageclasses"))
    defaults = []
    for kv in listed.items:
        meta = orjson.loads(kv.value).get("metadata") or {}
        marks = meta.get("annotations")
        if isinstance(marks, dict) and any(
                marks.get(key) == "true" for key in DEFAULT_CLASS_ANNOTATIONS):
            defaults.append((str(meta.get("creationTimestamp") or ""), meta.get("name") or ""))
    if not defaults:
        return None
    # RFC 3339 UTC stamps of one shape order as text: newest first, then by name.
    defaults.sort(key=lambda d: d[1])
    defaults.sort(key=lambda d: d[0], reverse=True)
    return defaults[0][1]


@implementer(IAdmissionPlugin)
class DefaultStorageClass:
    """
    @param store: where classes are listed from: the watch caches
        (L{orchd.storage.cachedreads.CachedReads}), or an IStore.
    """

    resources = frozenset({(CORE, "persistentvolumeclaims")})
    validates = False

    def __init__(self, store):
        self._store = store

    def admit(self, attributes):
        if not creates(attributes, CORE, "persistentvolumeclaims"):
            return None
        return self._admit_claim(attributes)

    async def _admit_claim(self, attributes):
        claim = attributes.obj
        spec = claim.get("spec")
        if (spec is not None and not isinstance(spec, dict)) or claim_has_class(claim):
            return
        name = await default_class(self._store)
        if name is not None:
            claim.setdefault("spec", {})["storageClassName"] = name

    def validate(self, attributes):
        pass
