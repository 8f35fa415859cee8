# -*- test-case-name: tests.registry.test_nodeproxy -*-
"""
C{nodes/<name>/proxy/<path>}: which port of which node a request goes to.

Follows upstream's C{ResourceLocation} (C{pkg/registry/core/node/strategy.go}):
the node's orchlet port (presenting the API server's orchlet client
certificate) unless the name asks for another port, C{name:port} or
C{scheme:name:port}. The request itself is made by L{orchd.server.proxy};
only stored objects are read here.

The node's address is the first of C{status.addresses} in
L{PREFERRED_ADDRESS_TYPES}. Upstream's default order starts with
C{Hostname}; ours starts with C{InternalIP}, because an orchlet on a
development host registers its host name, which often resolves to an
address it does not listen on (or does not resolve at all), while the
InternalIP is what it binds. The port is
C{status.daemonEndpoints.kubeletEndpoint.Port} [COMPAT: the field keeps
upstream's name, as client models know only it].
"""

from urllib.parse import quote

from zope.interface import implementer

from orchd.api.errors import StatusError
from orchd.api.kinds import SUBRESOURCE_VERBS
from orchd.registry.catalog import IStreamConnector
from orchd.registry.streams import ORCHLET_CLIENT, Location, ProxyOptions

PREFERRED_ADDRESS_TYPES = ("InternalIP", "Hostname", "InternalDNS", "ExternalDNS", "ExternalIP")
#: The characters a proxied path keeps unescaped (RFC 3986 C{pchar} and C{/}).
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


def node_proxy_connector():
    """The Catalog's C{connectors} entry for C{nodes/proxy}: C{{key: factory(catalog)}}."""
    return {("", "nodes", "proxy"): NodeProxy}


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


async def get_node(catalog, ctx, name):
    """The stored node C{name}; 404 as a get would answer."""
    return await catalog.resource("", "nodes").get(ctx, name)


def orchlet_endpoint(node):
    """
    C{(address, port)} of a node's orchlet.

    @raise StatusError: 400 when the node has no address or no orchlet port.
    """
    name = node["metadata"]["name"]
    address, port = node_address(node), orchlet_port(node)
    if address is None:
        raise StatusError.bad_request(f"node {name} has no known address")
    if not port:
        raise StatusError.bad_request(f"node {name} has no orchlet port in "
                                      "status.daemonEndpoints.kubeletEndpoint.Port")
    return address, port


@implementer(IStreamConnector)
class NodeProxy:
    """
    C{nodes/<name>/proxy}: the node's orchlet, or another port of the node.

    @param catalog: the L{orchd.registry.catalog.Catalog} nodes are read from.
    """

    verbs = SUBRESOURCE_VERBS["proxy"]
    options = ProxyOptions

    def __init__(self, catalog):
        self.catalog = catalog

    async def locate(self, ctx, name, options):
        split = split_scheme_name_port(name)
        if split is None:
            raise StatusError.bad_request(f"invalid node request {name!r}")
        scheme, node_name, port = split
        node = await get_node(self.catalog, ctx, node_name)
        address, own_port = orchlet_endpoint(node)
        path = quote(options.path, safe=_PATH_SAFE)
        if not port or port == str(own_port):
            return Location("https", address, own_port, path, options.query, options.method,
                            identity=ORCHLET_CLIENT)
        # ASCII digits only: str.isdigit also takes other scripts' digits.
        if not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
            raise StatusError.bad_request(f"invalid node request {name!r}")
        return Location(scheme or "http", address, int(port), path, options.query,
                        options.method)
