# -*- test-case-name: tests.controllers.test_bootstrapsigner -*-
"""
The bootstrap signer: each signing bootstrap token signs C{cluster-info}.

A joining node knows only its token; it reads C{cluster-info} anonymously
and trusts the CA inside once the signature made with its token checks
out. So the config map carries, for every valid signing token, the
detached HS256 JWS C{jws-kubeconfig-<id>} of its C{kubeconfig}, and loses
it when the token expires, is deleted or stops signing. Expiry is not a
store event, so a sync is also scheduled for the earliest expiration.
"""

import copy

from orchd.api.errors import StatusError
from orchd.auth import bootstraptoken as bt
from orchd.auth.clusterinfo import KUBECONFIG, NAME, NAMESPACE, SIGNATURE_PREFIX, detached_jws
from orchd.controllers.base import QueuedController
from orchd.registry.context import RequestContext

MANAGER = "bootstrap-signer"


def signatures(payload, tokens, now):
    """C{{jws-kubeconfig-<id>: signature}} for each valid signing token in C{tokens}."""
    signed = {}
    for token in tokens:
        if token is None or bt.SIGNING not in token.usages or token.expired(now):
            continue
        signed.setdefault(SIGNATURE_PREFIX + token.token_id, detached_jws(payload, token.token))
    return signed


def _keep_cluster_info(obj):
    return obj if obj["metadata"].get("name") == NAME else None


class BootstrapSigner(QueuedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    """

    name = "bootstrapsigner"

    def __init__(self, catalog, clock):
        super().__init__(catalog, clock, concurrency=1)
        self._configmaps = catalog.resource("", "configmaps")
        self._secrets = self.follow("", "secrets", self._changed, keep=bt.token_from_secret,
                                    namespace=bt.NAMESPACE)
        self._maps = self.follow("", "configmaps", self._changed, keep=_keep_cluster_info,
                                 namespace=NAMESPACE)

    def startService(self):
        super().startService()
        self.started.addCallback(lambda _: self._queue.add(NAME))

    def _changed(self, type, obj, old):
        if self.started is not None and self.started.called:
            self._queue.add(NAME)

    async def _sync(self, _):
        current = self._maps.cache.get(self._configmaps.info.key(NAMESPACE, NAME))
        data = (current or {}).get("data") or {}
        payload = data.get(KUBECONFIG)
        if payload is None:
            return
        now = self._clock.seconds()
        tokens = list(self._secrets.cache.values())
        self._schedule_expiry(tokens, now)
        wanted = {k: v for k, v in data.items() if not k.startswith(SIGNATURE_PREFIX)}
        wanted.update(signatures(payload, tokens, now))
        if wanted == data:
            return
        updated = copy.deepcopy(current)     # the informer's copy stays as it was
        updated["data"] = wanted
        ctx = RequestContext(self._catalog.system_context().user, NAMESPACE,
                             field_manager=MANAGER)
        try:
            await self._configmaps.update(ctx, NAME, updated)
        except StatusError as e:
            if e.code in (404, 409):
                return       # the change that got in first queues another sync
            raise
        self.log.info("Signed {name} with {count} bootstrap tokens", name=NAME,
                      count=sum(1 for k in wanted if k.startswith(SIGNATURE_PREFIX)))

    def _schedule_expiry(self, tokens, now):
        """Sync again when the next signing token expires, to drop its signature."""
        ahead = [t.expiration - now for t in tokens
                 if t is not None and bt.SIGNING in t.usages and t.expiration is not None
                 and not t.expired(now)]
        if ahead:
            self._queue.add_after(NAME, min(ahead))
