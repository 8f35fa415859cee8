# -*- test-case-name: tests.api.test_schemas -*-
"""
Full schemas of core (v1) kinds: ConfigMap, Secret, Namespace,
ServiceAccount, Event, Service and Node, and the types they use.

Node status and its node-reported parts (system info, features) grow with
every node agent release, so those levels keep unknown fields.
"""

from orchd.api.schemadefs_base import (
    CONDITION, CORE, INT_OR_STRING, QUANTITY, KindSchema, array, boolean, int32, integer,
    micro_time, obj, ref, string, string_map, strings, timestamp,
)

OBJECT_REFERENCE = CORE + "ObjectReference"
EVENT_SOURCE = CORE + "EventSource"

_OBJECT_REFERENCE = obj(
    {
        "apiVersion": string("API version of the referent."),
        "fieldPath": string("A part of the referent, such as spec.containers{name}, "
                            "when the reference is to less than the whole object."),
        "kind": string("Kind of the referent."),
        "name": string("Name of the referent."),
        "namespace": string("Namespace of the referent."),
        "resourceVersion": string("The resourceVersion of the referent this reference is to."),
        "uid": string("UID of the referent."),
    },
    description="Enough information to inspect or change the referred object.",
    map_type="atomic",
)

_LOCAL_OBJECT_REFERENCE = obj(
    {"name": string("Name of the referent in the same namespace.")},
    description="A reference to an object in the same namespace.",
    map_type="atomic",
)

_QUANTITIES = {"type": "object", "additionalProperties": {"$ref": QUANTITY}}


def _quantities(description):
    return {**_QUANTITIES, "description": description}


# Namespace ---------------------------------------------------------------------

_NAMESPACE = {
    CORE + "NamespaceSpec": obj(
        {"finalizers": strings("Opaque values that must all be removed before the namespace "
                               "is removed from storage.")},
        description="The desired behaviour of a namespace.",
    ),
    CORE + "NamespaceStatus": obj(
        {
            "conditions": array(ref(CORE + "NamespaceCondition"),
                                "Latest observations of the namespace.",
                                list_type="map", list_map_keys=["type"]),
            "phase": string("Active or Terminating.", enum=("Active", "Terminating")),
        },
        description="The observed state of a namespace.",
    ),
    CORE + "NamespaceCondition": obj(
        {
            "lastTransitionTime": timestamp("When the condition last changed status."),
            "message": string("Human-readable details of the transition."),
            "reason": string("CamelCase reason of the last transition."),
            "status": string("True, False or Unknown."),
            "type": string("Type of the condition."),
        },
        required=("type", "status"),
        description="One aspect of the state of a namespace.",
    ),
}

# Event -------------------------------------------------------------------------

_EVENT = {
    EVENT_SOURCE: obj(
        {"component": string("Component that generated the event."),
         "host": string("Node on which the event was generated.")},
        description="Where an event came from.",
    ),
    CORE + "EventSeries": obj(
        {"count": int32("Number of occurrences in the series up to the last heartbeat."),
         "lastObservedTime": micro_time("When the last event of the series was seen.")},
        description="A series of events that happened repeatedly.",
    ),
}

# Service -----------------------------------------------------------------------

