# -*- test-case-name: tests.api.test_tables -*-
"""
Printers of the core group (C{/api/v1}), after upstream's
C{pkg/printers/internalversion/printers.go}.

Binding and LimitRange have no printer upstream and get the default table;
PersistentVolume and PersistentVolumeClaim are in L{orchd.api.printers.storage}.
"""

from orchd.api.printers.base import (
    INTEGER, STRING, Column, Printer, age_column, as_dict, as_list, condition,
    container_columns, count, field, format_labels, human_duration, join_host_port,
    load_balancer_ingress, name_column, parse_time,
)

# -- pods ------------------------------------------------------------------------

#: The reason a pod gets when its node is unreachable (upstream C{NodeUnreachablePodReason}).
NODE_LOST = "NodeLost"

_POD_SUCCEEDED = [{"type": "Completed", "status": "True", "reason": "Succeeded",
                   "message": "The pod has completed successfully."}]
_POD_FAILED = [{"type": "Completed", "status": "True", "reason": "Failed",
                "message": "The pod failed."}]


def _restartable(container):
    """A sidecar: an init container that keeps running (C{restartPolicy: Always})."""
    return isinstance(container, dict) and container.get("restartPolicy") == "Always"


def _finished_at(status):
    return parse_time(as_dict(as_dict(status.get("lastState")).get("terminated")).get("finishedAt"))


def _later(current, candidate):
    if candidate is None:
        return current
    return candidate if current is None or candidate > current else current


def _exit_text(terminated, prefix=""):
    if terminated.get("signal"):
        return f"{prefix}Signal:{terminated['signal']}"
    return f"{prefix}ExitCode:{terminated.get('exitCode') or 0}"


def _condition_true(conditions, type_):
    found = condition(conditions, type_)
    return found is not None and found.get("status") == "True"


def pod_summary(row):
    """
    Upstream's C{printPod} status logic: ready containers, the STATUS reason,
    and restarts with the age of the last one.

    @return: C{(ready, total, reason, restarts_text)}.
    """
    spec, status = as_dict(row.get("spec")), as_dict(row.get("status"))
    init_specs = as_list(spec.get("initContainers"))
    by_name = {c.get("name"): c for c in init_specs if isinstance(c, dict)}
    total = len(as_list(spec.get("containers"))) + sum(1 for c in init_specs if _restartable(c))
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    for cond in as_list(status.get("conditions")):
        if as_dict(cond).get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    ready = restarts = sidecar_restarts = 0
    last_restart = sidecar_last_restart = None
    initializing = False
    for index, container in enumerate(as_list(status.get("initContainerStatuses"))):
        container = as_dict(container)
        restart_count = container.get("restartCount") or 0
        finished = _finished_at(container)
        restarts += restart_count
        last_restart = _later(last_restart, finished)
        sidecar = _restartable(by_name.get(container.get("name")))
        if sidecar:
            sidecar_restarts += restart_count
            sidecar_last_restart = _later(sidecar_last_restart, finished)
        state = as_dict(container.get("state"))
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if isinstance(terminated, dict) and (terminated.get("exitCode") or 0) == 0:
            continue
        if sidecar and container.get("started") is True:
            if container.get("ready"):
                ready += 1
            continue
        if isinstance(terminated, dict):
            if terminated.get("reason"):
                reason = "Init:" + terminated["reason"]
            else:
                reason = _exit_text(terminated, "Init:")
        elif (isinstance(waiting, dict) and waiting.get("reason")
              and waiting["reason"] != "PodInitializing"):
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break

    if not initializing or _condition_true(status.get("conditions"), "Initialized"):
        restarts, last_restart = sidecar_restarts, sidecar_last_restart
        running = False
        for container in reversed(as_list(status.get("containerStatuses"))):
            container = as_dict(container)
            restarts += container.get("restartCount") or 0
            last_restart = _later(last_restart, _finished_at(container))
            state = as_dict(container.get("state"))
            terminated, waiting = state.get("terminated"), state.get("waiting")
            if isinstance(waiting, dict) and waiting.get("reason"):
                reason = waiting["reason"]
            elif isinstance(terminated, dict) and terminated.get("reason"):
                reason = terminated["reason"]
            elif isinstance(terminated, dict):
                reason = _exit_text(terminated)
            elif container.get("ready") and isinstance(state.get("running"), dict):
                running = True
                ready += 1
        # Some container still runs: the pod is not "Completed" yet.
        if reason == "Completed" and running:
            ready_condition = _condition_true(status.get("conditions"), "Ready")
            reason = "Running" if ready_condition else "NotReady"

    if row.meta.get("deletionTimestamp"):
        if status.get("reason") == NODE_LOST:
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"

    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        restarts_text = f"{restarts} ({human_duration(row.now - last_restart)} ago)"
    return ready, total, reason, restarts_text


def _pod_ip(row):
    ips = as_list(row.get("status", "podIPs"))
    ip = as_dict(ips[0]).get("ip") if ips else row.get("status", "podIP")
    return ip or "<none>"


