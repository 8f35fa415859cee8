# -*- test-case-name: tests.registry.test_binding -*-
"""
Binding a pod to a node: C{POST .../pods/<name>/binding} and the
C{bindings} collection (C{POST .../namespaces/<ns>/bindings}, the pod named
by the Binding's C{metadata.name}).

Follows upstream's C{BindingREST} (C{pkg/registry/core/pod/storage/storage.go}):
the Binding is validated (C{target.kind} Node or empty, C{target.name}
required), admitted as a create of C{pods/binding}, then the pod is
rewritten in storage, outside the pod strategy: C{spec.nodeName} set, the
Binding's annotations merged, the C{PodScheduled=True} condition set. A pod
already bound, being deleted or with scheduling gates is a 409 naming
C{pods/binding}; the Binding's C{uid} and C{resourceVersion} are
preconditions on the pod. The answer is upstream's: 201 with a C{Status}
of C{Success}, not the Binding.
"""

from zope.interface import implementer

from orchd.admission.interfaces import CREATE, AdmissionAttributes
from orchd.api.errors import FieldError, StatusError
from orchd.api.kinds import subresource_kind
from orchd.api.meta import rfc3339
from orchd.api.strategic import json_kind
from orchd.registry.catalog import IConnector
from orchd.registry.options import DeleteOptions

POD_SCHEDULED = "PodScheduled"
_BINDING = "pods/binding"


def binding_resources():
    """
    The Catalog's entries serving bindings, sharing one L{PodBinder}:
    C{(virtual, connectors)}, for its C{virtual} and C{connectors} arguments.
    """
    binder = PodBinder()
    return ({("", "bindings"): lambda info: BindingsCollection(info, binder)},
            {("", "pods", "binding"): binder.attach})


def set_pod_condition(status, condition):
    """
    Put C{condition} into C{status["conditions"]}, as upstream's
    C{UpdatePodCondition}: it replaces the condition of its type, keeping
    that one's C{lastTransitionTime} when the status did not change.

    @return: True when the conditions changed.
    """
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        conditions = status["conditions"] = []
    for index, old in enumerate(conditions):
        if isinstance(old, dict) and old.get("type") == condition["type"]:
            if old.get("status") == condition["status"]:
                condition["lastTransitionTime"] = old.get("lastTransitionTime")
            if old == condition:
                return False
            conditions[index] = condition
            return True
    conditions.append(condition)
    return True