_SERVICE = {
    CORE + "ServiceSpec": obj(
        {
            "allocateLoadBalancerNodePorts": boolean(
                "Whether node ports are allocated for LoadBalancer services; default true."),
            "clusterIP": string("The virtual IP of the service: usually assigned; None makes "
                                "a headless service."),
            "clusterIPs": strings("The virtual IPs of the service, one per IP family; the "
                                  "first equals clusterIP."),
            "externalIPs": strings("IPs, not managed by the cluster, on which nodes also "
                                   "accept traffic for the service."),
            "externalName": string("DNS name the service aliases; requires type ExternalName."),
            "externalTrafficPolicy": string(
                "Cluster or Local: how nodes route traffic received on external addresses "
                "(node ports, external and load-balancer IPs)."),
            "healthCheckNodePort": int32("Node port of the health check of LoadBalancer "
                                         "services with externalTrafficPolicy Local."),
            "internalTrafficPolicy": string(
                "Cluster or Local: how nodes route traffic received on the cluster IP."),
            "ipFamilies": strings("IP families (IPv4, IPv6) of the service, in order."),
            "ipFamilyPolicy": string("SingleStack, PreferDualStack or RequireDualStack."),
            "loadBalancerClass": string("The load balancer implementation of a LoadBalancer "
                                        "service; cannot be changed once set."),
            "loadBalancerIP": string("Deprecated: requested IP of the load balancer."),
            "loadBalancerSourceRanges": strings("Client CIDRs the load balancer admits."),
            "ports": array(ref(CORE + "ServicePort"), "The ports the service exposes.",
                           list_type="map", list_map_keys=["port", "protocol"]),
            "publishNotReadyAddresses": boolean(
                "Treat every endpoint as ready, whatever its pods report."),
            "selector": string_map("Pods with these labels receive the traffic.",
                                   map_type="atomic"),
            "sessionAffinity": string(
                "ClientIP or None (the default); ClientIP sends each client IP to one "
                "backend."),
            "sessionAffinityConfig": ref(CORE + "SessionAffinityConfig",
                                         "Settings of session affinity."),
            "trafficDistribution": string("A preference for how traffic is spread over "
                                          "endpoints, such as PreferClose."),
            "type": string("ClusterIP (the default), NodePort, LoadBalancer or ExternalName."),
        },
        description="The desired behaviour of a service.",
    ),
    CORE + "ServicePort": obj(
        {
            "appProtocol": string("Application protocol of the port, such as http or https."),
            "name": string("Name of the port, unique within the service."),
            "nodePort": int32("Port on every node for NodePort and LoadBalancer services; "
                              "usually assigned."),
            "port": int32("The port the service exposes."),
            "protocol": string("TCP (the default), UDP or SCTP."),
            "targetPort": ref(INT_OR_STRING, "Number or name of the port on the pods; "
                                             "defaults to port."),
        },
        required=("port",),
        description="One port of a service.",
    ),
    CORE + "SessionAffinityConfig": obj(
        {"clientIP": ref(CORE + "ClientIPConfig", "Settings of client IP affinity.")},
        description="Settings of session affinity.",
    ),
    CORE + "ClientIPConfig": obj(
        {"timeoutSeconds": int32("Seconds a client sticks to a backend: 1 to 86400, "
                                 "default 10800 (3 hours).")},
        description="Settings of client IP based session affinity.",
    ),
    CORE + "ServiceStatus": obj(
        {
            "conditions": array(ref(CONDITION), "Current state of the service.",
                                list_type="map", list_map_keys=["type"]),
            "loadBalancer": ref(CORE + "LoadBalancerStatus",
                                "The load balancer, when there is one."),
        },
        description="The observed state of a service.",
    ),
    CORE + "LoadBalancerStatus": obj(
        {"ingress": array(ref(CORE + "LoadBalancerIngress"),
                          "The ingress points of the load balancer.", list_type="atomic")},
        description="The state of a load balancer.",
    ),
    CORE + "LoadBalancerIngress": obj(
        {
            "hostname": string("DNS name of the ingress point."),
            "ip": string("IP of the ingress point."),
            "ipMode": string("VIP or Proxy: how traffic for the IP reaches the backends."),
            "ports": array(ref(CORE + "PortStatus"), "Status of the service ports.",
                           list_type="atomic"),
        },
        description="An ingress point of a load balancer.",
    ),
    CORE + "PortStatus": obj(
        {
            "error": string("Problem with the port, in CamelCase, if any."),
            "port": int32("Port number of the service port."),
            "protocol": string("TCP, UDP or SCTP."),
        },
        required=("port", "protocol"),
        description="The state of one service port.",
    ),
}

# Node --------------------------------------------------------------------------

