# -*- test-case-name: tests.api.test_tables -*-
"""
Printers of C{networking.orch.io} and C{discovery.orch.io}, after
upstream's C{printers.go}.
"""

from orchd.api.printers.base import (
    STRING, Column, Printer, age_column, as_dict, as_list, field, format_label_selector,
    list_with_more, load_balancer_ingress, name_column,
)


def _hosts(row):
    """The first three rule hosts, then C{+ N more...}; C{*} when no rule names a host."""
    rules = as_list(row.get("spec", "rules"))
    shown, limit, more = [], 3, False
    for rule in rules:
        if len(shown) == limit:
            more = True
        host = as_dict(rule).get("host")
        if not more and host:
            shown.append(host)
    if not shown:
        return "*"
    text = ",".join(shown)
    return f"{text} + {len(rules) - limit} more..." if more else text


def _ingress_ports(row):
    return "80, 443" if as_list(row.get("spec", "tls")) else "80"


INGRESS = Printer(
    name_column(),
    Column("Class", STRING,
           "The name of the IngressClass resource that should be used for additional "
           "configuration", field("spec", "ingressClassName", default="<none>")),
    Column("Hosts", STRING,
           "Hosts that incoming requests are matched against before the ingress rule", _hosts),
    Column("Address", STRING, "Address is a list containing ingress points for the load-balancer",
           lambda row: load_balancer_ingress(row.get("status", "loadBalancer"))),
    Column("Ports", STRING, "Ports of TLS configurations that open", _ingress_ports),
    age_column(),
)


def _class_parameters(row):
    parameters = row.get("spec", "parameters")
    if not isinstance(parameters, dict):
        return "<none>"
    text = parameters.get("kind", "")
    if parameters.get("apiGroup") is not None:
        text += "." + parameters["apiGroup"]
    return f"{text}/{parameters.get('name', '')}"


INGRESS_CLASS = Printer(
    name_column(),
    Column("Controller", STRING, "Controller that is responsible for handling this class",
           field("spec", "controller")),
    Column("Parameters", STRING, "A reference to a resource with additional parameters",
           _class_parameters),
    age_column(),
)

NETWORK_POLICY = Printer(
    name_column(),
    Column("Pod-Selector", STRING, "The pods the policy applies to.",
           lambda row: format_label_selector(row.get("spec", "podSelector", default={}))),
    age_column(),
)


def _slice_ports(row):
    shown = []
    for port in as_list(row.get("ports")):
        port = as_dict(port)
        if port.get("port") is not None:
            shown.append(str(port["port"]))
        elif port.get("name") is not None:
            shown.append(port["name"])
        else:
            shown.append("*")
    return list_with_more(shown)


def _slice_endpoints(row):
    addresses = [str(address) for endpoint in as_list(row.get("endpoints"))
                 for address in as_list(as_dict(endpoint).get("addresses"))]
    return list_with_more(addresses)


ENDPOINT_SLICE = Printer(
    name_column(),
    Column("AddressType", STRING, "The type of address the slice carries.",
           field("addressType")),
    Column("Ports", STRING, "The ports of the endpoints.", _slice_ports),
    Column("Endpoints", STRING, "The addresses of the endpoints.", _slice_endpoints),
    age_column(),
)