def _readiness_gates(row):
    gates = as_list(row.get("spec", "readinessGates"))
    if not gates:
        return "<none>"
    conditions = row.get("status", "conditions")
    met = sum(1 for gate in gates
              if _condition_true(conditions, as_dict(gate).get("conditionType")))
    return f"{met}/{len(gates)}"


def _pod_conditions(row):
    phase = row.get("status", "phase")
    if phase == "Succeeded":
        return _POD_SUCCEEDED
    if phase == "Failed":
        return _POD_FAILED
    return None


def _pod_ready(row):
    ready, total, _, _ = row.memo(pod_summary)
    return f"{ready}/{total}"


POD = Printer(
    name_column(),
    Column("Ready", STRING, "The aggregate readiness state of this pod for accepting traffic.",
           _pod_ready),
    Column("Status", STRING, "The aggregate status of the containers in this pod.",
           lambda row: row.memo(pod_summary)[2]),
    Column("Restarts", STRING,
           "The number of times the containers in this pod have been restarted and when the "
           "last container in this pod has restarted.",
           lambda row: row.memo(pod_summary)[3]),
    age_column(),
    Column("IP", STRING, "The IP address allocated to the pod.", _pod_ip, priority=1),
    Column("Node", STRING, "The node the pod is scheduled to.",
           lambda row: row.get("spec", "nodeName") or "<none>", priority=1),
    Column("Nominated Node", STRING, "The node the scheduler nominated for preemption.",
           lambda row: row.get("status", "nominatedNodeName") or "<none>", priority=1),
    Column("Readiness Gates", STRING, "Pod conditions that must be true for readiness.",
           _readiness_gates, priority=1),
    conditions=_pod_conditions,
)

POD_TEMPLATE = Printer(
    name_column(),
    *container_columns("template", "spec", priority=0),
    Column("Pod Labels", STRING, "The labels for the pod template.",
           lambda row: format_labels(row.get("template", "metadata", "labels"))),
)

REPLICATION_CONTROLLER = Printer(
    name_column(),
    Column("Desired", INTEGER, "Number of desired replicas.", field("spec", "replicas", default=1)),
    Column("Current", INTEGER, "Number of replicas observed.",
           field("status", "replicas", default=0)),
    Column("Ready", INTEGER, "Number of ready replicas.",
           field("status", "readyReplicas", default=0)),
    age_column(),
    *container_columns("spec", "template", "spec"),
    Column("Selector", STRING, "Label query over the pods that should match the replica count.",
           lambda row: format_labels(row.get("spec", "selector")), priority=1),
)

# -- services and endpoints ------------------------------------------------------


def _service_type(row):
    return row.get("spec", "type", default="ClusterIP")


def _cluster_ip(row):
    ips = as_list(row.get("spec", "clusterIPs"))
    ip = ips[0] if ips else row.get("spec", "clusterIP")
    return ip or "<none>"


def _external_ip(row):
    external = [str(ip) for ip in as_list(row.get("spec", "externalIPs"))]
    kind = _service_type(row)
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) if external else "<none>"
    if kind == "LoadBalancer":
        balancer = load_balancer_ingress(row.get("status", "loadBalancer"))
        if external:
            return ",".join(([balancer] if balancer else []) + external)
        return balancer or "<pending>"
    if kind == "ExternalName":
        return row.get("spec", "externalName", default="")
    return "<unknown>"


def _service_ports(row):
    pieces = []
    for port in as_list(row.get("spec", "ports")):
        port = as_dict(port)
        protocol = port.get("protocol") or "TCP"
        node_port = port.get("nodePort") or 0
        if node_port > 0:
            pieces.append(f"{port.get('port', 0)}:{node_port}/{protocol}")
        else:
            pieces.append(f"{port.get('port', 0)}/{protocol}")
    return ",".join(pieces) or "<none>"


SERVICE = Printer(
    name_column(),
    Column("Type", STRING, "How the service is exposed.", _service_type),
    Column("Cluster-IP", STRING, "The IP address of the service inside the cluster.", _cluster_ip),
    Column("External-IP", STRING, "IP addresses from outside the cluster that reach the service.",
           _external_ip),
    Column("Port(s)", STRING, "The ports the service exposes.", _service_ports),
    age_column(),
    Column("Selector", STRING, "Route traffic to pods with labels matching this selector.",
           lambda row: format_labels(row.get("spec", "selector")), priority=1),
)


def _endpoints(row):
    subsets = as_list(row.get("subsets"))
    if not subsets:
        return "<none>"
    shown, limit, total, more = [], 3, 0, False
    for subset in subsets:
        subset = as_dict(subset)
        addresses = [as_dict(a).get("ip", "") for a in as_list(subset.get("addresses"))]
        ports = as_list(subset.get("ports"))
        # A headless service may have no ports: list the bare addresses.
        targets = ([(ip, None) for ip in addresses] if not ports else
                   [(ip, as_dict(p).get("port", 0)) for p in ports for ip in addresses])
        total += len(targets)
        for ip, port in targets:
            if len(shown) == limit:
                more = True
                break
            shown.append(ip if port is None else join_host_port(ip, port))
    text = ",".join(shown)
    return f"{text} + {total - limit} more..." if more else text