_NODE = {
    CORE + "NodeSpec": obj(
        {
            "configSource": ref(CORE + "NodeConfigSource", "Deprecated and unused."),
            "externalID": string("Deprecated."),
            "podCIDR": string("The pod IP range assigned to the node."),
            "podCIDRs": strings("The pod IP ranges of the node, at most one per IP family; "
                                "the first equals podCIDR.", list_type="set"),
            "providerID": string("ID of the node from the cloud provider: "
                                 "<provider>://<id>."),
            "taints": array(ref(CORE + "Taint"), "The taints of the node.",
                            list_type="atomic"),
            "unschedulable": boolean("If true, new pods are not scheduled on the node "
                                     "(cordoned)."),
        },
        description="The attributes a node is created with.",
    ),
    CORE + "Taint": obj(
        {
            "effect": string("NoSchedule, PreferNoSchedule or NoExecute."),
            "key": string("The taint key."),
            "timeAdded": timestamp("When the taint was added; NoExecute taints only."),
            "value": string("The taint value."),
        },
        required=("key", "effect"),
        description="Repels pods that do not tolerate it from the node.",
    ),
    CORE + "NodeConfigSource": obj(
        {"configMap": ref(CORE + "ConfigMapNodeConfigSource", "A config map source.")},
        description="Deprecated: a source of node configuration.",
    ),
    CORE + "ConfigMapNodeConfigSource": obj(
        {
            "kubeletConfigKey": string("Key of the config map holding the configuration."),
            "name": string("Name of the config map."),
            "namespace": string("Namespace of the config map."),
            "resourceVersion": string("resourceVersion of the config map."),
            "uid": string("UID of the config map."),
        },
        required=("namespace", "name", "kubeletConfigKey"),
        description="Deprecated: a config map as a node configuration source.",
    ),
    CORE + "NodeStatus": obj(
        {
            "addresses": array(ref(CORE + "NodeAddress"),
                               "Addresses of the node: Hostname, ExternalIP, InternalIP.",
                               list_type="map", list_map_keys=["type"]),
            "allocatable": _quantities("The part of capacity available to ordinary pods."),
            "capacity": _quantities("Total resources of the node: cpu, memory, pods..."),
            "conditions": array(ref(CORE + "NodeCondition"),
                                "Observed conditions: Ready, DiskPressure, MemoryPressure, "
                                "PIDPressure, NetworkUnavailable.",
                                list_type="map", list_map_keys=["type"]),
            "config": ref(CORE + "NodeConfigStatus", "Deprecated: state of dynamic config."),
            "daemonEndpoints": ref(CORE + "NodeDaemonEndpoints",
                                   "Endpoints of daemons running on the node."),
            "declaredFeatures": strings("Features the node declares it supports."),
            "features": ref(CORE + "NodeFeatures", "Features of the container runtime."),
            "images": array(ref(CORE + "ContainerImage"), "Container images on the node.",
                            list_type="atomic"),
            "nodeInfo": ref(CORE + "NodeSystemInfo",
                            "General information: kernel, OS, runtime and agent versions."),
            "phase": string("Deprecated and never set."),
            "runtimeHandlers": array(ref(CORE + "NodeRuntimeHandler"),
                                     "Runtime handlers of the node.", list_type="atomic"),
            "volumesAttached": array(ref(CORE + "AttachedVolume"),
                                     "Volumes attached to the node.", list_type="atomic"),
            "volumesInUse": strings("Attachable volumes mounted on the node."),
        },
        description="The observed state of a node, reported by its agent.",
        preserve_unknown_fields=True,
    ),
    CORE + "NodeAddress": obj(
        {"address": string("The address."),
         "type": string("Hostname, ExternalIP or InternalIP.")},
        required=("type", "address"),
        description="One address of a node.",
    ),
    CORE + "NodeCondition": obj(
        {
            "lastHeartbeatTime": timestamp("When the condition was last reported."),
            "lastTransitionTime": timestamp("When the condition last changed status."),
            "message": string("Human-readable details of the transition."),
            "reason": string("Short reason of the last transition."),
            "status": string("True, False or Unknown."),
            "type": string("Ready, DiskPressure, MemoryPressure, PIDPressure or "
                           "NetworkUnavailable."),
        },
        required=("type", "status"),
        description="One condition of a node.",
    ),
    CORE + "NodeConfigStatus": obj(
        {
            "active": ref(CORE + "NodeConfigSource", "The configuration in use."),
            "assigned": ref(CORE + "NodeConfigSource", "The configuration to be used."),
            "error": string("Problem reconciling the configuration."),
            "lastKnownGood": ref(CORE + "NodeConfigSource", "The fallback configuration."),
        },
        description="Deprecated: state of dynamic node configuration.",
    ),
    CORE + "NodeDaemonEndpoints": obj(
        {"kubeletEndpoint": ref(CORE + "DaemonEndpoint", "Endpoint of the node agent.")},
        description="Ports opened by daemons of the node.",
    ),
    CORE + "DaemonEndpoint": obj(
        {"Port": int32("Port number of the endpoint.")},
        required=("Port",),
        description="A port a daemon listens on.",
    ),
    CORE + "NodeFeatures": obj(
        {"supplementalGroupsPolicy": boolean("The runtime supports SupplementalGroupsPolicy "
                                             "and ContainerUser.")},
        description="Features of the container runtime of the node.",
        preserve_unknown_fields=True,
    ),
    CORE + "ContainerImage": obj(
        {"names": strings("Names of the image, such as registry/name:tag."),
         "sizeBytes": integer("Size of the image in bytes.")},
        description="A container image on a node.",
    ),
    CORE + "NodeSystemInfo": obj(
        {
            "architecture": string("Architecture of the node."),
            "bootID": string("Boot ID of the node."),
            "containerRuntimeVersion": string("Runtime name and version, "
                                              "such as containerd://1.7.2."),
            "kernelVersion": string("Kernel version (uname -r)."),
            "kubeProxyVersion": string("Deprecated: version of the node proxy."),
            "kubeletVersion": string("Version of the node agent."),
            "machineID": string("Machine ID of the node."),
            "operatingSystem": string("Operating system of the node."),
            "osImage": string("OS image, from /etc/os-release."),
            "swap": ref(CORE + "NodeSwapStatus", "Swap memory of the node."),
            "systemUUID": string("System UUID of the node."),
        },
        required=("machineID", "systemUUID", "bootID", "kernelVersion", "osImage",
                  "containerRuntimeVersion", "kubeletVersion", "kubeProxyVersion",
                  "operatingSystem", "architecture"),
        description="Identifiers and versions reported by the node.",
        preserve_unknown_fields=True,
    ),
    CORE + "NodeSwapStatus": obj(
        {"capacity": integer("Total swap memory in bytes.")},
        description="Swap memory of a node.",
    ),
    CORE + "NodeRuntimeHandler": obj(
        {"features": ref(CORE + "NodeRuntimeHandlerFeatures", "Supported features."),
         "name": string("Name of the handler; empty for the default handler.")},
        description="A runtime handler of the node.",
    ),
    CORE + "NodeRuntimeHandlerFeatures": obj(
        {"recursiveReadOnlyMounts": boolean("Supports recursive read-only mounts."),
         "userNamespaces": boolean("Supports user namespaces, volumes included.")},
        description="Features of a runtime handler.",
        preserve_unknown_fields=True,
    ),
    CORE + "AttachedVolume": obj(
        {"devicePath": string("Where the volume should be available."),
         "name": string("Name of the attached volume.")},
        required=("name", "devicePath"),
        description="A volume attached to a node.",
    ),
}

