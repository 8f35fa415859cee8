# -*- test-case-name: tests.auth.test_authz -*-
"""The authorizer chain built from C{--authorization-mode}."""

from orchd.auth.authz.always import AlwaysAllow, AlwaysDeny, PrivilegedGroups
from orchd.auth.authz.public import AnonymousPublicInfo
from orchd.auth.authz.union import UnionAuthorizer

_MODES = {
    "AlwaysAllow": AlwaysAllow,
    "AlwaysDeny": AlwaysDeny,
}


class UnavailableModeError(ValueError):
    """A valid mode that this build does not provide."""


def build_authorizer(modes):
    """
    The union for C{modes}, in their order, behind the fixed first steps:
    C{system:masters} may do anything, anonymous users only public reads.

    @raise UnavailableModeError: for a mode not provided here.
    """
    chain = [PrivilegedGroups(), AnonymousPublicInfo()]
    for mode in modes:
        factory = _MODES.get(mode)
        if factory is None:
            raise UnavailableModeError(
                f"--authorization-mode: {mode} is not available in this version "
                f"(available: {', '.join(_MODES)})")
        chain.append(factory())
    return UnionAuthorizer(chain)
