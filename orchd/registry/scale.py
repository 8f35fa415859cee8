# -*- test-case-name: tests.registry.test_scale -*-
"""
C{<workload>/<name>/scale}: the C{autoscaling/v1} Scale of Deployments,
ReplicaSets, StatefulSets and ReplicationControllers (kk
C{pkg/registry/apps/deployment/storage/storage.go ScaleREST}).

A Scale is a view of its parent: the parent's name, namespace, uid,
resourceVersion and creation time, C{spec.replicas}, and C{status.replicas}
with the parent's selector as label selector text (C{app=web}). Get reads
the parent; update, the three patch types and server-side apply change the
parent's C{spec.replicas} and nothing else, through the parent's own
guaranteed update: a resourceVersion in the Scale is a precondition on the
parent (409 when it moved on), a patch is re-applied to the state that won
a race, and the parent's admission, validation and managed fields apply
(the write is recorded under the C{scale} subresource, as upstream). A
negative count is refused as upstream refuses it, for the Scale.
"""

from zope.interface import implementer

from orchd.api.errors import FieldError, StatusError
from orchd.api.kinds import subresource_kind
from orchd.api.printers.workloads import SCALE
from orchd.registry.catalog import IConnector
from orchd.registry.kinds.workloads import selector_text

#: The resources with a C{scale} subresource: C{(group, resource)}.
SCALABLE = (("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets"),
            ("", "replicationcontrollers"))
_SCALE_GROUP = "autoscaling"


def scale_connectors():
    """The Catalog's C{connectors} entries of every C{*/scale}: C{{key: factory(catalog)}}."""
    return {(group, resource, "scale"):
            (lambda catalog, group=group, resource=resource:
             ScaleConnector(catalog, group, resource))
            for group, resource in SCALABLE}


class ScalePaths:
    """
    Where a kind keeps what its Scale shows: dotted paths from the object
    root (a CRD's C{.spec.replicas} without the leading dot).

    @ivar selector: the path of the label selector text, or None for none.
    @ivar workload: the selector is a workload's C{spec.selector} object,
        written as text.
    """

    __slots__ = ("spec", "status", "selector", "workload")

    def __init__(self, spec="spec.replicas", status="status.replicas", selector=None,
                 workload=False):
        self.spec = tuple(spec.split("."))
        self.status = tuple(status.split("."))
        self.selector = tuple(selector.split(".")) if selector else None
        self.workload = workload

    def read(self, obj, path):
        for part in path:
            if not isinstance(obj, dict):
                return None
            obj = obj.get(part)
        return obj

    def write_spec(self, obj, value):
        """Set the spec replicas of C{obj} to C{value}, making the objects on the way."""
        for part in self.spec[:-1]:
            child = obj.get(part)
            if not isinstance(child, dict):
                child = obj[part] = {}
            obj = child
        obj[self.spec[-1]] = value


WORKLOADS = ScalePaths(workload=True)


def to_scale(parent, paths=WORKLOADS):
    """The Scale of a workload as stored (C{spec.replicas} 0 is left out, as upstream)."""
    meta = parent.get("metadata") or {}
    scale_meta = {key: meta[key] for key in ("name", "namespace", "uid", "resourceVersion",
                                            "creationTimestamp") if meta.get(key) is not None}
    replicas = paths.read(parent, paths.spec)
    status_replicas = paths.read(parent, paths.status)
    scale_status = {"replicas": status_replicas if isinstance(status_replicas, int) else 0}
    if paths.workload:
        selector = selector_text(parent)
    elif paths.selector is None:
        selector = ""
    else:
        selector = paths.read(parent, paths.selector)
        selector = selector if isinstance(selector, str) else ""
    if selector:
        scale_status["selector"] = selector
    return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": scale_meta,
            "spec": {"replicas": replicas} if replicas else {}, "status": scale_status}


