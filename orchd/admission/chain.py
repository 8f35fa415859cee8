# -*- test-case-name: tests.admission.test_chain -*-
"""Runs admission plugins in their configured order."""

import inspect


class AdmissionChain:
    """
    All mutating steps, in order, then (separately) all validating steps.

    Most plugins have nothing to do for most writes and return None at once
    (see L{orchd.admission.interfaces.IAdmissionPlugin}): only what they
    return otherwise is awaited.
    """

    def __init__(self, plugins=()):
        self._plugins = tuple(plugins)

    async def admit(self, attributes):
        for plugin in self._plugins:
            result = plugin.admit(attributes)
            if result is not None and inspect.isawaitable(result):
                await result

    async def validate(self, attributes):
        for plugin in self._plugins:
            result = plugin.validate(attributes)
            if result is not None and inspect.isawaitable(result):
                await result
