# -*- test-case-name: tests.controllers.test_rootca -*-
"""
The root-CA publisher: every active namespace has a ConfigMap holding the
CA that clients trust for the API server.

Pods read it through the projected service-account volume (as C{ca.crt}
next to their token), so it must be in each namespace and must hold the
right certificate: a deleted or edited map is put back. Upstream calls the
map C{kube-root-ca.crt}.
"""

import copy

from orchd.admission.serviceaccount import CA_KEY, ROOT_CA_CONFIG_MAP
from orchd.api.errors import StatusError
from orchd.controllers.base import QueuedController, is_terminating, name_only
from orchd.storage.interfaces import ADDED

DESCRIPTION_ANNOTATION = "orch.io/description"
DESCRIPTION = ("Contains a CA bundle that can be used to verify the orchd API server when "
               "using internal endpoints such as the internal service IP or "
               "orch.default.svc. No other usage is guaranteed across distributions of "
               "orchd clusters.")


#: What is kept of every other config map: nothing of its own.
_OTHER_MAP = {"metadata": {"name": "", "namespace": ""}}


def _root_ca_only(obj):
    """
    An informer C{keep}: the name of a root-CA map; every other config map
    (all a cluster's, followed) shares one empty stand-in, which holds
    nothing for the process to keep or its collector to scan.
    """
    if obj["metadata"].get("name") == ROOT_CA_CONFIG_MAP:
        return name_only(obj)
    return _OTHER_MAP


class RootCAPublisher(QueuedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    @param ca_pem: the certificate(s) to publish (PEM, bytes or text).
    """

    name = "root-ca-cert-publisher"

    def __init__(self, catalog, clock, ca_pem):
        super().__init__(catalog, clock)
        self._ca = ca_pem.decode("ascii") if isinstance(ca_pem, bytes) else ca_pem
        self.follow("", "namespaces", self._namespace_changed, name_only)
        self._maps = catalog.resource("", "configmaps")
        self._maps_informer = self.follow("", "configmaps", self._map_changed, _root_ca_only)

    @classmethod
    def from_environment(cls, env):
        return cls(env.catalog, env.clock, env.pki.server_ca_pem)

    def _namespace_changed(self, type, obj, old):
        self._queue.add(obj["metadata"]["name"])

    def _map_changed(self, type, obj, old):
        meta = obj["metadata"]
        if type != ADDED and meta["name"] == ROOT_CA_CONFIG_MAP:
            self._queue.add(meta["namespace"])

    async def _sync(self, namespace):
        if is_terminating(await self._catalog.get_namespace(namespace)):
            return
        ctx = self._catalog.system_context(namespace)
        data = {CA_KEY: self._ca}
        current = await self.get_or_none(self._maps, namespace, ROOT_CA_CONFIG_MAP)
        try:
            if current is None:
                await self._maps.create(ctx, {
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": ROOT_CA_CONFIG_MAP, "namespace": namespace,
                                 "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                    "data": data})
                self.log.info("Published the root CA in namespace {namespace}",
                              namespace=namespace)
                return
            annotations = current["metadata"].get("annotations") or {}
            if current.get("data") == data and annotations.get(DESCRIPTION_ANNOTATION) and \
                    not current.get("binaryData"):
                return
            updated = copy.deepcopy(current)
            updated["data"] = data
            updated.pop("binaryData", None)
            updated["metadata"].setdefault("annotations", {})[DESCRIPTION_ANNOTATION] = DESCRIPTION
            await self._maps.update(ctx, ROOT_CA_CONFIG_MAP, updated)
            self.log.info("Restored the root CA in namespace {namespace}", namespace=namespace)
        except StatusError as e:
            # 403/404: the namespace is going or gone (a map deleted since
            # it was read comes back through its own event); a conflict is
            # raised so that the queue tries again.
            if e.code in (403, 404):
                return
            raise
