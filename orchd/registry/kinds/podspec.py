# -*- test-case-name: tests.registry.test_podspec -*-
"""
Pod specs wherever they appear (pods, pod templates, the templates of
workloads): upstream's defaults, the checks kubectl users meet, resource
quantities, and a pod's QoS class.

Defaults are upstream's (kk C{pkg/apis/core/v1/defaults.go}): DNS policy
C{ClusterFirst}, restart policy C{Always}, an empty security context, 30 s
of termination grace, the default scheduler; per container the image pull
policy (C{Always} for C{:latest} or no tag, else C{IfNotPresent}), the
termination message path and policy, C{TCP} ports, probe timings and
HTTP actions; per volume an C{emptyDir} when it names no source and the
file modes of projected, secret, config map and downward API volumes.
Upstream applies them when it decodes a body, so they hold for every
create, update and patch, whoever sends it.

Resource lists are written back in upstream's canonical form (C{0.5} ->
C{500m}, rounded up to a milli). A quantity that is not one fails as
upstream's decoding fails: a 400, C{<Kind> in version "<v>" cannot be
handled as a <Kind>: quantities must match the regular expression ...}.
"""

from orchd.api import meta as metadata
from orchd.api.errors import FieldError, StatusError
from orchd.api.quantity import FORMAT_ERROR, canonical, parse
from orchd.registry.kinds.placement import placement_errors

