# -*- test-case-name: tests.app.test_config -*-
"""
How each setting's text becomes a value: one parser per kind of value.

A parser takes the flag's text (or the YAML value) and returns the
converted value, or raises ValueError with a message that names what is
wrong; L{orchd.app.config} adds where the value came from.
"""

import ipaddress
import re
from urllib.parse import urlsplit

from orchd.api.features import FeatureGates
from orchd.api.versions import resource_config
from orchd.registry.kinds.builtin import KINDS

#: Authorization modes, by their flag names; which are implemented is the caller's affair.
AUTHORIZATION_MODES = ("Node", "RBAC", "ABAC", "Webhook", "AlwaysAllow", "AlwaysDeny")
DEFAULT_AUTHORIZATION_MODE = "Node,RBAC"
STORAGE_BACKENDS = ("leveldb", "etcd")


_TRUE = frozenset({"true", "1"})
_FALSE = frozenset({"false", "0"})


def parse_bool(value):
    """C{true}/C{false}/C{1}/C{0} in any case, or a YAML boolean."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
    raise ValueError(f"{value!r} is not a boolean (true, false, 1 or 0)")


def _text(value):
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{value!r} is not a string")
    return str(value).strip()


def _string(value):
    text = _text(value)
    if not text:
        raise ValueError("must not be empty")
    return text


def _int(value, low, high):
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not an integer")
    if isinstance(value, int):
        number = value
    else:
        text = _text(value)
        if not re.fullmatch(r"[+-]?\d+", text):
            raise ValueError(f"{text!r} is not an integer")
        number = int(text)
    if number < low or (high is not None and number > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ValueError(f"{number} is out of range, must be {bound}")
    return number


def _port(value):
    return _int(value, 0, 65535)


def _non_negative(value):
    return _int(value, 0, None)


_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3,
                   "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)([^\d.]*)")


def parse_duration(value):
    """
    Read a Go duration (C{300ms}, C{1h2m3s}, C{-1.5s}, C{0}) as float seconds.

    @raise ValueError: with Go's wording (C{time: invalid duration "x"}).
    """
    text = _text(value)
    body = text
    sign = 1.0
    if body[:1] in ("+", "-"):
        sign = -1.0 if body[0] == "-" else 1.0
        body = body[1:]
    if body == "0":
        return 0.0
    if not body:
        raise ValueError(f'time: invalid duration "{text}"')
    total, position = 0.0, 0
    while position < len(body):
        match = _DURATION_PART.match(body, position)
        if match is None:
            raise ValueError(f'time: invalid duration "{text}"')
        if not match.group(2):
            raise ValueError(f'time: missing unit in duration "{text}"')
        if match.group(2) not in _DURATION_UNITS:
            raise ValueError(f'time: unknown unit "{match.group(2)}" in duration "{text}"')
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        position = match.end()
    return sign * total


def _interval(value):
    seconds = parse_duration(value)
    if seconds < 0:
        raise ValueError(f"{_text(value)} is negative")
    return seconds


def _ip_address(value):
    text = _text(value)
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise ValueError(f"{text!r} is not an IP address") from None


#: Upstream's limit: at most 20 host bits, about a million addresses.
_MAX_SERVICE_HOST_BITS = 20


def _cidr(value):
    text = _text(value)
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise ValueError(f"{text!r} is not an IPv4 or IPv6 CIDR") from None
    if "/" not in text:
        raise ValueError(f"{text!r} is not a CIDR (missing /prefix)")
    host_bits = network.max_prefixlen - network.prefixlen
    if host_bits > _MAX_SERVICE_HOST_BITS:
        bits = network.max_prefixlen
        raise ValueError(f"{text} is too large; for {bits}-bit addresses, the mask "
                         f"must be >= {bits - _MAX_SERVICE_HOST_BITS}")
    return network


def _items(value):
    """A comma list from a flag, or a YAML list."""
    if isinstance(value, (list, tuple)):
        parts = [_text(item) for item in value]
    else:
        parts = _text(value).split(",")
    return tuple(part.strip() for part in parts if part.strip())


def _one_of(*choices):
    """A parser that takes exactly one of C{choices}."""
    def parse(value):
        text = _text(value)
        if text not in choices:
            raise ValueError(f"{text!r} is not one of {', '.join(choices)}")
        return text
    return parse


_storage_backend = _one_of(*STORAGE_BACKENDS)
_audit_log_format = _one_of("json", "legacy")
_log_format = _one_of("text", "json")


def _etcd_servers(value):
    servers = _items(value)
    for server in servers:
        parts = urlsplit(server)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{server!r} is not an http:// or https:// URL")
    return servers


def _authorization_modes(value):
    modes = _items(value)
    if not modes:
        raise ValueError("at least one authorization mode must be given")
    for mode in modes:
        if mode not in AUTHORIZATION_MODES:
            raise ValueError(f"authorization mode {mode!r} is not a valid mode "
                             f"(valid: {', '.join(AUTHORIZATION_MODES)})")
        if modes.count(mode) > 1:
            raise ValueError(f"authorization mode {mode!r} is specified more than once")
    return modes


#: The node agent's authorization modes.
ORCHLET_AUTHORIZATION_MODES = ("AlwaysAllow", "Webhook")


_orchlet_authorization_mode = _one_of(*ORCHLET_AUTHORIZATION_MODES)
_webhook_version = _one_of("v1", "v1beta1")


_CONTROLLER_NAME = re.compile(r"-?[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _controllers(value):
    names = _items(value)
    for name in names:
        if name != "*" and not _CONTROLLER_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not '*', a controller name or -<name>")
    return names


def _key_values(value):
    """A YAML mapping as C{k=v,...} text, so it goes through the flag's parser."""
    if isinstance(value, dict):
        return ",".join(f"{key}={str(item).lower() if isinstance(item, bool) else item}"
                        for key, item in value.items())
    return _text(value)


