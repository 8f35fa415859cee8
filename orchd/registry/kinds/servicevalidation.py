# -*- test-case-name: tests.registry.test_service -*-
"""
Validation of a Service's spec, one function per group of rules, as upstream.

Run after defaulting (L{orchd.registry.kinds.service.set_defaults}), so a
missing protocol or traffic policy has already become its default.
"""

import ipaddress
import re

from orchd.api.errors import FieldError
from orchd.api.meta import dns1123_label_errors, dns1123_subdomain_errors, label_key_errors
from orchd.registry.servicealloc import needs_health_check

TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
AFFINITIES = ("ClientIP", "None")
POLICIES = ("Cluster", "Local")
PROTOCOLS = ("SCTP", "TCP", "UDP")
FAMILY_POLICIES = ("PreferDualStack", "RequireDualStack", "SingleStack")
FAMILIES = ("IPv4", "IPv6")
MAX_AFFINITY_TIMEOUT = 86400
_PORT_NAME = re.compile(r"[-a-z0-9]+")


def externally_accessible(spec):
    kind = spec.get("type")
    return kind in ("LoadBalancer", "NodePort") or (
        kind == "ClusterIP" and bool(spec.get("externalIPs")))


def family_of(ip):
    try:
        return "IPv4" if ipaddress.ip_address(ip).version == 4 else "IPv6"
    except ValueError:
        return None


def port_name_errors(name):
    """Upstream's IANA_SVC_NAME rule for a named targetPort."""
    errors = []
    if len(name) > 15:
        errors.append("must be no more than 15 characters")
    if not _PORT_NAME.fullmatch(name):
        errors.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in name:
        errors.append("must not contain consecutive hyphens")
    if not re.search("[a-z]", name):
        errors.append("must contain at least one letter (a-z)")
    if name.startswith("-") or name.endswith("-"):
        errors.append("must not begin or end with a hyphen")
    return errors


def _port_number(value):
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


_PORT_RANGE = "must be between 1 and 65535, inclusive"


def port_errors(port, path, require_name, names):
    if not isinstance(port, dict):
        return [FieldError.type_invalid(path, port, "must be an object")]
    errors = []
    name = port.get("name") or ""
    if require_name and not name:
        errors.append(FieldError.required(f"{path}.name"))
    elif name:
        errors += [FieldError.invalid(f"{path}.name", name, m) for m in dns1123_label_errors(name)]
        if name in names:
            errors.append(FieldError.duplicate(f"{path}.name", name))
        names.add(name)
    if not _port_number(port.get("port")):
        errors.append(FieldError.invalid(f"{path}.port", port.get("port"), _PORT_RANGE))
    if port.get("protocol") not in PROTOCOLS:
        errors.append(FieldError.not_supported(f"{path}.protocol", port.get("protocol"),
                                               PROTOCOLS))
    target = port.get("targetPort")
    if isinstance(target, str):
        errors += [FieldError.invalid(f"{path}.targetPort", target, m)
                   for m in port_name_errors(target)]
    elif not _port_number(target):
        errors.append(FieldError.invalid(f"{path}.targetPort", target, _PORT_RANGE))
    node_port = port.get("nodePort")
    if node_port not in (None, 0) and not _port_number(node_port):
        errors.append(FieldError.invalid(f"{path}.nodePort", node_port, _PORT_RANGE))
    app = port.get("appProtocol")
    if app is not None:
        errors += [FieldError.invalid(f"{path}.appProtocol", app, m)
                   for m in (label_key_errors(app) if isinstance(app, str)
                             else ("must be a string",))]
    return errors


def ports_errors(spec):
    ports = spec.get("ports") or []
    errors = []
    if not ports and spec.get("type") != "ExternalName" and spec.get("clusterIP") != "None":
        errors.append(FieldError.required("spec.ports"))
    names, seen, node_ports = set(), set(), set()
    for i, port in enumerate(ports):
        path = f"spec.ports[{i}]"
        errors += port_errors(port, path, len(ports) > 1, names)
        if not isinstance(port, dict):
            continue
        key = (port.get("port"), port.get("protocol"))
        if key in seen:
            errors.append(FieldError.duplicate(path, {"port": key[0], "protocol": key[1]}))
        seen.add(key)
        if port.get("nodePort"):
            if spec.get("type") == "ClusterIP":
                errors.append(FieldError.forbidden(
                    f"{path}.nodePort", "may not be used when `type` is 'ClusterIP'"))
            node_key = (port["nodePort"], port.get("protocol"))
            if node_key in node_ports:
                errors.append(FieldError.duplicate(f"{path}.nodePort", port["nodePort"]))
            node_ports.add(node_key)
    return errors


