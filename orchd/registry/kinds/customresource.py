# -*- test-case-name: tests.registry.test_customresource -*-
"""
Custom resources: the kinds a CustomResourceDefinition defines, served by
one strategy and one store for all of them (upstream's
C{apiextensions-apiserver/pkg/registry/customresource}).

L{custom_kind_definitions} turns an established definition into one
L{KindDefinition} per served version: its KindInfo carries the names the
definition was granted (C{status.acceptedNames}), the version's schema (for
OpenAPI and C{kubectl explain}), its pruning, its SSA list and map types,
its printer columns, selectable fields, and deprecation warning; its
strategy validates and defaults with the version's compiled schema
(L{orchd.api.crdschema.CustomResourceSchema}, compiled once per version and
reused by every request); its store (L{CustomResourceStore}) answers each
version with its own C{apiVersion} and the schema's defaults, and keeps
objects in the storage version (conversion C{None}: only C{apiVersion}
changes); a C{scale} subresource is the one scale connector
(L{orchd.registry.scale}) reading the definition's replica paths.
"""

from orchd.api.crdschema import CustomResourceSchema
from orchd.api.errors import FieldError, StatusError
from orchd.api.kinds import AUTOSCALING, STANDARD_VERBS, KindInfo
from orchd.api.printers.custom import column_printer
from orchd.api.schemadefs_base import PRESERVE, KindSchema
from orchd.registry.converted import VersionedEncoder, copied
from orchd.registry.definitions import KindDefinition
from orchd.registry.generic import ResourceStore
from orchd.registry.scale import ScaleConnector, ScalePaths
from orchd.registry.strategy import DefaultStrategy

#: The finalizer that holds a definition until its resources are gone.
CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"

_TYPE_META = ("apiVersion", "kind", "metadata")
_MAX_INT32 = 2**31 - 1


class DefinitionState:
    """
    What the kinds of one definition share while they are served: whether
    the definition is being deleted (creates are refused then, as upstream).
    """

    __slots__ = ("terminating",)

    def __init__(self):
        self.terminating = False


def _path(json_path):
    """A CRD's C{.spec.replicas} as this package's dotted path C{spec.replicas}."""
    return json_path[1:] if json_path.startswith(".") else json_path


def served_versions(crd):
    """The C{spec.versions} entries of C{crd} that are served."""
    return [v for v in crd["spec"].get("versions") or () if v.get("served")]


def storage_version(crd):
    for version in crd["spec"].get("versions") or ():
        if version.get("storage"):
            return version["name"]
    return None


def _kind_schema(schema):
    """The KindSchema OpenAPI and C{kubectl explain} describe the kind with."""
    properties = {key: value for key, value in (schema.get("properties") or {}).items()
                  if key not in _TYPE_META}
    return KindSchema(properties, required=[r for r in schema.get("required") or ()
                                            if r not in _TYPE_META],
                      description=schema.get("description", ""),
                      complete=not schema.get(PRESERVE))


def custom_kind_definitions(crd, state=None):
    """
    One L{KindDefinition} per served version of the established
    definition C{crd}, named as its C{status.acceptedNames} say.
    """
    spec, status = crd["spec"], crd.get("status") or {}
    names = status.get("acceptedNames") or spec["names"]
    group = spec["group"]
    namespaced = spec.get("scope") == "Namespaced"
    storage = storage_version(crd)
    state = state or DefinitionState()
    definitions = []
    for version in served_versions(crd):
        schema = (version.get("schema") or {}).get("openAPIV3Schema") or {}
        compiled = CustomResourceSchema(schema)
        subresources = version.get("subresources") or {}
        own = [name for name in ("status", "scale") if name in subresources]
        deprecation = None
        if version.get("deprecated"):
            deprecation = version.get("deprecationWarning") or (
                f"{group}/{version['name']} {names['kind']} is deprecated")
        info = KindInfo(
            group, version["name"], names["plural"], names["kind"], namespaced,
            short_names=names.get("shortNames") or (), verbs=STANDARD_VERBS,
            subresources=own, categories=names.get("categories") or (),
            schema=_kind_schema(schema),
            printer=column_printer(version.get("additionalPrinterColumns")),
            patch_schema=compiled.patch_schema,
            selectable_fields=[_path(f["jsonPath"]) for f in
                               version.get("selectableFields") or ()],
            subresource_kinds={"scale": (AUTOSCALING, "v1", "Scale")} if "scale" in own else None,
            storage_version=storage, pruner=compiled.prune, strategic_patch=False,
            deprecation=deprecation, singular=names.get("singular") or names["kind"].lower())
        scale = subresources.get("scale")
        paths = None
        connectors = None
        if scale is not None:
            paths = ScalePaths(_path(scale.get("specReplicasPath", ".spec.replicas")),
                               _path(scale.get("statusReplicasPath", ".status.replicas")),
                               _path(scale["labelSelectorPath"])
                               if scale.get("labelSelectorPath") else "")
            connectors = {"scale": lambda catalog, info, paths=paths: ScaleConnector(
                catalog, info.group, info.resource, info, paths)}
        definitions.append(KindDefinition(
            info,
            lambda catalog, compiled=compiled, paths=paths, status="status" in own:
                CustomResourceStrategy(compiled, state, paths, status),
            store=CustomResourceStore, connectors=connectors))
    return definitions


