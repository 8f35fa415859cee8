# -*- test-case-name: tests.auth.test_authz -*-
"""The two fixed modes, and the rule that C{system:masters} may do anything."""

from zope.interface import implementer

from orchd.auth.interfaces import Decision, IAuthorizer
from orchd.auth.user import MASTERS

_EVERYTHING = (
    [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
    [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
    False,
)


@implementer(IAuthorizer)
class AlwaysAllow:
    """Allows every request (the mode for trusted, single-user setups)."""

    def authorize(self, attributes):
        return Decision.ALLOW, ""

    def rules_for(self, user, namespace):
        return _EVERYTHING


@implementer(IAuthorizer)
class AlwaysDeny:
    """Denies every request (for testing)."""

    def authorize(self, attributes):
        return Decision.DENY, "Everything is forbidden."

    def rules_for(self, user, namespace):
        return [], [], False


@implementer(IAuthorizer)
class PrivilegedGroups:
    """
    Allows members of privileged groups (C{system:masters}) everything.

    It stands first in every chain, so an administrator cannot be locked
    out by policy.
    """

    def __init__(self, groups=(MASTERS,)):
        self._groups = frozenset(groups)

    def authorize(self, attributes):
        if self._groups.intersection(attributes.user.groups):
            return Decision.ALLOW, ""
        return Decision.NO_OPINION, ""

    def rules_for(self, user, namespace):
        if self._groups.intersection(user.groups):
            return _EVERYTHING
        return [], [], False
