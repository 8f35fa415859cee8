# -*- test-case-name: tests.admission.test_defaultclasses -*-
"""
DefaultStorageClass admission: a new PersistentVolumeClaim that names no
class gets the cluster's default StorageClass.

A StorageClass is the default when C{storageclass.orch.io/is-default-class}
(or its beta spelling) is exactly C{"true"}. On create (upstream
C{plugin/pkg/admission/storage/storageclass/setdefault}) a claim whose
C{spec.storageClassName} is unset and that lacks the beta annotation
C{volume.beta.orch.io/storage-class} gets the default's name; an explicit
C{""} asks for no class and is kept. With several defaults the create is
refused (403), as upstream did before it started choosing the newest.
"""

from zope.interface import implementer

from orchd.admission.defaultingressclass import (
    annotations_of, creates, default_classes, refuse_several,
)
from orchd.admission.interfaces import IAdmissionPlugin
from orchd.api.kinds import CORE, STORAGE
from orchd.api.printers.storage import BETA_STORAGE_CLASS_ANNOTATION, DEFAULT_CLASS_ANNOTATIONS


def claim_has_class(claim):
    """Upstream's C{PersistentVolumeClaimHasClass}: the beta annotation or the field is set."""
    spec = claim.get("spec")
    return (BETA_STORAGE_CLASS_ANNOTATION in annotations_of(claim)
            or (isinstance(spec, dict) and spec.get("storageClassName") is not None))


@implementer(IAdmissionPlugin)
class DefaultStorageClass:
    """
    @param store: where classes are listed from: the watch caches
        (L{orchd.storage.cachedreads.CachedReads}), or an IStore.
    """

    def __init__(self, store):
        self._store = store

    async def admit(self, attributes):
        if not creates(attributes, CORE, "persistentvolumeclaims"):
            return
        claim = attributes.obj
        spec = claim.get("spec")
        if (spec is not None and not isinstance(spec, dict)) or claim_has_class(claim):
            return
        names = await default_classes(self._store, STORAGE, "storageclasses",
                                      DEFAULT_CLASS_ANNOTATIONS)
        if len(names) > 1:
            refuse_several(attributes, len(names), "default StorageClasses were found")
        if names:
            claim.setdefault("spec", {})["storageClassName"] = names[0]

    def validate(self, attributes):
        pass
