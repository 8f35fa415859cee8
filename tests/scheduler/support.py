"""Builders of nodes and pods for the scheduler's tests."""

from orchd.scheduler.cache import NodeInfo, NodeSpec, SchedulerCache
from orchd.scheduler.podinfo import PodInfo


def node(name, cpu="4", memory="8Gi", pods="110", labels=None, taints=None,
         unschedulable=False, **allocatable):
    """A Node object with C{status.allocatable}."""
    spec = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    resources = {"cpu": cpu, "memory": memory, "pods": pods}
    resources.update({key.replace("_", "-"): value for key, value in allocatable.items()})
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": dict({"orch.io/hostname": name},
                                                       **(labels or {}))},
            "spec": spec, "status": {"allocatable": resources, "capacity": dict(resources)}}


def pod(name="web", namespace="default", cpu=None, memory=None, node_name=None, owner=None,
        ports=(), tolerations=None, node_selector=None, affinity=None, phase=None, uid=None,
        **spec):
    """A Pod object with one container requesting C{cpu} and C{memory}."""
    requests = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    container = {"name": "c", "image": "nginx"}
    if requests:
        container["resources"] = {"requests": requests}
    if ports:
        container["ports"] = [dict({"containerPort": p.get("hostPort", 80)}, **p) for p in ports]
    body = dict({"containers": [container]}, **spec)
    if node_name:
        body["nodeName"] = node_name
    if tolerations is not None:
        body["tolerations"] = tolerations
    if node_selector is not None:
        body["nodeSelector"] = node_selector
    if affinity is not None:
        body["affinity"] = affinity
    meta = {"name": name, "namespace": namespace, "uid": uid or f"uid-{namespace}-{name}"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                    "name": owner, "uid": owner, "controller": True}]
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}
    if phase:
        obj["status"] = {"phase": phase}
    return obj


def pod_info(*args, **kwargs):
    return PodInfo(pod(*args, **kwargs))


def node_info(*args, bound=(), **kwargs):
    """A L{NodeInfo} of C{node(...)} with C{bound} (Pod objects) counted on it."""
    spec = NodeSpec(node(*args, **kwargs))
    info = NodeInfo(spec.name)
    info.node = spec
    for obj in bound:
        info.add(PodInfo(obj))
    return info


def cache_of(*nodes, bound=()):
    """A L{SchedulerCache} with C{nodes} (Node objects) and C{bound} pods."""
    cache = SchedulerCache()
    for obj in nodes:
        cache.set_node(NodeSpec(obj))
    for obj in bound:
        cache.set_pod(PodInfo(obj))
    return cache
