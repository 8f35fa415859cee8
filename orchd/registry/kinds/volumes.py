# -*- test-case-name: tests.registry.test_volumes -*-
"""
PersistentVolumes and PersistentVolumeClaims: upstream's defaults and the
status a new one starts with.

A volume defaults to the C{Retain} reclaim policy and C{Filesystem} mode
and starts C{Pending} with the time of that phase (upstream's
C{PersistentVolumeLastPhaseTransitionTime}, on since 1.31); a claim
defaults to C{Filesystem} mode and starts C{Pending}. Their sizes are
resource lists: written in canonical form, refused as upstream's decoding
refuses text that is no quantity.
"""

from zope.interface import implementer

from orchd.api.meta import rfc3339
from orchd.registry.kinds.podspec import canonical_quantities
from orchd.registry.strategy import DefaultStrategy, IStrategy


def _spec(obj):
    spec = obj.get("spec")
    if spec is None:
        spec = obj["spec"] = {}
    return spec if isinstance(spec, dict) else None


@implementer(IStrategy)
class PersistentVolumeStrategy(DefaultStrategy):
    """
    @param catalog: the catalog serving the kind: its clock stamps the
        phase of a new volume.
    """

    def __init__(self, catalog=None):
        self.clock = getattr(catalog, "clock", None)

    def prepare_for_create(self, ctx, obj):
        self.prepare_for_update(ctx, obj, None)
        status = {"phase": "Pending"}
        if self.clock is not None:
            status["lastPhaseTransitionTime"] = rfc3339(self.clock.seconds())
        obj["status"] = status

    def prepare_for_update(self, ctx, obj, old):
        spec = _spec(obj)
        if spec is None:
            return
        if not spec.get("persistentVolumeReclaimPolicy"):
            spec["persistentVolumeReclaimPolicy"] = "Retain"
        if spec.get("volumeMode") is None:
            spec["volumeMode"] = "Filesystem"
        canonical_quantities(spec.get("capacity"), "PersistentVolume")


@implementer(IStrategy)
class PersistentVolumeClaimStrategy(DefaultStrategy):
    def prepare_for_create(self, ctx, obj):
        self.prepare_for_update(ctx, obj, None)
        obj["status"] = {"phase": "Pending"}

    def prepare_for_update(self, ctx, obj, old):
        spec = _spec(obj)
        if spec is None:
            return
        if spec.get("volumeMode") is None:
            spec["volumeMode"] = "Filesystem"
        resources = spec.get("resources")
        if isinstance(resources, dict):
            canonical_quantities(resources.get("requests"), "PersistentVolumeClaim")
            canonical_quantities(resources.get("limits"), "PersistentVolumeClaim")
