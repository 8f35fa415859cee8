# -*- test-case-name: tests.api.test_schemas -*-
"""
The one description of object schemas that OpenAPI v2 and v3, and field
validation (L{orchd.api.fieldvalidation}), are all generated from.

Schemas are plain JSON-Schema-shaped dicts (L{orchd.api.schemadefs_base});
L{render} turns one into either OpenAPI dialect. The descriptions live in
C{schemadefs_meta} (metadata and value types), C{schemadefs_core} (core
kinds) and C{schemadefs_groups} (named-group kinds).

Full kinds, described field by field with every field upstream has (lists
and their kinds included): ClusterRole, Role, ClusterRoleBinding and
RoleBinding (rbac.authorization.orch.io/v1); ControllerRevision (apps/v1);
ConfigMap, Secret, Namespace, ServiceAccount, Event, Service and Node
(core v1; node status keeps unknown fields, as node agents add to it);
Lease (coordination.orch.io/v1); Event (events.orch.io/v1); TokenReview
(authentication.orch.io/v1 and v1beta1), SelfSubjectReview; and
SubjectAccessReview (authorization.orch.io/v1 and v1beta1),
SelfSubjectAccessReview, LocalSubjectAccessReview and
SelfSubjectRulesReview. Their unknown fields are pruned, and their PATCH
operations announce strategic merge patch.

Every other kind is loose: typed C{apiVersion}, C{kind} and C{metadata}
(ObjectMeta, pruned like any other), C{spec} and C{status} named for kinds
with a status subresource, and everything else kept as written
(C{x-kubernetes-preserve-unknown-fields}). Making a kind full is adding its
entry to a C{KIND_SCHEMAS} table.

Patch extensions (C{x-kubernetes-patch-strategy} and
C{x-kubernetes-patch-merge-key}) are not written by hand: they are derived
from L{orchd.api.patchschema}, the table the server merges by.
"""

import copy
import functools

from orchd.api import patchschema, schemadefs_core, schemadefs_groups, schemadefs_meta
from orchd.api.kinds import KINDS
from orchd.api.schemadefs_base import (
    API_GROUP, API_GROUP_LIST, API_RESOURCE_LIST, API_VERSIONS, CONDITION, CORE,
    DELETE_OPTIONS, GVK_EXTENSION, INT_OR_STRING, LABEL_SELECTOR, LIST_META, LOOSE, META,
    MICRO_TIME, OBJECT_META, PATCH, PRESERVE, QUANTITY, RAW_EXTENSION, STATUS, TIME,
    KindSchema, array, boolean, gvk, int32, integer, micro_time, obj, preserved, ref, string,
    string_map, strings, timestamp,
)

__all__ = [
    # The building blocks and names of schemadefs_base, for describing schemas.
    "API_GROUP", "API_GROUP_LIST", "API_RESOURCE_LIST", "API_VERSIONS", "CONDITION", "CORE",
    "DELETE_OPTIONS", "GVK_EXTENSION", "INT_OR_STRING", "LABEL_SELECTOR", "LIST_META", "LOOSE",
    "META", "MICRO_TIME", "OBJECT_META", "PATCH", "PRESERVE", "QUANTITY", "RAW_EXTENSION",
    "STATUS", "TIME", "KindSchema", "array", "boolean", "gvk", "int32", "integer", "micro_time",
    "obj", "preserved", "ref", "string", "string_map", "strings", "timestamp",
    # This module's own.
    "KIND_SCHEMAS", "NAMED_DEFINITIONS", "PATCH_MERGE_KEY", "PATCH_STRATEGY", "all_definitions",
    "closure", "definition_name", "definitions", "is_complete", "kind_schema", "references",
    "render", "schema_for",
]

PATCH_STRATEGY = "x-kubernetes-patch-strategy"
PATCH_MERGE_KEY = "x-kubernetes-patch-merge-key"

#: Every named definition besides the kinds and their lists.
NAMED_DEFINITIONS = {
    **schemadefs_meta.DEFINITIONS,
    **schemadefs_core.DEFINITIONS,
    **schemadefs_groups.DEFINITIONS,
}