def affinity_errors(spec):
    affinity = spec.get("sessionAffinity")
    config = spec.get("sessionAffinityConfig")
    if affinity not in AFFINITIES:
        return [FieldError.not_supported("spec.sessionAffinity", affinity, AFFINITIES)]
    if affinity == "None":
        if config:
            return [FieldError.invalid("spec.sessionAffinityConfig", config,
                                       "must not be set when session affinity is None")]
        return []
    client = (config or {}).get("clientIP") if isinstance(config, dict) else None
    path = "spec.sessionAffinityConfig.clientIP.timeoutSeconds"
    timeout = client.get("timeoutSeconds") if isinstance(client, dict) else None
    if timeout is None:
        return [FieldError.required(path, "when session affinity type is ClientIP")]
    if not isinstance(timeout, int) or isinstance(timeout, bool) \
            or not 0 < timeout <= MAX_AFFINITY_TIMEOUT:
        return [FieldError.invalid(
            path, timeout, f"must be greater than 0 and less than {MAX_AFFINITY_TIMEOUT}")]
    return []


def traffic_policy_errors(spec):
    errors = []
    internal = spec.get("internalTrafficPolicy")
    if spec.get("type") != "ExternalName" and internal not in POLICIES:
        errors.append(FieldError.not_supported("spec.internalTrafficPolicy", internal, POLICIES))
    external = spec.get("externalTrafficPolicy")
    if not externally_accessible(spec):
        if external:
            errors.append(FieldError.invalid("spec.externalTrafficPolicy", external,
                                             "may only be set for externally-accessible "
                                             "services"))
    elif external not in POLICIES:
        errors.append(FieldError.not_supported("spec.externalTrafficPolicy", external, POLICIES))
    check = spec.get("healthCheckNodePort")
    if check and not needs_health_check(spec):
        errors.append(FieldError.invalid(
            "spec.healthCheckNodePort", check,
            "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is "
            "'Local'"))
    if "allocateLoadBalancerNodePorts" in spec and spec.get("type") != "LoadBalancer":
        errors.append(FieldError.forbidden("spec.allocateLoadBalancerNodePorts",
                                           "may only be used when `type` is 'LoadBalancer'"))
    return errors


def cluster_ip_errors(spec, family):
    ips = spec.get("clusterIPs") or []
    kind = spec.get("type")
    if kind == "ExternalName":
        errors = [] if not ips else [FieldError.forbidden(
            "spec.clusterIPs", "may not be set for ExternalName services")]
        name = (spec.get("externalName") or "").removesuffix(".")
        errors += [FieldError.invalid("spec.externalName", spec.get("externalName"), m)
                   for m in dns1123_subdomain_errors(name)]
        return errors
    errors = []
    if ips and spec.get("clusterIP") != ips[0]:
        errors.append(FieldError.invalid("spec.clusterIPs", ips, "first value must match "
                                                                 "`clusterIP`"))
    policy = spec.get("ipFamilyPolicy")
    if policy not in FAMILY_POLICIES:
        errors.append(FieldError.not_supported("spec.ipFamilyPolicy", policy, FAMILY_POLICIES))
    families = spec.get("ipFamilies") or []
    for i, fam in enumerate(families):
        if fam not in FAMILIES:
            errors.append(FieldError.not_supported(f"spec.ipFamilies[{i}]", fam, FAMILIES))
        elif fam in families[:i]:
            errors.append(FieldError.duplicate(f"spec.ipFamilies[{i}]", fam))
    headless = ips[:1] == ["None"]
    if not headless:
        if policy == "RequireDualStack":
            errors.append(FieldError.invalid("spec.ipFamilyPolicy", policy,
                                             "this cluster is not configured for dual-stack "
                                             "services"))
        for i, fam in enumerate(families[:1]):
            if fam in FAMILIES and fam != family:
                errors.append(FieldError.invalid(f"spec.ipFamilies[{i}]", fam,
                                                 "not configured on this cluster"))
    if headless and kind in ("NodePort", "LoadBalancer"):
        errors.append(FieldError.invalid("spec.clusterIPs[0]", "None",
                                         f"may not be set to 'None' for {kind} services"))
    for i, ip in enumerate(ips):
        if ip == "None" and (i > 0 or len(ips) > 1):
            errors.append(FieldError.invalid(f"spec.clusterIPs[{i}]", ip, "must not be 'None' "
                                             "when more than one value is specified"))
        elif ip != "None" and family_of(ip) is None:
            errors.append(FieldError.invalid(f"spec.clusterIPs[{i}]", ip, "must be a valid IP "
                                             "address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
        elif ip != "None" and i < len(families) and family_of(ip) != families[i]:
            errors.append(FieldError.invalid(
                f"spec.clusterIPs[{i}]", ip,
                f"expected an {families[i]} value as indicated by `ipFamilies[{i}]`"))
    if len(ips) > 1 and policy == "SingleStack":
        errors.append(FieldError.invalid("spec.ipFamilyPolicy", policy, "must be "
                                         "'RequireDualStack' or 'PreferDualStack' when multiple "
                                         "cluster IPs are specified"))
    return errors