_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
#: Upstream's C{TerminationMessagePathDefault}.
TERMINATION_MESSAGE_PATH = "/dev/termination-log"
DEFAULT_SCHEDULER = "default-scheduler"
DEFAULT_GRACE_SECONDS = 30
#: 0644, the mode of files in secret, config map, downward API and projected volumes.
DEFAULT_MODE = 0o644
RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PROTOCOLS = ("TCP", "UDP", "SCTP")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_MODE_VOLUMES = ("secret", "configMap", "downwardAPI", "projected")
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
#: Resources whose requests may be below their limits (not hugepages or extended).
_QOS_RESOURCES = ("cpu", "memory")
_STANDARD_CONTAINER_RESOURCES = frozenset(("cpu", "memory", "ephemeral-storage"))
#: Upstream's standard resource names without a domain that are not container ones.
_STANDARD_RESOURCES = frozenset((
    "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
    "persistentvolumeclaims", "storage", "requests.cpu", "requests.memory", "requests.storage",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage"))
_NATIVE_DOMAIN = "orch.io/"


def _dicts(value):
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else ()


def _dict(value):
    return value if isinstance(value, dict) else None


# -- defaults --------------------------------------------------------------------

def image_tag(image):
    """
    The tag of an image reference as upstream's C{ParseImageName} reads it:
    C{latest} when it has neither tag nor digest, C{""} with a digest only.
    """
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        return last.rsplit(":", 1)[1]
    return "" if digest else "latest"


def _default_http_get(action):
    action = _dict(action)
    if action is not None:
        if not action.get("path"):
            action["path"] = "/"
        if not action.get("scheme"):
            action["scheme"] = "HTTP"


def _default_probe(probe):
    probe = _dict(probe)
    if probe is None:
        return
    for field, value in (("timeoutSeconds", 1), ("periodSeconds", 10),
                         ("successThreshold", 1), ("failureThreshold", 3)):
        if not probe.get(field):
            probe[field] = value
    _default_http_get(probe.get("httpGet"))


def _default_field_ref(holder):
    ref = _dict(holder.get("fieldRef")) if isinstance(holder, dict) else None
    if ref is not None and not ref.get("apiVersion"):
        ref["apiVersion"] = "v1"


def _default_container(container):
    image = container.get("image")
    if not container.get("imagePullPolicy"):
        tag = image_tag(image) if isinstance(image, str) else ""
        container["imagePullPolicy"] = "Always" if tag == "latest" else "IfNotPresent"
    if not container.get("terminationMessagePath"):
        container["terminationMessagePath"] = TERMINATION_MESSAGE_PATH
    if not container.get("terminationMessagePolicy"):
        container["terminationMessagePolicy"] = "File"
    for port in _dicts(container.get("ports")):
        if not port.get("protocol"):
            port["protocol"] = "TCP"
    for probe in _PROBES:
        if probe in container:
            _default_probe(container[probe])
    lifecycle = _dict(container.get("lifecycle"))
    if lifecycle is not None:
        for hook in ("postStart", "preStop"):
            handler = _dict(lifecycle.get(hook))
            if handler is not None:
                _default_http_get(handler.get("httpGet"))
    for env in _dicts(container.get("env")):
        _default_field_ref(env.get("valueFrom"))


def _default_volume(volume):
    if not any(isinstance(value, dict) for key, value in volume.items() if key != "name"):
        volume["emptyDir"] = {}
        return
    for source in _MODE_VOLUMES:
        held = _dict(volume.get(source))
        if held is not None and held.get("defaultMode") is None:
            held["defaultMode"] = DEFAULT_MODE
    host_path = _dict(volume.get("hostPath"))
    if host_path is not None and host_path.get("type") is None:
        host_path["type"] = ""
    downward = _dict(volume.get("downwardAPI"))
    if downward is not None:
        for item in _dicts(downward.get("items")):
            _default_field_ref(item)
    projected = _dict(volume.get("projected"))
    if projected is not None:
        for source in _dicts(projected.get("sources")):
            token = _dict(source.get("serviceAccountToken"))
            if token is not None and token.get("expirationSeconds") is None:
                token["expirationSeconds"] = 3600
            inner = _dict(source.get("downwardAPI"))
            if inner is not None:
                for item in _dicts(inner.get("items")):
                    _default_field_ref(item)


def default_pod_spec(spec):
    """Upstream's defaults of a PodSpec, in place (C{spec} may be anything)."""
    if not isinstance(spec, dict):
        return
    if not spec.get("dnsPolicy"):
        spec["dnsPolicy"] = "ClusterFirst"
    if not spec.get("restartPolicy"):
        spec["restartPolicy"] = "Always"
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    if spec.get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = DEFAULT_GRACE_SECONDS
    if not spec.get("schedulerName"):
        spec["schedulerName"] = DEFAULT_SCHEDULER
    for field in _CONTAINER_LISTS:
        for container in _dicts(spec.get(field)):
            _default_container(container)
    for volume in _dicts(spec.get("volumes")):
        _default_volume(volume)


def default_pod_template(template):
    """The defaults of a PodTemplateSpec's spec, in place."""
    if isinstance(template, dict):
        spec = template.get("spec")
        if spec is None:
            spec = template["spec"] = {}
        default_pod_spec(spec)


def default_pod(pod):
    """
    What upstream defaults on a Pod beyond its spec: requests copied from
    limits where unset, service links on, and with host networking every
    container port is also a host port.
    """
    spec = pod.get("spec")
    if spec is None:
        spec = pod["spec"] = {}
    if not isinstance(spec, dict):
        return
    default_pod_spec(spec)
    for field in ("containers", "initContainers"):
        for container in _dicts(spec.get(field)):
            resources = _dict(container.get("resources"))
            limits = _dict(resources.get("limits")) if resources is not None else None
            if limits:
                requests = resources.get("requests")
                if not isinstance(requests, dict):
                    requests = resources["requests"] = {}
                for name, value in limits.items():
                    requests.setdefault(name, value)
    if spec.get("enableServiceLinks") is None:
        spec["enableServiceLinks"] = True
    if spec.get("hostNetwork") is True:
        for field in ("containers", "initContainers"):
            for container in _dicts(spec.get(field)):
                for port in _dicts(container.get("ports")):
                    if not port.get("hostPort"):
                        port["hostPort"] = port.get("containerPort")


# -- quantities ------------------------------------------------------------------

def _quantity_text(value):
    """
    The text of a quantity as JSON may carry it: a string, or a bare number
    (C{null} is zero); upstream reads anything else as text that fails.
    """
    if isinstance(value, str):
        return value
    if value is None:
        return "0"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return ""


def canonical_quantities(resources, kind, version="v1"):
    """
    Rewrite a ResourceList (C{{name: quantity}}) in upstream's canonical
    form, in place.

    @raise StatusError: 400, as upstream's decoding, for a value that is not
        a quantity.
    """
    if not isinstance(resources, dict):
        return
    for name, value in resources.items():
        try:
            written = canonical(_quantity_text(value))
        except ValueError as e:
            raise StatusError.bad_request(
                f'{kind} in version "{version}" cannot be handled as a {kind}: {e}') from None
        if written != value:
            resources[name] = written


def canonical_pod_resources(spec, kind, version="v1"):
    """L{canonical_quantities} for every container's requests and limits in a PodSpec."""
    if not isinstance(spec, dict):
        return
    for field in _CONTAINER_LISTS:
        for container in _dicts(spec.get(field)):
            resources = _dict(container.get("resources"))
            if resources is not None:
                canonical_quantities(resources.get("requests"), kind, version)
                canonical_quantities(resources.get("limits"), kind, version)


def _value(quantity):
    """The value of a quantity, or None if it is not one (an object stored before checks)."""
    try:
        return parse(_quantity_text(quantity)).value
    except ValueError:
        return None


def is_native_resource(name):
    """Upstream's C{IsNativeResource}: no domain, or the project's own."""
    return "/" not in name or _NATIVE_DOMAIN in name


def is_huge_pages(name):
    return name.startswith("hugepages-")


def _overcommit_allowed(name):
    return is_native_resource(name) and not is_huge_pages(name)


def _is_extended(name):
    return not is_native_resource(name) and not name.startswith("requests.") \
        and not metadata.label_key_errors("requests." + name)


def _resource_name_errors(name, path):
    """Upstream's C{validateContainerResourceName}."""
    errors = [FieldError.invalid(path, name, m) for m in metadata.label_key_errors(name)]
    if errors:
        return errors
    if "/" not in name:
        container = name in _STANDARD_CONTAINER_RESOURCES or is_huge_pages(name)
        if not container and name not in _STANDARD_RESOURCES:
            errors.append(FieldError.invalid(path, name,
                                             "must be a standard resource type or fully qualified"))
        if not container:
            errors.append(FieldError.invalid(path, name,
                                             "must be a standard resource for containers"))
    elif not is_native_resource(name) and not _is_extended(name):
        errors.append(FieldError.invalid(path, name,
                                         "doesn't follow extended resource name standard"))
    return errors


def quantity_value_errors(name, quantity, path):
    """Upstream's C{ValidateResourceQuantityValue}: not negative; whole for integer resources."""
    value = _value(quantity)
    if value is None:
        return [FieldError.invalid(path, quantity, FORMAT_ERROR)]
    errors = []
    if value < 0:
        errors.append(FieldError.invalid(path, str(quantity), "must be greater than or equal to 0"))
    if (name == "pods" or _is_extended(name)) and value.denominator != 1:
        errors.append(FieldError.invalid(path, str(quantity), "must be an integer"))
    return errors


def resource_requirements_errors(resources, path):
    """Upstream's C{ValidateContainerResourceRequirements} for canonical requests and limits."""
    resources = _dict(resources)
    if resources is None:
        return []
    errors = []
    limits = _dict(resources.get("limits")) or {}
    requests = _dict(resources.get("requests")) or {}
    for name in sorted(limits):
        field = f"{path}.limits[{name}]"
        errors += _resource_name_errors(name, field)
        errors += quantity_value_errors(name, limits[name], field)
    for name in sorted(requests):
        field = f"{path}.requests[{name}]"
        errors += _resource_name_errors(name, field)
        errors += quantity_value_errors(name, requests[name], field)
        request = requests[name]
        if name in limits:
            wanted, limit = _value(request), _value(limits[name])
            if wanted is None or limit is None:
                continue
            if wanted != limit and not _overcommit_allowed(name):
                errors.append(FieldError.invalid(
                    f"{path}.requests", str(request),
                    f"must be equal to {name} limit of {limits[name]}"))
            elif wanted > limit:
                errors.append(FieldError.invalid(
                    f"{path}.requests", str(request),
                    f"must be less than or equal to {name} limit of {limits[name]}"))
        elif not _overcommit_allowed(name):
            errors.append(FieldError.required(f"{path}.limits",
                                              "Limit must be set for non overcommitable resources"))
    return errors


# -- validation ------------------------------------------------------------------

def _container_errors(container, path, names, require_image):
    errors = []
    name = container.get("name")
    if not name:
        errors.append(FieldError.required(f"{path}.name"))
    elif not isinstance(name, str):
        errors.append(FieldError.type_invalid(f"{path}.name", name, "must be of type string"))
    else:
        errors += [FieldError.invalid(f"{path}.name", name, m)
                   for m in metadata.dns1123_label_errors(name)]
        if name in names:
            errors.append(FieldError.duplicate(f"{path}.name", name))
        names.add(name)
    if require_image and not container.get("image"):
        errors.append(FieldError.required(f"{path}.image"))
    policy = container.get("imagePullPolicy")
    if policy not in PULL_POLICIES:
        errors.append(FieldError.not_supported(f"{path}.imagePullPolicy", policy,
                                               PULL_POLICIES))
    for i, port in enumerate(container.get("ports") or ()):
        if not isinstance(port, dict):
            continue
        port_path = f"{path}.ports[{i}]"
        number = port.get("containerPort")
        if not number:
            errors.append(FieldError.required(f"{port_path}.containerPort"))
        elif isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 65536:
            errors.append(FieldError.invalid(f"{port_path}.containerPort", number,
                                             "must be between 1 and 65535, inclusive"))
        host = port.get("hostPort")
        if host not in (None, 0) and (isinstance(host, bool) or not isinstance(host, int)
                                      or not 0 < host < 65536):
            errors.append(FieldError.invalid(f"{port_path}.hostPort", host,
                                             "must be between 1 and 65535, inclusive"))
        if port.get("protocol") not in PROTOCOLS:
            errors.append(FieldError.not_supported(f"{port_path}.protocol", port.get("protocol"),
                                                   sorted(PROTOCOLS)))
    errors += resource_requirements_errors(container.get("resources"), f"{path}.resources")
    return errors


def pod_spec_errors(spec, path, require_image=True):
    """
    The checks of a (defaulted) PodSpec that users meet most: containers
    present, named once each, with images; ports in range; resource
    requests and limits; restart and DNS policies; where it may be placed
    (L{orchd.registry.kinds.placement}).

    @param require_image: False for pod templates, whose images a
        controller or a later patch may fill in.
    """
    if not isinstance(spec, dict):
        return [FieldError.required(path)]
    errors = []
    names = set()
    containers = spec.get("containers")
    if not containers or not isinstance(containers, list):
        errors.append(FieldError.required(f"{path}.containers"))
    for field in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(field) or ()):
            if isinstance(container, dict):
                errors += _container_errors(container, f"{path}.{field}[{i}]", names,
                                            require_image)
    policy = spec.get("restartPolicy")
    if policy not in RESTART_POLICIES:
        errors.append(FieldError.not_supported(f"{path}.restartPolicy", policy,
                                               RESTART_POLICIES))
    dns = spec.get("dnsPolicy")
    if dns not in DNS_POLICIES:
        errors.append(FieldError.not_supported(f"{path}.dnsPolicy", dns, DNS_POLICIES))
    grace = spec.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and not isinstance(grace, bool) and grace < 0:
        errors.append(FieldError.invalid(f"{path}.terminationGracePeriodSeconds", grace,
                                         "must be greater than or equal to 0"))
    return errors + placement_errors(spec, path)


# -- QoS -------------------------------------------------------------------------

def qos_class(spec):
    """
    The pod's QoS class, as upstream's C{ComputePodQOS}: C{BestEffort}
    without CPU or memory requests and limits, C{Guaranteed} when every
    container's CPU and memory limits are set and equal to its requests,
    C{Burstable} otherwise. Quantities are in canonical form (they parse).
    """
    requests, limits = {}, {}
    guaranteed = True
    spec = _dict(spec) or {}        # not an object: validation refuses it next
    for field in ("containers", "initContainers"):
        for container in _dicts(spec.get(field)):
            resources = _dict(container.get("resources")) or {}
            for name, quantity in (_dict(resources.get("requests")) or {}).items():
                if name in _QOS_RESOURCES:
                    value = _value(quantity)
                    if value is not None and value > 0:
                        requests[name] = requests.get(name, 0) + value
            found = set()
            for name, quantity in (_dict(resources.get("limits")) or {}).items():
                if name in _QOS_RESOURCES:
                    value = _value(quantity)
                    if value is not None and value > 0:
                        found.add(name)
                        limits[name] = limits.get(name, 0) + value
            if found != set(_QOS_RESOURCES):
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed:
        if any(limits.get(name) != value for name, value in requests.items()):
            guaranteed = False
    if guaranteed and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


# -- templates of workloads ------------------------------------------------------

def template_selector_errors(selector, template, path):
    """
    Upstream's check that a workload's selector (a L{LabelSelector}) picks
    its own pods: C{`selector` does not match template `labels`}.
    """
    labels = ((template or {}).get("metadata") or {}).get("labels") or {}
    if not selector.empty and not selector.matches(labels if isinstance(labels, dict) else {}):
        return [FieldError.invalid(f"{path}.metadata.labels", labels,
                                   "`selector` does not match template `labels`")]
    return []
