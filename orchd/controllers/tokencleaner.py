# -*- test-case-name: tests.controllers.test_tokencleaner -*-
"""
The token cleaner: an expired bootstrap token's Secret is deleted.

Each token is looked at when it appears or changes and then again at its
expiration time (a timer per token, not a periodic sweep), so a token is
gone the moment it stops being usable. The delete carries the uid it was
judged by, so a Secret recreated under the same name is never removed.
"""

from orchd.api.errors import StatusError
from orchd.auth import bootstraptoken as bt
from orchd.controllers.base import QueuedController
from orchd.registry.context import RequestContext
from orchd.registry.options import DeleteOptions

MANAGER = "token-cleaner"


def _keep(obj):
    """C{(uid, expiration)} of a bootstrap-token Secret, None for any other."""
    if obj.get("type") != bt.SECRET_TYPE:
        return None
    return obj["metadata"].get("uid"), bt.secret_expiration(obj)


class TokenCleaner(QueuedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    """

    name = "tokencleaner"

    def __init__(self, catalog, clock):
        super().__init__(catalog, clock)
        self._secrets = catalog.resource("", "secrets")
        self._prefix = self._secrets.info.key_prefix(bt.NAMESPACE)
        self._informer = self.follow("", "secrets", self._changed, keep=_keep,
                                     namespace=bt.NAMESPACE)

    def _changed(self, type, obj, old):
        if obj.get("type") == bt.SECRET_TYPE:
            self._queue.add(obj["metadata"]["name"])

    async def _sync(self, name):
        kept = self._informer.cache.get(self._prefix + name)
        if kept is None:
            return
        uid, expiration = kept
        if expiration is None:
            return
        now = self._clock.seconds()
        if now < expiration:
            self._queue.add_after(name, expiration - now)
            return
        ctx = RequestContext(self._catalog.system_context().user, bt.NAMESPACE,
                             field_manager=MANAGER)
        try:
            await self._secrets.delete(ctx, name, DeleteOptions(uid=uid))
        except StatusError as e:
            if e.code in (404, 409):
                return       # already gone, or replaced by a new Secret of that name
            raise
        self.log.info("Deleted expired bootstrap token {name}", name=name)
