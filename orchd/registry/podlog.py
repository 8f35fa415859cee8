# -*- test-case-name: tests.registry.test_podlog -*-
"""
C{pods/<name>/log}: the orchlet's C{/containerLogs/<namespace>/<pod>/<container>}.

Follows upstream's C{LogLocation} (C{pkg/registry/core/pod/strategy.go}):
the container must be the pod's (or its only one be meant), the pod must be
bound to a node that has an orchlet, and the options pass upstream's
C{PodLogOptions} validation. The orchlet's answer is sent as C{text/plain};
a non-2xx reply becomes a Status carrying its text. The request itself is
made by L{orchd.server.proxy}; only stored objects are read here.
"""

from urllib.parse import quote, urlencode

from zope.interface import implementer

from orchd.api.errors import StatusError
from orchd.api.kinds import SUBRESOURCE_VERBS
from orchd.registry.catalog import IStreamConnector
from orchd.registry.nodeproxy import get_node, orchlet_endpoint
from orchd.registry.streams import ORCHLET_CLIENT, Location, PodLogOptions

#: The query parameters of C{pods/log} the orchlet's C{/containerLogs} takes,
#: in the order they are passed on, with their L{PodLogOptions} attributes.
LOG_PARAMETERS = (("follow", "follow"), ("previous", "previous"), ("timestamps", "timestamps"),
                  ("sinceSeconds", "since_seconds"), ("sinceTime", "since_time"),
                  ("tailLines", "tail_lines"), ("limitBytes", "limit_bytes"))
#: The least value of each numeric option.
_MINIMUM = {"sinceSeconds": 1, "tailLines": 0, "limitBytes": 1}


def pod_log_connector():
    """The Catalog's C{connectors} entry for C{pods/log}: C{{key: factory(catalog)}}."""
    return {("", "pods", "log"): PodLog}


@implementer(IStreamConnector)
class PodLog:
    """
    C{pods/<name>/log}: a container's log, from the orchlet of the pod's node.

    @param catalog: the L{orchd.registry.catalog.Catalog} pods and nodes are read from.
    """

    verbs = SUBRESOURCE_VERBS["log"]
    options = PodLogOptions

    def __init__(self, catalog):
        self.catalog = catalog

    async def locate(self, ctx, name, options):
        pod = await self.catalog.resource("", "pods").get(ctx, name)
        container = options.container or _default_container(pod, name)
        spec = pod.get("spec") or {}
        if container not in _container_names(spec):
            raise StatusError.bad_request(f"container {container} is not valid for pod {name}")
        node_name = spec.get("nodeName")
        if not node_name:
            raise StatusError.bad_request(f"pod {name} does not have a host assigned")
        address, port = orchlet_endpoint(await get_node(self.catalog, ctx, node_name))
        path = "/containerLogs/" + "/".join(quote(p, safe="") for p in (ctx.namespace, name,
                                                                          container))
        return Location("https", address, port, path, urlencode(_log_query(options)),
                        identity=ORCHLET_CLIENT, content_type="text/plain", check_status=True)


def _names(containers):
    return [c.get("name", "") for c in containers or () if isinstance(c, dict)]


def _container_names(spec):
    return set(_names(spec.get("containers")) + _names(spec.get("initContainers"))
               + _names(spec.get("ephemeralContainers")))


def _default_container(pod, name):
    """The only container; else the 400 upstream gives, naming the choices."""
    spec = pod.get("spec") or {}
    containers = _names(spec.get("containers"))
    if len(containers) == 1:
        return containers[0]
    message = f"a container name must be specified for pod {name}, choose one of: " \
              f"[{' '.join(containers)}]"
    init = _names(spec.get("initContainers"))
    if init:
        message += f" or one of the init containers: [{' '.join(init)}]"
    ephemeral = _names(spec.get("ephemeralContainers"))
    if ephemeral:
        message += f" or one of the ephemeral containers: [{' '.join(ephemeral)}]"
    raise StatusError.bad_request(message)


def _log_query(options):
    """
    The options to pass on, checked as upstream's PodLogOptions validation:
    flags only when set, numbers at least their minimum.
    """
    query = []
    for key, attribute in LOG_PARAMETERS:
        value = getattr(options, attribute)
        if value is None or value is False or value == "":
            continue
        if value is True:
            value = "true"
        elif key in _MINIMUM:
            if value < _MINIMUM[key]:
                minimum = "positive" if _MINIMUM[key] else "non-negative"
                raise StatusError.bad_request(f"{key}: must be {minimum}, got {value}")
            value = str(value)
        query.append((key, value))
    return query
