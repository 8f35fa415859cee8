# -*- test-case-name: tests.registry.test_workloads -*-
"""
Kinds whose status has fields upstream always writes.

Upstream's typed objects write a status field that has no C{omitempty}
even at its zero value (C{replicas: 0}, C{loadBalancer: {}}), and the
official client's models require some of them. Here a new object's
status is those fields at zero, and every status write keeps them present.
"""

from zope.interface import implementer

from orchd.registry.strategy import DefaultStrategy, IStrategy


@implementer(IStrategy)
class StatusFieldsStrategy(DefaultStrategy):
    """
    @cvar zero_status: the status fields upstream always writes, at zero.
    """

    zero_status = {}

    def prepare_for_create(self, ctx, obj):
        obj["status"] = dict(self.zero_status)

    def subresource_update(self, subresource, obj, old):
        old = super().subresource_update(subresource, obj, old)
        status = old.get("status")
        if isinstance(status, dict):
            for field, zero in self.zero_status.items():
                status.setdefault(field, zero)
        elif status is None:
            old["status"] = dict(self.zero_status)
        return old


@implementer(IStrategy)
class IngressStrategy(StatusFieldsStrategy):
    zero_status = {"loadBalancer": {}}


@implementer(IStrategy)
class VolumeAttachmentStrategy(StatusFieldsStrategy):
    zero_status = {"attached": False}