#: Kinds described field by field, keyed by C{(group, version, kind)}.
KIND_SCHEMAS = {**schemadefs_core.KIND_SCHEMAS, **schemadefs_groups.KIND_SCHEMAS}

_CORE_GVK_DEFINITIONS = {
    STATUS: "Status", API_VERSIONS: "APIVersions", API_GROUP_LIST: "APIGroupList",
    API_GROUP: "APIGroup", API_RESOURCE_LIST: "APIResourceList",
}


def kind_schema(info):
    """The L{KindSchema} of a kind: its entry, or L{LOOSE}."""
    return KIND_SCHEMAS.get((info.group, info.version, info.kind), LOOSE)


def definition_name(info, kind=None):
    """
    The definition name of a kind (or of C{kind} in its group/version), in
    the style of upstream (C{io.k8s.api.apps.v1.Deployment}): the package is
    the first label of the group, C{core} for the core group.
    """
    package = info.group.split(".")[0] if info.group else "core"
    return f"io.orch.api.{package}.{info.version}.{kind or info.kind}"


# Patch extensions, from the strategic merge patch table -------------------------------

def _patch_strategy(field):
    flags = [name for name, on in (("merge", field.merge), ("retainKeys", field.retain_keys),
                                   ("replace", field.replace)) if on]
    return ",".join(flags)


def _resolve(schema, pool):
    """The object schema C{schema} stands for: through a reference, or list items."""
    if schema.get("type") == "array":
        schema = schema.get("items", {})
    if "$ref" in schema:
        schema = pool[schema["$ref"]]
    return schema


def _set_extension(schema, key, value, where):
    existing = schema.get(key)
    if existing is not None and existing != value:
        raise ValueError(f"{where}: {key} is {existing!r} and {value!r}")
    schema[key] = value


def _annotate(schema, fields, pool, where):
    """
    Write the patch extensions C{fields} (a L{patchschema} table) on the
    properties of C{schema}, following references into C{pool}, whose
    definitions are changed in place. A field the schema does not name is
    an error, unless the schema keeps unknown fields (loose kinds).
    """
    schema = _resolve(schema, pool)
    properties = schema.get("properties", {})
    for name, field in fields.items():
        prop = properties.get(name)
        path = f"{where}.{name}"
        if prop is None:
            if schema.get(PRESERVE):
                continue
            raise ValueError(f"{path}: in the patch table but not in the schema")
        strategy = _patch_strategy(field)
        if strategy:
            _set_extension(prop, PATCH_STRATEGY, strategy, path)
        if field.key:
            _set_extension(prop, PATCH_MERGE_KEY, field.key, path)
        if field.fields:
            _annotate(prop, field.fields, pool, path)


# Kind and list definitions ----------------------------------------------------------

def _kind_definition(info, pool):
    described = kind_schema(info)
    properties = {
        "apiVersion": string("The versioned schema of this object."),
        "kind": string("The REST resource this object represents."),
        "metadata": ref(OBJECT_META, "Standard object metadata."),
        **copy.deepcopy(described.properties),
    }
    extensions = {"group_version_kind": [gvk(info.group, info.version, info.kind)]}
    if not described.complete:
        extensions["preserve_unknown_fields"] = True
        if info.has_status:
            # Every kind with a status subresource has spec and status; naming
            # them lets `kubectl explain <kind>.spec` answer, if only loosely.
            properties["spec"] = preserved("The desired state.")
            properties["status"] = preserved(
                "The observed state; written through the status subresource.")
    schema = obj(properties, required=described.required,
                 description=described.description, **extensions)
    _annotate(schema, patchschema.patch_schema_for(info.group, info.kind), pool, info.kind)
    return schema


def _list_definition(info):
    return obj(
        {
            "apiVersion": string("The versioned schema of this object."),
            "items": array(ref(definition_name(info)), f"List of {info.kind} objects."),
            "kind": string("The REST resource this object represents."),
            "metadata": ref(LIST_META, "Standard list metadata."),
        },
        required=("items",),
        description=f"A list of {info.kind} objects.",
        group_version_kind=[gvk(info.group, info.version, info.list_kind)],
    )


