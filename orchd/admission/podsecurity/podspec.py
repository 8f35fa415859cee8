# -*- test-case-name: tests.admission.test_podsecurity_checks -*-
"""
Reading a pod spec as the controls need it, and phrasing what they find.

Pods are plain JSON here: every accessor tolerates a missing or mistyped
field (validation has its own say), so a control never raises.
"""

import json

CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def mapping(value):
    return value if isinstance(value, dict) else {}


def items(value):
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def containers(spec):
    """Every container of the pod: init, regular and ephemeral."""
    for field in CONTAINER_LISTS:
        yield from items(spec.get(field))


def name_of(obj):
    name = obj.get("name")
    return name if isinstance(name, str) else ""


def security(obj):
    """The C{securityContext} of a pod spec or of a container."""
    return mapping(obj.get("securityContext"))


def is_windows(spec):
    return mapping(spec.get("os")).get("name") == "windows"


def pluralize(singular, plural, count):
    return singular if count == 1 else plural


def quote(values):
    """C{"a", "b"}: each value quoted, as upstream's messages do."""
    return ", ".join(json.dumps(str(v)) for v in values)


def containers_phrase(names):
    """C{container "a"} or C{containers "a", "b"}."""
    return f'{pluralize("container", "containers", len(names))} {quote(names)}'


def setters(pod, names):
    """Who set a bad value: C{pod}, C{container "a"}, or C{pod and containers "a", "b"}."""
    parts = ["pod"] if pod else []
    if names:
        parts.append(containers_phrase(names))
    return " and ".join(parts)


def bad_setters(spec, is_bad):
    """C{(pod, names)}: whether the pod's context, and which containers', satisfy C{is_bad}."""
    pod = is_bad(security(spec))
    names = [name_of(c) for c in containers(spec) if is_bad(security(c))]
    return pod, names


def unset_or(spec, get, good):
    """
    For a field a container inherits from the pod: C{(bad, unset)}, the
    setters of a value C{good} refuses, and the containers left with none
    (neither their own nor a good one on the pod).
    """
    pod_value = get(security(spec))
    pod_bad = pod_value is not None and not good(pod_value)
    pod_good = pod_value is not None and not pod_bad
    bad_names, unset = [], []
    for container in containers(spec):
        value = get(security(container))
        if value is None:
            if not pod_good:
                unset.append(name_of(container))
        elif not good(value):
            bad_names.append(name_of(container))
    return (pod_bad, bad_names), unset
