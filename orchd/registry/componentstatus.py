# -*- test-case-name: tests.registry.test_componentstatus -*-
"""
ComponentStatus (C{/api/v1/componentstatuses}): the control plane's parts
and whether each is healthy, read-only and stored nowhere.

Upstream's API server probes the C{/healthz} of the scheduler and the
controller manager and the health of each etcd member
(C{pkg/registry/core/componentstatus/rest.go}); here the parts run in this
process, so each is asked directly: a L{Component} is a name and an async
probe. An answer carries upstream's deprecation warning, which kubectl
prints. Label and field selectors (C{metadata.name}) filter a list.
"""

from twisted.internet.defer import Deferred, gatherResults

from orchd.api.errors import StatusError

#: [COMPAT] the warning upstream's server gives for this kind, word for word.
DEPRECATION = "v1 ComponentStatus is deprecated in v1.19+"
HEALTHY = "Healthy"


class Component:
    """
    One part of the control plane.

    @param name: its name in the API (C{scheduler}, C{controller-manager}, C{etcd-0}).
    @param probe: C{async probe() -> (healthy, message, error)}: whether it
        is healthy, what it says when it is, and why not when it is not.
    """

    def __init__(self, name, probe):
        self.name = name
        self.probe = probe


def component_status_provider(components, clock):
    """The Catalog's C{virtual} entry serving C{components} (a list of L{Component})."""
    return {("", "componentstatuses"): lambda info: ComponentStatuses(info, components, clock)}


class ComponentStatuses:
    """The provider of C{componentstatuses}: get and list, probing on each read."""

    def __init__(self, info, components, clock):
        self.info = info
        self.clock = clock
        self._components = {component.name: component for component in components}

    def selectable_fields(self):
        return ("metadata.name",)

    async def get(self, ctx, name):
        ctx.warn(DEPRECATION)
        component = self._components.get(name)
        if component is None:
            raise StatusError.not_found(self.info.resource, self.info.group, name)
        return await self._status(component)

    async def list(self, ctx, options):
        ctx.warn(DEPRECATION)
        items = await gatherResults(
            [self._status_deferred(c) for c in self._components.values()], consumeErrors=True)
        labels, fields = options.label_selector, options.field_selector
        if labels is not None and not labels.empty:
            items = [item for item in items if labels.matches({})]
        if fields is not None and not fields.empty:
            items = [item for item in items
                     if fields.matches({"metadata.name": item["metadata"]["name"]})]
        return {"kind": "ComponentStatusList", "apiVersion": "v1", "metadata": {},
                "items": sorted(items, key=lambda item: item["metadata"]["name"])}

    def _status_deferred(self, component):
        return Deferred.fromCoroutine(self._status(component))

    async def _status(self, component):
        try:
            healthy, message, error = await component.probe()
        except Exception as e:
            healthy, message, error = False, "", str(e) or e.__class__.__name__
        condition = {"type": HEALTHY, "status": "True" if healthy else "False"}
        if message:
            condition["message"] = message
        if error:
            condition["error"] = error
        return {"kind": "ComponentStatus", "apiVersion": "v1",
                "metadata": {"name": component.name, "creationTimestamp": None},
                "conditions": [condition]}