class _Catalog:
    """Every definition: the named ones, annotated, and those of the kinds met so far."""

    def __init__(self):
        self.pool = copy.deepcopy(NAMED_DEFINITIONS)
        self.kinds = {}
        for info in KINDS:
            self.kind(info)

    def kind(self, info):
        """C{(kind definition, list definition)} of C{info}, built once."""
        key = (info.group, info.version, info.kind, info.has_status)
        found = self.kinds.get(key)
        if found is None:
            found = self.kinds[key] = (_kind_definition(info, self.pool), _list_definition(info))
        return found


@functools.lru_cache(maxsize=None)
def _catalog():
    return _Catalog()


def definitions(kinds):
    """
    Every definition the documents for C{kinds} may need, by name: the kinds,
    their lists, what they refer to, and the shared ones with the GVK
    extensions clients look them up by. Shared between calls: do not mutate.
    """
    catalog = _catalog()
    result = {name: catalog.pool[name] for name in schemadefs_meta.DEFINITIONS}
    for name, kind in _CORE_GVK_DEFINITIONS.items():
        result[name] = {**result[name], GVK_EXTENSION: [gvk("", "v1", kind)]}
    group_versions = sorted({(k.group, k.version) for k in kinds if k.group})
    result[DELETE_OPTIONS] = {
        **result[DELETE_OPTIONS],
        GVK_EXTENSION: [gvk("", "v1", "DeleteOptions")]
        + [gvk(g, v, "DeleteOptions") for g, v in group_versions],
    }
    roots = []
    for info in kinds:
        kind_definition, list_definition = catalog.kind(info)
        result[definition_name(info)] = kind_definition
        result[definition_name(info, info.list_kind)] = list_definition
        roots.append(definition_name(info))
    for name in closure(roots, {**catalog.pool, **result}):
        result.setdefault(name, catalog.pool.get(name))
    return result


@functools.lru_cache(maxsize=None)
def all_definitions():
    """Every definition of every kind of the table, to resolve references by name."""
    catalog = _catalog()
    result = dict(catalog.pool)
    for info in KINDS:
        result[definition_name(info)], result[definition_name(info, info.list_kind)] = (
            catalog.kind(info))
    return result


@functools.lru_cache(maxsize=None)
def _by_gvk():
    found = {}
    for info in KINDS:
        kind_definition, list_definition = _catalog().kind(info)
        found[(info.group, info.version, info.kind)] = kind_definition
        found[(info.group, info.version, info.list_kind)] = list_definition
    return found


def schema_for(group, version, kind):
    """
    The schema of a kind (or list kind) of the table, in this module's
    dialect (references are bare names, resolved by L{all_definitions}), or
    None for a kind the table does not have. Do not mutate.
    """
    return _by_gvk().get((group, version, kind))


def is_complete(group, version, kind):
    """Whether the kind is described field by field (see the module docstring)."""
    return (group, version, kind) in KIND_SCHEMAS


def references(schema, found=None):
    """Every definition name C{schema} (any JSON-shaped value) refers to."""
    found = set() if found is None else found
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                found.add(value)
            else:
                references(value, found)
    elif isinstance(schema, list):
        for value in schema:
            references(value, found)
    return found


def closure(names, available):
    """C{names} and every definition they refer to, transitively, from C{available}."""
    pending, seen = list(names), set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        pending.extend(references(available[name]) - seen)
    return seen


def render(schema, v3):
    """
    C{schema} in Swagger 2.0 (C{v3} false) or OpenAPI 3.0 form: references
    get their dialect's prefix, and in 3.0, where siblings of C{$ref} are
    ignored, a described reference becomes C{allOf} as upstream writes it.
    Swagger 2.0 has no C{oneOf}: such values (quantities, int-or-string)
    are written as the string they are serialized as, as upstream does.
    """
    if isinstance(schema, list):
        return [render(value, v3) for value in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        target = ("#/components/schemas/" if v3 else "#/definitions/") + schema["$ref"]
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        if v3 and siblings:
            return {"allOf": [{"$ref": target}], **siblings}
        return {"$ref": target, **siblings}
    if not v3 and "oneOf" in schema:
        schema = {"type": "string", **{k: v for k, v in schema.items() if k != "oneOf"}}
    return {key: value if key.startswith("x-") else render(value, v3)
            for key, value in schema.items()}