class CustomResourceStrategy(DefaultStrategy):
    """
    The rules of every custom resource, from its version's schema.

    Defaults are filled before validation on every write; validation is
    the schema's (with the stored object for transition rules), and the
    replica counts of a C{scale} subresource are checked as upstream's
    C{customresource/validator.go} does. Generation follows upstream: with a
    status subresource only changes outside C{metadata} and C{status}
    count (the generic store's rule); without, a status change counts too.
    """

    allow_unconditional_update = True

    def __init__(self, schema, state, scale=None, has_status=False):
        self.schema = schema
        self.state = state
        self.scale = scale
        self.has_status = has_status

    def prepare_for_create(self, ctx, obj):
        if self.state.terminating:
            raise StatusError(405, "MethodNotAllowed",
                              "create not allowed while custom resource definition is "
                              "terminating")
        self.schema.default(obj)

    def validate(self, ctx, obj):
        return self.schema.validate(obj) or self._scale_errors(obj)

    def prepare_for_update(self, ctx, obj, old):
        self.schema.default(obj)
        if not self.has_status and obj.get("status") != old.get("status") and \
                _rest(obj) == _rest(old):
            meta = obj["metadata"]
            meta["generation"] = meta.get("generation", 1) + 1

    def validate_update(self, ctx, obj, old):
        return self.schema.validate(obj, old) or self._scale_errors(obj)

    def subresource_update(self, subresource, obj, old):
        """
        A status write changes status only; a scale write (the scale
        connector's patch of the parent) the replicas at the spec path only.
        """
        if subresource == "scale" and self.scale is not None:
            paths = self.scale
            paths.write_spec(old, paths.read(obj, paths.spec))
            managed = (obj.get("metadata") or {}).get("managedFields")
            if managed is not None:
                old["metadata"]["managedFields"] = managed
        else:
            old = super().subresource_update(subresource, obj, old)
        self.schema.default(old)
        return old

    def _scale_errors(self, obj):
        """Upstream's checks of the replica counts, for values the schema let through."""
        paths = self.scale
        if paths is None:
            return []
        errors = []
        for path in (paths.spec, paths.status):
            value = paths.read(obj, path)
            if value is None:
                continue
            where = ".".join(path)
            if isinstance(value, bool) or not isinstance(value, int):
                errors.append(FieldError.invalid(where, value, "should be an integer"))
            elif value < 0:
                errors.append(FieldError.invalid(where, value,
                                                 "should be a non-negative integer"))
            elif value > _MAX_INT32:
                errors.append(FieldError.invalid(where, value,
                                                 f"should be less than or equal to {_MAX_INT32}"))
        if paths.selector is not None:
            value = paths.read(obj, paths.selector)
            if value is not None and not isinstance(value, str):
                errors.append(FieldError.invalid(".".join(paths.selector), value,
                                                 "must be a string"))
        return errors


def _rest(obj):
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


class CustomResourceStore(ResourceStore):
    """
    The generic store, answering each version in its own C{apiVersion} and
    with the schema's defaults filled on read, and writing objects in the
    storage version.
    """

    def __init__(self, info, strategy, *args, **kwargs):
        super().__init__(info, strategy, *args, **kwargs)
        self._api_version = info.api_version
        self._storage_api_version = f"{info.group}/{info.storage_version}"
        self._schema = strategy.schema

    def decode(self, kv):
        return self._shape(super().decode(kv))

    def _shape(self, obj):
        """A stored object as this version answers it."""
        if obj.get("apiVersion") != self._api_version:
            obj["apiVersion"] = self._api_version
        self._schema.default(obj)
        return obj

    async def prepare_watch(self, ctx, options):
        """A watch whose events are shaped as this version answers them."""
        start = await super().prepare_watch(ctx, options)
        return lambda sink, encoder: start(sink, VersionedEncoder(
            encoder, copied(self._shape), self._api_version))

    def _encode(self, obj):
        if obj.get("apiVersion") == self._storage_api_version:
            return super()._encode(obj)
        asked = obj.get("apiVersion")
        obj["apiVersion"] = self._storage_api_version
        try:
            return super()._encode(obj)
        finally:
            obj["apiVersion"] = asked

