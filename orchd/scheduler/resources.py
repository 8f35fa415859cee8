# -*- test-case-name: tests.scheduler.test_resources -*-
"""
Resource amounts as the scheduler counts them: integers per resource name.

C{cpu} is counted in millicores, every other resource in its base unit
(bytes, pods, devices), each rounded up as upstream's C{MilliValue} and
C{Value} round. A pod's request is upstream's C{PodRequests}: the sum over
its containers, at least the largest init container (with the sidecars
started before it), plus its overhead; a container's missing request is
its limit, as upstream's defaulting makes it. Scoring counts unset cpu and
memory requests as 100m and 200Mi (upstream's C{NonMissingContainerRequests}).
"""

import math

from orchd.api.quantity import parse_quantity

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
#: What scoring counts for a container that requests no cpu or memory.
DEFAULT_MILLI_CPU = 100
DEFAULT_MEMORY = 200 * 1024 * 1024
_NON_ZERO_DEFAULTS = {CPU: DEFAULT_MILLI_CPU, MEMORY: DEFAULT_MEMORY}


#: Amounts already read, by (resource is cpu, text): pods mostly repeat a few
#: requests, and every version of every pod is read again.
_KNOWN = {}
_KNOWN_SIZE = 4096


def amount(name, value):
    """
    The integer amount of C{value} (a quantity, or a JSON number) of
    resource C{name}; None when it is not a quantity.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        value = repr(value) if isinstance(value, float) else str(value)
    elif not isinstance(value, str):
        return None
    key = (name == CPU, value)
    known = _KNOWN.get(key, _KNOWN)
    if known is not _KNOWN:
        return known
    try:
        quantity = parse_quantity(value)
    except ValueError:
        counted = None
    else:
        counted = math.ceil(quantity * 1000) if key[0] else math.ceil(quantity)
    if len(_KNOWN) >= _KNOWN_SIZE:
        _KNOWN.clear()
    _KNOWN[key] = counted
    return counted


def resource_list(mapping):
    """C{{name: amount}} of a C{requests}/C{limits}/C{allocatable} map; bad entries dropped."""
    result = {}
    if isinstance(mapping, dict):
        for name, value in mapping.items():
            counted = amount(name, value)
            if counted is not None and isinstance(name, str):
                result[name] = counted
    return result


def container_requests(container, defaults=None):
    """
    What one container requests: its requests, else its limits, per resource;
    with C{defaults}, those amounts for resources it names in neither.
    """
    resources = container.get("resources") if isinstance(container, dict) else None
    if not isinstance(resources, dict):
        resources = {}
    requests = resource_list(resources.get("limits"))
    requests.update(resource_list(resources.get("requests")))
    if defaults:
        for name, value in defaults.items():
            requests.setdefault(name, value)
    return requests


def _add(total, more):
    for name, value in more.items():
        total[name] = total.get(name, 0) + value
    return total


def _max(total, other):
    for name, value in other.items():
        if value > total.get(name, 0):
            total[name] = value
    return total


def _containers(spec, field):
    value = spec.get(field)
    return [c for c in value if isinstance(c, dict)] if isinstance(value, list) else []


def pod_requests(spec, non_zero=False):
    """
    C{{name: amount}} a pod asks of its node (upstream's C{PodRequests}).

    @param non_zero: count unset cpu and memory requests as 100m and
        200Mi, as scoring does.
    """
    defaults = _NON_ZERO_DEFAULTS if non_zero else None
    total = {}
    for container in _containers(spec, "containers"):
        _add(total, container_requests(container, defaults))
    sidecars = {}
    init_peak = {}
    for container in _containers(spec, "initContainers"):
        requests = container_requests(container, defaults)
        if container.get("restartPolicy") == "Always":
            # A sidecar keeps running beside the containers started after it.
            _add(total, requests)
            _add(sidecars, requests)
            running = dict(sidecars)
        else:
            running = _add(dict(requests), sidecars)
        _max(init_peak, running)
    _max(total, init_peak)
    _add(total, resource_list(spec.get("overhead")))
    return total