#: Named definitions of this module.
DEFINITIONS = {
    OBJECT_REFERENCE: _OBJECT_REFERENCE,
    CORE + "LocalObjectReference": _LOCAL_OBJECT_REFERENCE,
    **_NAMESPACE,
    **_EVENT,
    **_SERVICE,
    **_NODE,
}

# Kinds described field by field (core v1), named in their rows of the kinds table.

CONFIG_MAP = KindSchema(
    {
        "binaryData": string_map("Binary values, base64-encoded; keys must not also be "
                                 "in data.", fmt="byte"),
        "data": string_map("Configuration values, as UTF-8 strings."),
        "immutable": boolean("If true, data cannot be changed after creation."),
    },
    description="Configuration data for pods to consume.",
)
SECRET = KindSchema(
    {
        "data": string_map("Secret values, base64-encoded.", fmt="byte"),
        "immutable": boolean("If true, data cannot be changed after creation."),
        "stringData": string_map("Write-only convenience: plain-text values merged into "
                                 "data, taking precedence."),
        "type": string("Used to handle the secret data programmatically, such as "
                       "Opaque, orch.io/service-account-token or "
                       "bootstrap.orch.io/token."),
    },
    description="Secret data, such as passwords, tokens or keys.",
)
NAMESPACE = KindSchema(
    {
        "spec": ref(CORE + "NamespaceSpec", "The desired behaviour of the namespace."),
        "status": ref(CORE + "NamespaceStatus", "The observed status of the namespace."),
    },
    description="A scope for names.",
)
SERVICE_ACCOUNT = KindSchema(
    {
        "automountServiceAccountToken": boolean(
            "Whether pods running as this account get an API token mounted; pods may "
            "override it."),
        "imagePullSecrets": array(ref(CORE + "LocalObjectReference"),
                                  "Secrets for pulling the images of pods using the "
                                  "account.", list_type="atomic"),
        "secrets": array(ref(OBJECT_REFERENCE),
                         "Secrets in the same namespace that pods of the account may use.",
                         list_type="map", list_map_keys=["name"]),
    },
    description="An identity for processes that run in pods.",
)
EVENT = KindSchema(
    {
        "action": string("What was done, or failed, about the object."),
        "count": int32("Number of times the event occurred."),
        "eventTime": micro_time("When the event was first observed."),
        "firstTimestamp": timestamp("When the event was first recorded."),
        "involvedObject": ref(OBJECT_REFERENCE, "The object the event is about."),
        "lastTimestamp": timestamp("When the event most recently occurred."),
        "message": string("Human-readable description of the event."),
        "reason": string("Short, machine-understandable reason for the event."),
        "related": ref(OBJECT_REFERENCE, "A secondary object of the event."),
        "reportingComponent": string("Controller that emitted the event."),
        "reportingInstance": string("ID of the controller instance."),
        "series": ref(CORE + "EventSeries", "The series the event belongs to, if any."),
        "source": ref(EVENT_SOURCE, "Component reporting the event."),
        "type": string("Normal or Warning."),
    },
    required=("metadata", "involvedObject"),
    description="A report of an event somewhere in the cluster.",
)
SERVICE = KindSchema(
    {
        "spec": ref(CORE + "ServiceSpec", "The desired behaviour of the service."),
        "status": ref(CORE + "ServiceStatus", "The observed status of the service."),
    },
    description="A named abstraction of a software service: ports, and the pods that "
                "answer on them.",
)
NODE = KindSchema(
    {
        "spec": ref(CORE + "NodeSpec", "The desired behaviour of the node."),
        "status": ref(CORE + "NodeStatus", "The observed status of the node."),
    },
    description="A worker node of the cluster.",
)
