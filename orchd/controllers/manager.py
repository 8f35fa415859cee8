# -*- test-case-name: tests.controllers.test_manager -*-
"""Which controllers run, from C{--controllers}: C{*}, names and C{-name}."""

from orchd.controllers.clusterroleaggregation import ClusterRoleAggregation
from orchd.controllers.garbagecollector import GarbageCollector
from orchd.controllers.namespaces import NamespaceController

#: Controller name -> (factory(catalog, clock), on by default).
CONTROLLERS = {
    "namespace": (NamespaceController, True),
    "garbagecollector": (GarbageCollector, True),
    "clusterrole-aggregation": (ClusterRoleAggregation, True),
}


class UnknownControllerError(ValueError):
    """C{--controllers} names a controller that does not exist."""


def selected_controllers(names, known=CONTROLLERS):
    """
    The controller names C{names} selects, in table order.

    @raise UnknownControllerError: for a name that is not a controller.
    """
    for name in names:
        bare = name.lstrip("-")
        if bare != "*" and bare not in known:
            raise UnknownControllerError(
                f"--controllers: {bare!r} is not a known controller "
                f"(known: {', '.join(sorted(known))})")
    selected = []
    for name, (_, default) in known.items():
        if f"-{name}" in names:
            continue
        if name in names or ("*" in names and default):
            selected.append(name)
    return selected


def build_controllers(names, catalog, clock, known=CONTROLLERS):
    """One service per selected controller."""
    return [known[name][0](catalog, clock) for name in selected_controllers(names, known)]
