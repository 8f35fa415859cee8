# -*- test-case-name: tests.controllers.test_clusterroleaggregation -*-
"""
ClusterRole aggregation: a role with an aggregationRule holds the rules of
every ClusterRole its selectors match.

Any change to any ClusterRole may change what an aggregated role should
hold (a new label, new rules, a deletion), so every change queues every
aggregated role; each is recomputed from the informer's cache and written
only when its rules differ. A direct edit of an aggregated role's rules is
undone the same way.
"""

import copy

from orchd.api.errors import StatusError
from orchd.api.kinds import RBAC
from orchd.api.selectors import selector_from_label_selector_object
from orchd.controllers.base import QueuedController
from orchd.registry.context import RequestContext

MANAGER = "clusterrole-aggregation-controller"


def aggregated_rules(name, selectors, roles):
    """
    The rules role C{name} should hold: those of every other role matching
    one of C{selectors} (in name order), each rule once.

    @param roles: C{{name: ClusterRole dict}}.
    """
    matchers = []
    for selector in selectors:
        try:
            matchers.append(selector_from_label_selector_object(selector))
        except StatusError:
            continue     # validation refuses these; a stored bad one selects nothing
    rules = []
    for other in sorted(roles):
        if other == name:
            continue
        labels = (roles[other].get("metadata") or {}).get("labels") or {}
        if not any(m.matches(labels) for m in matchers):
            continue
        for rule in roles[other].get("rules") or []:
            if rule not in rules:
                rules.append(rule)
    return rules


class ClusterRoleAggregation(QueuedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    """

    name = "clusterrole-aggregation"

    def __init__(self, catalog, clock):
        super().__init__(catalog, clock)
        self._roles = catalog.resource(RBAC, "clusterroles")
        self._informer = self.follow(RBAC, "clusterroles", self._changed)

    def _roles_by_name(self):
        return {obj["metadata"]["name"]: obj for obj in self._informer.objects()}

    def _changed(self, type, obj, old):
        for name, role in self._roles_by_name().items():
            if role.get("aggregationRule"):
                self._queue.add(name)

    async def _sync(self, name):
        roles = self._roles_by_name()
        role = roles.get(name)
        rule = (role or {}).get("aggregationRule")
        if not isinstance(rule, dict):
            return
        selectors = rule.get("clusterRoleSelectors")
        wanted = aggregated_rules(name, selectors if isinstance(selectors, list) else [], roles)
        if (role.get("rules") or []) == wanted:
            return
        ctx = RequestContext(self._catalog.system_context().user, field_manager=MANAGER)
        updated = copy.deepcopy(role)     # the informer's copy stays as it was
        updated["rules"] = wanted
        try:
            await self._roles.update(ctx, name, updated)
        except StatusError as e:
            if e.code == 404:
                return
            raise      # a conflict: the queue retries with the newer role
        self.log.info("Aggregated {count} rules into ClusterRole {name}",
                      count=len(wanted), name=name)
