# -*- test-case-name: tests.auth.test_rbac -*-
"""
The RBAC mode: allowed when a role bound to the user has a matching rule.

There are no deny rules: RBAC allows or has no opinion. Bindings whose
role is missing, or whose subjects are malformed, are reported in the
reason of a request they could not allow, as upstream does.

Clients repeat the same few requests, so answers are remembered until the
policy next changes: a repeated request costs one dictionary lookup instead
of a walk over every rule of every role bound to the user.
"""

from zope.interface import implementer

from orchd.auth.interfaces import Decision, IAuthorizer
from orchd.auth.rbac.index import missing_role


@implementer(IAuthorizer)
class RBACAuthorizer:
    """
    @param index: the L{orchd.auth.rbac.index.PolicyIndex} to decide from.
    @param remembered: how many answers to keep (0: none).
    """

    def __init__(self, index, remembered=8192):
        self.index = index
        self._remembered = remembered
        self._answers = {}
        self._generation = index.generation

    def authorize(self, attributes):
        user = attributes.user
        if attributes.is_resource_request:
            key = (user.name, user.groups, attributes.verb, attributes.api_group,
                   attributes.resource, attributes.subresource, attributes.namespace,
                   attributes.name)
        else:
            key = (user.name, user.groups, attributes.verb, attributes.path)
        if self._generation != self.index.generation:
            self._generation = self.index.generation
            self._answers = {}
        answer = self._answers.get(key)
        if answer is None:
            answer = self._decide(attributes)
            if len(self._answers) >= self._remembered:
                self._answers = {}
            if self._remembered:
                self._answers[key] = answer
        return answer

    def _decide(self, attributes):
        index = self.index
        namespace = attributes.namespace if attributes.is_resource_request else ""
        errors = []
        for grant in index.grants_for(attributes.user, namespace):
            role = index.role_of(grant)
            if role is None:
                errors.append(missing_role(grant))
                continue
            for rule in role.compiled:
                if rule.allows(attributes):
                    return Decision.ALLOW, grant.reason
        if errors:
            return Decision.NO_OPINION, "RBAC: " + _aggregate(errors)
        return Decision.NO_OPINION, ""

    def rules_for(self, user, namespace):
        rules, errors = self.index.rules_for(user, namespace)
        resource_rules, non_resource_rules = [], []
        for rule in rules:
            if rule.get("nonResourceURLs"):
                non_resource_rules.append({"verbs": list(rule.get("verbs") or []),
                                           "nonResourceURLs": list(rule["nonResourceURLs"])})
            else:
                shaped = {"verbs": list(rule.get("verbs") or [])}
                for field in ("apiGroups", "resources", "resourceNames"):
                    if rule.get(field):
                        shaped[field] = list(rule[field])
                resource_rules.append(shaped)
        # Rules that could not be resolved make the answer incomplete.
        return resource_rules, non_resource_rules, bool(errors)


def _aggregate(errors):
    """Upstream's aggregate error text: one error as is, several in brackets."""
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
