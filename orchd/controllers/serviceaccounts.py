# -*- test-case-name: tests.controllers.test_serviceaccounts -*-
"""
The service-account controller: every active namespace has a C{default}
service account.

Pods that name no account run as C{default}, and admission refuses pods
whose account does not exist, so a namespace without one cannot run pods.
A new namespace gets the account, and a deleted one is made again; a
namespace being deleted is left alone (its content is going away).
"""

from orchd.api.errors import StatusError
from orchd.controllers.base import QueuedController, is_terminating, name_only
from orchd.storage.interfaces import DELETED

DEFAULT = "default"


class ServiceAccountsController(QueuedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    @param names: the accounts every namespace gets.
    """

    name = "serviceaccount"

    def __init__(self, catalog, clock, names=(DEFAULT,)):
        super().__init__(catalog, clock)
        self._names = frozenset(names)
        self.follow("", "namespaces", self._namespace_changed, name_only)
        self._accounts = catalog.resource("", "serviceaccounts")
        self.follow("", "serviceaccounts", self._account_changed, name_only)

    def _namespace_changed(self, type, obj, old):
        if type != DELETED:
            self._queue.add(obj["metadata"]["name"])

    def _account_changed(self, type, obj, old):
        meta = obj["metadata"]
        if type == DELETED and meta["name"] in self._names:
            self._queue.add(meta["namespace"])

    async def _sync(self, namespace):
        if is_terminating(await self._catalog.get_namespace(namespace)):
            return
        for name in sorted(self._names):
            if await self.get_or_none(self._accounts, namespace, name) is not None:
                continue
            account = {"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": name, "namespace": namespace}}
            try:
                await self._accounts.create(self._catalog.system_context(namespace), account)
            except StatusError as e:
                # 409: made meanwhile; 403/404: the namespace went or is going.
                if e.code in (403, 404, 409):
                    continue
                raise
            self.log.info("Created service account {namespace}/{name}",
                          namespace=namespace, name=name)
