# -*- test-case-name: tests.auth.test_bootstrap_authn -*-
"""
Bootstrap tokens as bearer tokens (C{--enable-bootstrap-token-auth}).

A joining node presents C{<id>.<secret>} before it holds any certificate.
The Secrets behind the tokens are kept in memory by an informer over
C{orch-system}'s secrets, so checking a token costs no store read; only
the fields of bootstrap-token Secrets are kept.
"""

import hmac

from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from zope.interface import implementer

from orchd.api.kinds import key_prefix_of
from orchd.auth import bootstraptoken as bt
from orchd.auth.interfaces import InvalidToken, ITokenAuthenticator
from orchd.auth.user import AUTHENTICATED, UserInfo
from orchd.storage.informer import Informer


def _keep(obj):
    """The L{bt.BootstrapToken} of a Secret, None for any other."""
    return bt.token_from_secret(obj)


@implementer(ITokenAuthenticator)
class BootstrapTokenAuthenticator(Service):
    """
    @param store: where to list and watch from (an IStore or CachedReads).
    @param clock: an C{IReactorTime}; tokens expire by its time.
    @ivar started: fires once the informer holds the stored tokens.
    """

    name = "bootstrap-token-authenticator"
    log = Logger()

    def __init__(self, store, clock):
        self._clock = clock
        self._prefix = key_prefix_of("", "secrets") + bt.NAMESPACE + "/"
        self._informer = Informer(store, self._prefix, lambda *_: None, keep=_keep)
        self.started = None

    def startService(self):
        super().startService()
        self.started = Deferred.fromCoroutine(self._informer.start())
        self.started.addErrback(
            lambda f: self.log.failure("Bootstrap token authentication failed to start", f))

    def stopService(self):
        self._informer.stop()
        return super().stopService()

    def authenticate_token(self, token, audiences):
        parsed = bt.parse_token(token)
        if parsed is None:
            return None
        token_id, secret = parsed
        found = self._informer.cache.get(self._prefix + bt.secret_name(token_id))
        if found is None:
            return None       # as upstream: no such token is not this authenticator's
        if not hmac.compare_digest(found.secret.encode(), secret.encode()):
            raise InvalidToken("bootstrap token secret does not match")
        if found.deleting:
            raise InvalidToken("bootstrap token is being deleted")
        if found.expired(self._clock.seconds()):
            raise InvalidToken("bootstrap token has expired")
        if bt.AUTHENTICATION not in found.usages:
            raise InvalidToken("bootstrap token is not usable for authentication")
        groups = [bt.GROUP]
        for group in found.extra_groups:
            if not bt.EXTRA_GROUP.fullmatch(group):
                raise InvalidToken(f"bootstrap token has an invalid extra group {group!r}")
            if group not in groups:
                groups.append(group)
        groups.append(AUTHENTICATED)
        return UserInfo(bt.USER_PREFIX + token_id, groups)
