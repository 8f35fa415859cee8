# -*- test-case-name: tests.admission.test_chain -*-
"""Runs admission plugins in their configured order."""

import inspect


class AdmissionChain:
    """All mutating steps, in order, then (separately) all validating steps."""

    def __init__(self, plugins=()):
        self._plugins = tuple(plugins)

    async def admit(self, attributes):
        for plugin in self._plugins:
            result = plugin.admit(attributes)
            if inspect.isawaitable(result):
                await result

    async def validate(self, attributes):
        for plugin in self._plugins:
            result = plugin.validate(attributes)
            if inspect.isawaitable(result):
                await result
