# -*- test-case-name: tests.auth.test_authz -*-
"""
Authorization modes in order: the first to allow or deny decides.

When no module has an opinion the request is denied by the caller (403).
"""

from zope.interface import implementer

from orchd.auth.interfaces import AuthorizerError, Decision, IAuthorizer


@implementer(IAuthorizer)
class UnionAuthorizer:
    def __init__(self, authorizers):
        self._authorizers = tuple(authorizers)

    async def authorize(self, attributes):
        """
        @raise AuthorizerError: no module decided and some could not: the
            errors, joined.
        """
        reasons, errors = [], []
        for authorizer in self._authorizers:
            # Inline rather than through ask(): this runs for every request.
            try:
                result = authorizer.authorize(attributes)
                if not isinstance(result, tuple):
                    result = await result
            except AuthorizerError as e:
                errors.append(str(e))
                continue
            decision, reason = result
            if decision is not Decision.NO_OPINION:
                return decision, reason
            if reason:
                reasons.append(reason)
        if errors:
            raise AuthorizerError("; ".join(errors))
        return Decision.NO_OPINION, "; ".join(reasons)

    def rules_for(self, user, namespace):
        resource_rules, non_resource_rules, incomplete = [], [], False
        for authorizer in self._authorizers:
            more_resource, more_non_resource, more_incomplete = authorizer.rules_for(user,
                                                                                    namespace)
            resource_rules.extend(more_resource)
            non_resource_rules.extend(more_non_resource)
            incomplete = incomplete or more_incomplete
        return resource_rules, non_resource_rules, incomplete
