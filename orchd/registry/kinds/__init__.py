"""
The strategies of kinds that have rules of their own.

Every other kind gets L{orchd.registry.strategy.DefaultStrategy}.
"""

from orchd.registry.kinds.configdata import ConfigMapStrategy, SecretStrategy
from orchd.registry.kinds.controllerrevision import ControllerRevisionStrategy
from orchd.registry.kinds.event import EventStrategy, EventsV1EventStrategy
from orchd.registry.kinds.namespace import NamespaceStrategy
from orchd.registry.strategy import DefaultStrategy

_STRATEGIES = {
    ("", "Namespace"): NamespaceStrategy,
    ("", "ConfigMap"): ConfigMapStrategy,
    ("", "Secret"): SecretStrategy,
    ("apps", "ControllerRevision"): ControllerRevisionStrategy,
    ("", "Event"): EventStrategy, ("events.orch.io", "Event"): EventsV1EventStrategy,
}


def strategy_for(info):
    """A fresh strategy for the kind of C{info}."""
    return _STRATEGIES.get((info.group, info.kind), DefaultStrategy)()
