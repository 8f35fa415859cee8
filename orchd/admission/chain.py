# -*- test-case-name: tests.admission.test_chain -*-
"""Runs admission plugins in their configured order."""

import inspect


class AdmissionChain:
    """
    All mutating steps, in order, then (separately) all validating steps.

    Most plugins have nothing to do for most writes: a write of a resource
    calls only the plugins that act on it, in the phase they act in (their
    C{resources}, C{mutates} and C{validates}, see
    L{orchd.admission.interfaces.IAdmissionPlugin}), chosen once per
    resource; and of what those return, only an awaitable is awaited.
    """

    def __init__(self, plugins=()):
        self._plugins = tuple(plugins)
        #: C{(group, resource) -> (mutating plugins, validating plugins)}:
        #: as many as the resources served.
        self._phases = {}

    def plugins_for(self, group, resource):
        """The plugins that act on C{resource}: C{(mutating ones, validating ones)}, in order."""
        phases = self._phases.get((group, resource))
        if phases is None:
            concerned = [plugin for plugin in self._plugins
                         if _acts_on(plugin, group, resource)]
            phases = self._phases[group, resource] = (
                tuple(p for p in concerned if getattr(p, "mutates", True)),
                tuple(p for p in concerned if getattr(p, "validates", True)))
        return phases

    async def admit(self, attributes):
        info = attributes.info
        for plugin in self.plugins_for(info.group, info.resource)[0]:
            result = plugin.admit(attributes)
            if result is not None and inspect.isawaitable(result):
                await result

    async def validate(self, attributes):
        info = attributes.info
        for plugin in self.plugins_for(info.group, info.resource)[1]:
            result = plugin.validate(attributes)
            if result is not None and inspect.isawaitable(result):
                await result


def _acts_on(plugin, group, resource):
    resources = getattr(plugin, "resources", None)
    return resources is None or (group, resource) in resources
