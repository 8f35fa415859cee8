# -*- test-case-name: tests.app.test_storageclass -*-
"""
The default StorageClass, written at start when the cluster has none, so
that a claim made without a class (a StatefulSet's, a chart's) binds.

Its provisioner is the persistent-volume binder's built-in one
(L{orchd.controllers.persistentvolume.PROVISIONER}). It waits for the
first consumer (C{WaitForFirstConsumer}), as local-volume provisioners do:
a volume on a node's disk must be made where the pod runs, so the
scheduler picks the node with every other constraint of the pod, and the
volume follows it; with C{Immediate} a volume made first on some node
would tie the pod to that node even where it does not fit. Volumes are
deleted with their claim (C{reclaimPolicy: Delete}).

The class is marked default with our spelling of the annotation and with
upstream's [COMPAT], which charts and tools look for. A class already
marked default (either spelling) is left alone, and so is an existing
C{standard} class that is not: the administrator's choice stands. A
deleted default comes back at the next start only if no other is default.
"""

from twisted.logger import Logger

from orchd.admission.defaultstorageclass import default_class
from orchd.api.errors import StatusError
from orchd.api.kinds import STORAGE
from orchd.controllers.persistentvolume import PROVISIONER

log = Logger()

NAME = "standard"
ANNOTATIONS = {"storageclass.orch.io/is-default-class": "true",
               "storageclass.kubernetes.io/is-default-class": "true"}


def default_storage_class():
    """The StorageClass written when there is no default."""
    return {"apiVersion": f"{STORAGE}/v1", "kind": "StorageClass",
            "metadata": {"name": NAME, "annotations": dict(ANNOTATIONS)},
            "provisioner": PROVISIONER, "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": False}


async def ensure_default_storage_class(catalog):
    """
    Create the default StorageClass unless one is marked default already.

    @return: True when it was created.
    """
    classes = catalog.resource(STORAGE, "storageclasses")
    if classes is None:
        return False                # the storage group is switched off
    existing = await default_class(catalog.reads)
    if existing is not None:
        return False
    try:
        await classes.create(catalog.system_context(), default_storage_class())
    except StatusError as e:
        if e.code != 409:
            raise
        log.info("StorageClass {name} exists and is not the default; leaving it", name=NAME)
        return False
    log.info("Created the default StorageClass {name}", name=NAME)
    return True