@implementer(IConnector)
class PodBinder:
    """
    C{pods/binding}, and the one way both binding paths write a pod.

    @ivar info: the Binding's L{KindInfo} as the subresource takes it.
    """

    info = None
    clock = None

    def __init__(self):
        self._pods = None

    def attach(self, catalog):
        """The Catalog's connector factory: serve its pods."""
        self._pods = catalog.resource("", "pods")
        self.info = subresource_kind(self._pods.info, "binding")
        self.clock = catalog.clock
        return self

    async def connect(self, ctx, name, obj):
        meta = _metadata(obj)
        if meta.get("name") is None or meta.get("name") == "":
            meta["name"] = name
        elif meta["name"] != name:
            raise StatusError.bad_request("name in URL does not match name in Binding object")
        return await self.bind(ctx, obj)

    async def bind(self, ctx, binding):
        """
        Bind the pod C{binding} names (in C{ctx}'s namespace) to its target.

        @return: the C{Status} to answer 201 with.
        @raise StatusError: 400 for a malformed Binding, 422 for an invalid
            one, 404 for a missing pod, 409 for one that cannot be bound.
        """
        meta = _metadata(binding)
        name = meta.get("name")
        if not name:
            raise StatusError.invalid("Binding", "", "", [FieldError.required(
                "metadata.name", "name or generateName is required")])
        namespace = meta.get("namespace")
        if namespace and namespace != ctx.namespace:
            raise StatusError.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request")
        meta["namespace"] = ctx.namespace
        target = _target(binding)
        errors = []
        if target.get("kind") and target["kind"] != "Node":
            errors.append(FieldError.not_supported("target.kind", target["kind"],
                                                   ["Node", "<empty>"]))
        if not target.get("name"):
            errors.append(FieldError.required("target.name"))
        if errors:
            raise StatusError.invalid("Binding", "", name, errors)
        pods = self._pods
        attributes = AdmissionAttributes.of_request(ctx, CREATE, pods.info, name, binding, None,
                                                    "binding")
        await pods.admission.admit(attributes)
        await pods.admission.validate(attributes)
        node = target["name"]
        annotations = _annotations(meta)
        now = rfc3339(self.clock.seconds())

        def assign(pod):
            pod_meta = pod["metadata"]
            if pod_meta.get("deletionTimestamp"):
                raise StatusError.conflict(
                    _BINDING, "", name,
                    f"pod {name} is being deleted, cannot be assigned to a host")
            spec = pod.get("spec")
            if not isinstance(spec, dict):
                spec = pod["spec"] = {}
            if spec.get("nodeName"):
                raise StatusError.conflict(
                    _BINDING, "", name,
                    f'pod {name} is already assigned to node "{spec["nodeName"]}"')
            if spec.get("schedulingGates"):
                raise StatusError.conflict(
                    _BINDING, "", name, f"pod {name} has non-empty .spec.schedulingGates")
            spec["nodeName"] = node
            if annotations:
                if not isinstance(pod_meta.get("annotations"), dict):
                    pod_meta["annotations"] = {}
                pod_meta["annotations"].update(annotations)
            status = pod.get("status")
            if not isinstance(status, dict):
                status = pod["status"] = {}
            set_pod_condition(status, {"type": POD_SCHEDULED, "status": "True",
                                       "lastProbeTime": None, "lastTransitionTime": now})
            return pod

        preconditions = None
        if meta.get("uid") or meta.get("resourceVersion"):
            preconditions = DeleteOptions(uid=meta.get("uid") or None,
                                          resource_version=meta.get("resourceVersion") or None)
        cache = pods.cache
        suggestion = cache.get(pods.info.key(ctx.namespace, name)) if cache is not None else None
        await pods.rewrite(ctx, name, assign, preconditions, suggestion)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "code": 201}


class BindingsCollection:
    """
    The C{bindings} collection: a create binds the pod the Binding names
    (upstream's C{LegacyBindingREST}).
    """

    def __init__(self, info, binder):
        self.info = info
        self._binder = binder

    @property
    def clock(self):
        return self._binder.clock

    async def create(self, ctx, obj):
        return await self._binder.bind(ctx, obj)


def _metadata(obj):
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    elif not isinstance(meta, dict):
        raise _not_of_type(meta, "Binding.metadata", "v1.ObjectMeta")
    for field in ("name", "namespace", "uid", "resourceVersion"):
        value = meta.get(field)
        if value is not None and not isinstance(value, str):
            raise _not_of_type(value, f"ObjectMeta.metadata.{field}", "string")
    return meta


def _target(binding):
    target = binding.get("target")
    if target is None:
        return {}
    if not isinstance(target, dict):
        raise _not_of_type(target, "Binding.target", "v1.ObjectReference")
    for field, value in target.items():
        if value is not None and not isinstance(value, str):
            raise _not_of_type(value, f"ObjectReference.target.{field}", "string")
    return target


def _annotations(meta):
    annotations = meta.get("annotations")
    if annotations is None:
        return {}
    if not isinstance(annotations, dict):
        raise _not_of_type(annotations, "ObjectMeta.metadata.annotations",
                           "map[string]string")
    for value in annotations.values():
        if not isinstance(value, str):
            raise _not_of_type(value, "ObjectMeta.metadata.annotations", "string")
    return annotations


def _not_of_type(value, field, go_type):
    """Upstream's decoding error for a field of the wrong JSON type (400)."""
    return StatusError.bad_request(
        f"json: cannot unmarshal {json_kind(value)} into Go struct field {field} of type "
        f"{go_type}")
