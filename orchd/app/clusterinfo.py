# -*- test-case-name: tests.app.test_clusterinfo -*-
"""
The C{cluster-info} ConfigMap in C{orch-public}: where a joining node
learns the server's address and which CA to trust.

Written at every start, because the address (a new port) or the CA (a
replaced serving certificate) may have changed since the last one; the
bootstrap signer then signs the new content. Signatures already present
are left for the signer to replace.
"""

from twisted.logger import Logger

from orchd.api.errors import StatusError
from orchd.auth.clusterinfo import KUBECONFIG, NAME, NAMESPACE
from orchd.client.orchconfig import cluster_info_document, dump_orchconfig

log = Logger()


def cluster_info_kubeconfig(server, ca_pem):
    """The C{kubeconfig} value: the cluster alone, no users."""
    return dump_orchconfig(cluster_info_document(server, ca_pem))


async def ensure_cluster_info(catalog, server, ca_pem):
    """
    Create C{cluster-info}, or bring its C{kubeconfig} up to date.

    @return: True when it was written.
    """
    configmaps = catalog.resource("", "configmaps")
    ctx = catalog.system_context(NAMESPACE)
    wanted = cluster_info_kubeconfig(server, ca_pem)
    for _ in range(5):
        try:
            current = await configmaps.get(ctx, NAME)
        except StatusError as e:
            if e.code != 404:
                raise
            current = None
        try:
            if current is None:
                await configmaps.create(ctx, {
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": NAME, "namespace": NAMESPACE},
                    "data": {KUBECONFIG: wanted}})
                log.info("Created ConfigMap {namespace}/{name}", namespace=NAMESPACE, name=NAME)
                return True
            data = current.get("data") or {}
            if data.get(KUBECONFIG) == wanted:
                return False
            current["data"] = dict(data, **{KUBECONFIG: wanted})
            await configmaps.update(ctx, NAME, current)
            log.info("Updated the kubeconfig of ConfigMap {namespace}/{name}",
                     namespace=NAMESPACE, name=NAME)
            return True
        except StatusError as e:
            if e.code not in (404, 409):
                raise
    raise StatusError.conflict("configmaps", "", NAME, "kept changing while being written")