ENDPOINTS = Printer(
    name_column(),
    Column("Endpoints", STRING, "The addresses and ports of the endpoints.", _endpoints),
    age_column(),
)

# -- nodes and namespaces ---------------------------------------------------------

#: [renamed] Node role labels: C{node-role.orch.io/<role>} and C{orch.io/role=<role>}.
NODE_ROLE_PREFIX = "node-role.orch.io/"
NODE_ROLE_LABEL = "orch.io/role"


def node_status(row):
    """C{Ready} / C{NotReady} / C{Unknown}, then C{SchedulingDisabled} when cordoned."""
    ready = None
    for cond in as_list(row.get("status", "conditions")):
        if as_dict(cond).get("type") == "Ready":
            ready = cond  # the last one wins, as upstream's map does
    if ready is None:
        status = ["Unknown"]
    else:
        status = ["Ready" if ready.get("status") == "True" else "NotReady"]
    if row.get("spec", "unschedulable"):
        status.append("SchedulingDisabled")
    return ",".join(status)


def node_roles(row):
    roles = set()
    for key, value in as_dict(row.meta.get("labels")).items():
        if key.startswith(NODE_ROLE_PREFIX):
            if key[len(NODE_ROLE_PREFIX):]:
                roles.add(key[len(NODE_ROLE_PREFIX):])
        elif key == NODE_ROLE_LABEL and value:
            roles.add(value)
    return ",".join(sorted(roles)) or "<none>"


def _node_address(kind):
    def cell(row):
        for address in as_list(row.get("status", "addresses")):
            if as_dict(address).get("type") == kind:
                return address.get("address", "")
        return "<none>"
    return cell


def _node_info(key):
    return lambda row: row.get("status", "nodeInfo", key) or "<unknown>"


NODE = Printer(
    name_column(),
    Column("Status", STRING, "The status of the node", node_status),
    Column("Roles", STRING, "The roles of the node", node_roles),
    age_column(),
    Column("Version", STRING, "The version of the node agent.",
           field("status", "nodeInfo", "kubeletVersion")),
    Column("Internal-IP", STRING, "The first internal address of the node.",
           _node_address("InternalIP"), priority=1),
    Column("External-IP", STRING, "The first external address of the node.",
           _node_address("ExternalIP"), priority=1),
    Column("OS-Image", STRING, "The operating system image of the node.",
           _node_info("osImage"), priority=1),
    Column("Kernel-Version", STRING, "The kernel version of the node.",
           _node_info("kernelVersion"), priority=1),
    Column("Container-Runtime", STRING, "The container runtime and its version.",
           _node_info("containerRuntimeVersion"), priority=1),
)

NAMESPACE = Printer(
    name_column(),
    Column("Status", STRING, "The status of the namespace",
           field("status", "phase", default="Active")),
    age_column(),
)

# -- configuration ----------------------------------------------------------------

SECRET = Printer(
    name_column(),
    Column("Type", STRING, "Used to facilitate programmatic handling of secret data.",
           field("type", default="Opaque")),
    Column("Data", STRING, "The number of keys in the secret's data.", count("data")),
    age_column(),
)

CONFIG_MAP = Printer(
    name_column(),
    Column("Data", STRING, "The number of keys in data and binaryData.",
           lambda row: len(as_dict(row.get("data"))) + len(as_dict(row.get("binaryData")))),
    age_column(),
)

SERVICE_ACCOUNT = Printer(
    name_column(),
    Column("Secrets", STRING, "The number of secrets the service account references.",
           count("secrets")),
    age_column(),
)


def _quota_columns(limits):
    def cell(row):
        hard = as_dict(row.get("status", "hard"))
        used = as_dict(row.get("status", "used"))
        parts = []
        for resource in sorted(hard):
            pieces = resource.split(".")
            if (len(pieces) > 1 and pieces[0] == "limits") == limits:
                parts.append(f"{resource}: {used.get(resource, '0')}/{hard[resource]}")
        return ", ".join(parts)
    return cell


RESOURCE_QUOTA = Printer(
    name_column(),
    Column("Request", STRING, "Request represents a minimum amount of cpu/memory that a "
                              "container may consume.", _quota_columns(limits=False)),
    Column("Limit", STRING, "Limits control the maximum amount of cpu/memory that a container "
                            "may use independent of contention on the node.",
           _quota_columns(limits=True)),
    age_column(),
)


def _component_condition(row):
    cond = condition(row.get("conditions"), "Healthy")
    if cond is None:
        return "Unknown", "", ""
    status = "Healthy" if cond.get("status") == "True" else "Unhealthy"
    return status, cond.get("message", ""), cond.get("error", "")


COMPONENT_STATUS = Printer(
    name_column(),
    Column("Status", STRING, "Status of the component conditions",
           lambda row: row.memo(_component_condition)[0]),
    Column("Message", STRING, "Message of the component conditions",
           lambda row: row.memo(_component_condition)[1]),
    Column("Error", STRING, "Error of the component conditions",
           lambda row: row.memo(_component_condition)[2]),
)
