# -*- test-case-name: tests.admission.test_storageprotection -*-
"""
StorageObjectInUseProtection admission: a new PersistentVolumeClaim gets
the finalizer C{kubernetes.io/pvc-protection} and a new PersistentVolume
C{kubernetes.io/pv-protection} (upstream's
C{plugin/pkg/admission/storage/storageobjectinuseprotection}; the
finalizers keep their upstream spelling [COMPAT]: tools that clear stuck
claims remove them by name).

Deleting such an object only marks it: the volume-protection controllers
remove the finalizer once no live pod uses the claim, or once the volume
is no longer bound, so data in use is never pulled from under a pod.
"""

from zope.interface import implementer

from orchd.admission.interfaces import CREATE, IAdmissionPlugin

PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"
_FINALIZERS = {"persistentvolumeclaims": PVC_PROTECTION, "persistentvolumes": PV_PROTECTION}


@implementer(IAdmissionPlugin)
class StorageObjectInUseProtection:
    resources = frozenset(("", resource) for resource in _FINALIZERS)
    validates = False

    def admit(self, attributes):
        info, obj = attributes.info, attributes.obj
        if (info.group != "" or attributes.operation != CREATE or attributes.subresource
                or not isinstance(obj, dict)):
            return
        finalizer = _FINALIZERS.get(info.resource)
        meta = obj.get("metadata")
        if finalizer is None or not isinstance(meta, dict):
            return
        finalizers = meta.get("finalizers")
        if finalizers is None:
            meta["finalizers"] = [finalizer]
        elif isinstance(finalizers, list) and finalizer not in finalizers:
            finalizers.append(finalizer)

    def validate(self, attributes):
        pass