def _runtime_config(value):
    text = _key_values(value)
    resource_config(text, KINDS)   # raises ValueError for unknown names and bad values
    return text


def _feature_gates(value):
    if isinstance(value, FeatureGates):
        return value
    if isinstance(value, dict):
        return FeatureGates.from_mapping(value)
    return FeatureGates.parse(_text(value))


_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")


def _node_name(value):
    name = _text(value).lower()
    if not name or len(name) > 253 or not _SUBDOMAIN.fullmatch(name):
        raise ValueError(f"{name!r} is not a valid node name (an RFC 1123 subdomain)")
    return name


_BOOTSTRAP_TOKEN = re.compile(r"[a-z0-9]{6}\.[a-z0-9]{16}")


def _bootstrap_token(value):
    text = _text(value)
    if not _BOOTSTRAP_TOKEN.fullmatch(text):
        raise ValueError("is not a bootstrap token of the form [a-z0-9]{6}.[a-z0-9]{16}")
    return text


def _https_url(value):
    text = _text(value)
    parts = urlsplit(text)
    if parts.scheme != "https" or not parts.hostname:
        raise ValueError(f"{text!r} is not an https:// URL")
    return text.rstrip("/")


#: Most simulated nodes one process runs (each has its own /24 of pod IPs in 10.89.0.0+).
MAX_SIMULATED_NODES = 10000
#: A resource name: a DNS-label-like name with an optional domain prefix (cpu, example.com/gpu).
_RESOURCE_NAME = re.compile(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
#: Upstream's quantity grammar, without a sign: capacities are not negative.
_QUANTITY = re.compile(r"\+?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?\d+)?")


def _simulated_nodes(value):
    return _int(value, 0, MAX_SIMULATED_NODES)


def _resource_list(value):
    """
    C{name=quantity,...} (or a YAML mapping) as a tuple of C{(name, quantity)},
    each quantity in upstream's grammar (C{4}, C{500m}, C{8Gi}, C{1e3}).
    """
    pairs = []
    for item in _items(_key_values(value)):
        name, sep, quantity = item.partition("=")
        name, quantity = name.strip(), quantity.strip()
        if not sep or not _RESOURCE_NAME.fullmatch(name):
            raise ValueError(f"{item!r} is not <resource>=<quantity>")
        if not _QUANTITY.fullmatch(quantity):
            raise ValueError(f"{quantity!r} is not a quantity (e.g. 4, 500m, 8Gi) for {name}")
        if any(name == seen for seen, _ in pairs):
            raise ValueError(f"resource {name!r} is given more than once")
        pairs.append((name, quantity))
    if not pairs:
        raise ValueError("at least one resource must be given")
    return tuple(pairs)
