# -*- test-case-name: tests.auth.test_authz -*-
"""
The authorizer chain built from C{--authorization-mode}, and what keeps it current.

C{system:masters} comes first in every chain, so an administrator cannot be
locked out by policy; then the modes in the order given. The RBAC policy
index is kept even when RBAC does not decide: escalation checks on writes
of RBAC objects read the rules a user holds from it.
"""

from twisted.application.service import Service
from twisted.internet.defer import Deferred, gatherResults
from twisted.logger import Logger

from orchd.auth.authz.abac import ABACAuthorizer
from orchd.auth.authz.always import AlwaysAllow, AlwaysDeny, PrivilegedGroups
from orchd.auth.authz.node import NodeAuthorizer
from orchd.auth.authz.rbac import RBACAuthorizer
from orchd.auth.authz.union import UnionAuthorizer
from orchd.auth.authz.webhook import WebhookAuthorizer
from orchd.auth.rbac.index import PolicyIndex


def build_modes(config, store, reactor, policy):
    """
    The authorizers of C{config.authorization_mode}, in order.

    @raise ValueError: a mode's file cannot be used (one line, naming it).
    """
    authorizers = []
    for mode in config.authorization_mode:
        if mode == "RBAC":
            authorizers.append(RBACAuthorizer(policy))
        elif mode == "Node":
            authorizers.append(NodeAuthorizer(store))
        elif mode == "ABAC":
            authorizers.append(ABACAuthorizer.from_file(config.authorization_policy_file))
        elif mode == "Webhook":
            authorizers.append(WebhookAuthorizer.from_config_file(
                config.authorization_webhook_config_file, reactor,
                config.authorization_webhook_version,
                config.authorization_webhook_cache_authorized_ttl,
                config.authorization_webhook_cache_unauthorized_ttl))
        elif mode == "AlwaysAllow":
            authorizers.append(AlwaysAllow())
        else:
            authorizers.append(AlwaysDeny())
    return authorizers


class Authorization(Service):
    """
    @ivar authorizer: the union every request is checked with.
    @ivar policy: the L{PolicyIndex} of stored RBAC policy.
    @ivar started: fires once every mode that follows the store has listed it.
    """

    name = "authorization"
    log = Logger()

    def __init__(self, config, store, reactor):
        self.policy = PolicyIndex(store)
        self.modes = build_modes(config, store, reactor, self.policy)
        self.authorizer = UnionAuthorizer([PrivilegedGroups()] + self.modes)
        self.started = Deferred()

    def startService(self):
        super().startService()
        waits = [self.policy.start()]
        waits.extend(mode.start() for mode in self.modes if hasattr(mode, "start"))
        d = gatherResults(waits, consumeErrors=True)
        d.addErrback(lambda f: self.log.failure("Authorization failed to start", f))
        d.chainDeferred(self.started)

    def stopService(self):
        super().stopService()
        self.policy.stop()
        closing = []
        for mode in self.modes:
            if hasattr(mode, "stop"):
                mode.stop()
            if hasattr(mode, "close"):
                closing.append(mode.close())     # the webhook's kept connections
        return gatherResults(closing, consumeErrors=True)
