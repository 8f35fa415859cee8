# -*- test-case-name: tests.registry.test_nodeproxy -*-
"""
Where C{nodes/proxy} and C{pods/log} requests go: a URL on a node's orchlet.

Follows upstream's C{ResourceLocation} (C{pkg/registry/core/node/strategy.go})
and C{LogLocation} (C{pkg/registry/core/pod/strategy.go}); the streaming
itself is L{orchd.server.proxy}'s. Only stored objects are read here.

The node's address is the first of C{status.addresses} in
L{PREFERRED_ADDRESS_TYPES}. Upstream's default order starts with
C{Hostname}; ours starts with C{InternalIP}, because an orchlet on a
development host registers its host name, which often resolves to an
address it does not listen on (or does not resolve at all), while the
InternalIP is what it binds. The port is
C{status.daemonEndpoints.kubeletEndpoint.Port} [COMPAT: the field keeps
upstream's name, as client models know only it].
"""

from urllib.parse import quote, urlencode

from orchd.api.errors import StatusError
from orchd.api.query import query_bool, query_int, query_text

PREFERRED_ADDRESS_TYPES = ("InternalIP", "Hostname", "InternalDNS", "ExternalDNS", "ExternalIP")
#: The query parameters of C{pods/log} the orchlet's C{/containerLogs} takes.
LOG_PARAMETERS = ("follow", "previous", "timestamps", "sinceSeconds", "sinceTime", "tailLines",
                  "limitBytes")
_BOOLEANS = ("follow", "previous", "timestamps")
_POSITIVE = {"sinceSeconds": 1, "tailLines": 0, "limitBytes": 1}


class Location:
    """
    A request's destination.

    @ivar url: the full URL (bytes), query included.
    @ivar orchlet: True when it is the orchlet's own port (so the API
        server's orchlet client certificate is presented).
    @ivar content_type: the content type to answer with instead of the
        orchlet's, or None.
    @ivar check_status: True to answer a non-2xx reply as a Status
        (upstream's C{genericHttpResponseChecker}), False to pass it through.
    """

    def __init__(self, url, orchlet=True, content_type=None, check_status=False):
        self.url = url
        self.orchlet = orchlet
        self.content_type = content_type
        self.check_status = check_status

    def __repr__(self):
        return f"<Location {self.url!r}>"


def split_scheme_name_port(text):
    """
    C{name}, C{name:port} or C{scheme:name:port}, as upstream's
    C{SplitSchemeNamePort}: C{(scheme, name, port)}, or None if malformed.
    """
    parts = text.split(":")
    if len(parts) == 1:
        scheme, name, port = "", parts[0], ""
    elif len(parts) == 2:
        scheme, (name, port) = "", parts
    elif len(parts) == 3:
        scheme, name, port = parts
    else:
        return None
    if not name or scheme not in ("", "http", "https"):
        return None
    return scheme, name, port


def node_address(node):
    """The address to reach C{node} at, in L{PREFERRED_ADDRESS_TYPES} order, or None."""
    addresses = (node.get("status") or {}).get("addresses") or []
    for wanted in PREFERRED_ADDRESS_TYPES:
        for entry in addresses:
            if isinstance(entry, dict) and entry.get("type") == wanted and entry.get("address"):
                return entry["address"]
    return None


def orchlet_port(node):
    """C{status.daemonEndpoints.kubeletEndpoint.Port}, or 0 when not set."""
    endpoints = (node.get("status") or {}).get("daemonEndpoints") or {}
    port = (endpoints.get("kubeletEndpoint") or {}).get("Port")
    return port if isinstance(port, int) and not isinstance(port, bool) and port > 0 else 0


def _host_port(host, port):
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class NodeLocator:
    """
    Finds nodes in the catalog and builds orchlet URLs.

    @param catalog: the L{orchd.registry.catalog.Catalog}.
    """

    def __init__(self, catalog):
        self.catalog = catalog

    async def node(self, ctx, name):
        """The stored node C{name}; 404 as a get would answer."""
        nodes = self.catalog.resource("", "nodes")
        return await nodes.get(ctx, name)

    def orchlet_base(self, node):
        """C{https://<address>:<port>} of a node's orchlet; 400 when it has none."""
        name = node["metadata"]["name"]
        address, port = node_address(node), orchlet_port(node)
        if address is None:
            raise StatusError.bad_request(f"node {name} has no known address")
        if not port:
            raise StatusError.bad_request(f"node {name} has no orchlet port in "
                                          "status.daemonEndpoints.kubeletEndpoint.Port")
        return f"https://{_host_port(address, port)}", address, port

    async def proxy_location(self, ctx, name, path, query):
        """
        C{nodes/<name>/proxy/<path>}: the orchlet (or another port of the node).

        @param path: the path after C{proxy}, starting with C{/}.
        @param query: the raw query (bytes), passed on unchanged.
        """
        split = split_scheme_name_port(name)
        if split is None:
            raise StatusError.bad_request(f"invalid node request {name!r}")
        scheme, node_name, port = split
        node = await self.node(ctx, node_name)
        base, address, own_port = self.orchlet_base(node)
        orchlet = not port or port == str(own_port)
        if not orchlet:
            if not port.isdigit() or not 0 < int(port) < 65536:
                raise StatusError.bad_request(f"invalid node request {name!r}")
            base = f"{scheme or 'http'}://{_host_port(address, port)}"
        url = base + quote(path, safe="/:@!$&'()*+,;=-._~")
        if query:
            url += "?" + query.decode("latin-1")
        return Location(url.encode("ascii"), orchlet=orchlet)

    async def log_location(self, ctx, name, args):
        """
        C{pods/<name>/log}: the orchlet's C{/containerLogs/<ns>/<pod>/<container>}.

        @param args: the parsed query (bytes keys, lists of bytes values).
        """
        pods = self.catalog.resource("", "pods")
        pod = await pods.get(ctx, name)
        container = _arg(args, "container") or _default_container(pod, name)
        spec = pod.get("spec") or {}
        if container not in _container_names(spec):
            raise StatusError.bad_request(f"container {container} is not valid for pod {name}")
        node_name = spec.get("nodeName")
        if not node_name:
            raise StatusError.bad_request(f"pod {name} does not have a host assigned")
        node = await self.node(ctx, node_name)
        base, _, _ = self.orchlet_base(node)
        path = "/containerLogs/" + "/".join(quote(p, safe="") for p in (ctx.namespace, name,
                                                                          container))
        query = urlencode(_log_query(args))
        url = base + path + ("?" + query if query else "")
        return Location(url.encode("ascii"), content_type=b"text/plain", check_status=True)


def _arg(args, key):
    return query_text(args, key)


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


def _log_query(args):
    """The log options to pass on, checked as upstream's PodLogOptions validation."""
    query = []
    for key in LOG_PARAMETERS:
        if key in _BOOLEANS:
            if query_bool(args, key):
                query.append((key, "true"))
            continue
        value = _arg(args, key)
        if not value:
            continue
        if key in _POSITIVE:
            number = query_int(args, key)
            if number < _POSITIVE[key]:
                minimum = "positive" if _POSITIVE[key] else "non-negative"
                raise StatusError.bad_request(f"{key}: must be {minimum}, got {number}")
            value = str(number)
        query.append((key, value))
    return query