@implementer(IConnector)
class ScaleConnector:
    """
    The C{scale} subresource of one resource.

    @param catalog: where the parent resource is served.
    @param parent: the parent's KindInfo when the connector serves one
        version of it (a custom resource's), else None: its preferred version.
    @param paths: the L{ScalePaths} of the parent.
    """

    def __init__(self, catalog, group, resource, parent=None, paths=WORKLOADS):
        self.catalog = catalog
        self.clock = catalog.clock
        self.group, self.resource = group, resource
        self._version = parent.version if parent is not None else None
        self.paths = paths
        if parent is None:
            parent = catalog.resource(group, resource).info
        self.info = subresource_kind(parent, "scale")
        self.info.printer = SCALE

    @property
    def _parents(self):
        if self._version is not None:
            found = self.catalog.lookup(self.group, self._version, self.resource)
            if found is None:
                raise StatusError.not_found(self.resource, self.group, "")
            return found[1]
        return self.catalog.resource(self.group, self.resource)

    def _replicas(self, ctx, name, scale):
        """
        The replicas a Scale asks for, after upstream's checks of the Scale
        (its name and namespace are the URL's; the count is not negative).
        """
        if not isinstance(scale, dict):
            raise StatusError.bad_request("the patch must produce an object")
        meta = scale.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        if meta.get("name") and meta["name"] != name:
            raise StatusError.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({name})")
        if meta.get("namespace") and meta["namespace"] != ctx.namespace:
            raise StatusError.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request")
        spec = scale.get("spec")
        replicas = spec.get("replicas") if isinstance(spec, dict) else None
        if replicas is None:
            return 0
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            raise self._invalid(name, [FieldError.type_invalid(
                "spec.replicas", replicas, "must be of type int32")])
        if replicas < 0:
            raise self._invalid(name, [FieldError.invalid(
                "spec.replicas", replicas, "must be greater than or equal to 0")])
        return replicas

    def _invalid(self, name, errors):
        return StatusError.invalid("Scale", _SCALE_GROUP, name, errors)

    def _scaled(self, ctx, name, scale, parent):
        """C{parent} given the Scale's replicas, and its resourceVersion as a precondition."""
        self.paths.write_spec(parent, self._replicas(ctx, name, scale))
        version = (scale.get("metadata") or {}).get("resourceVersion") or ""
        if version:
            parent["metadata"]["resourceVersion"] = version
        else:
            parent["metadata"].pop("resourceVersion", None)
        return parent

    async def get(self, ctx, name):
        return to_scale(await self._parents.get(ctx, name), self.paths)

    async def update(self, ctx, name, obj, subresource="scale"):
        """Replace the Scale (PUT): C{(scale, created)}, never created."""
        self._replicas(ctx, name, obj)
        parent = await self._parents.patch(
            ctx, name, lambda current: self._scaled(ctx, name, obj, current), "scale")
        return to_scale(parent, self.paths), False

    async def patch(self, ctx, name, apply_patch, subresource="scale"):
        """A JSON, merge or strategic merge patch of the Scale, applied to the current one."""
        def patched(current):
            return self._scaled(ctx, name, apply_patch(to_scale(current, self.paths)), current)

        return to_scale(await self._parents.patch(ctx, name, patched, "scale"), self.paths)

    async def apply(self, ctx, name, applied, force, subresource="scale"):
        """
        Server-side apply of a Scale: its C{spec.replicas} applied to the
        parent by the same manager, under the C{scale} subresource.
        """
        config = {"metadata": {"name": name}}
        version = (applied.get("metadata") or {}).get("resourceVersion")
        if version:
            config["metadata"]["resourceVersion"] = version
        spec = applied.get("spec")
        if isinstance(spec, dict) and "replicas" in spec:
            self.paths.write_spec(config, self._replicas(ctx, name, applied))
        info = self._parents.info
        config.update(apiVersion=info.api_version, kind=info.kind)
        parent, _ = await self._parents.apply(ctx, name, config, force, "scale")
        return to_scale(parent, self.paths), False
