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
(C{x-kubernetes-preserve-unknown-fields}). A kind's description is the
C{schema} of its L{orchd.api.kinds.KindInfo} (L{LOOSE} by default): making
a kind full is naming its L{KindSchema} in its row of the kinds table.

Patch extensions (C{x-kubernetes-patch-strategy} and
C{x-kubernetes-patch-merge-key}) are not written by hand: they are derived
from the kind's C{patch_schema} (L{orchd.api.patchschema}), what the server
merges by.

The definitions of a kind are built once and kept with its KindInfo; the
shared named definitions are annotated as the kinds that use them are met
(their annotations agree, or building fails), so documents do not depend
on which other kinds are served.
"""

import copy
import functools

from orchd.api import patchschema, schemadefs_core, schemadefs_groups, schemadefs_meta
from orchd.api.groups import canonical_group
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
    "NAMED_DEFINITIONS", "PATCH_MERGE_KEY", "PATCH_STRATEGY", "closure", "definition_name",
    "definitions", "kind_definitions", "named_definitions", "named_kind", "references", "render",
]

PATCH_STRATEGY = "x-kubernetes-patch-strategy"
PATCH_MERGE_KEY = "x-kubernetes-patch-merge-key"

#: Every named definition besides the kinds and their lists.
NAMED_DEFINITIONS = {
    **schemadefs_meta.DEFINITIONS,
    **schemadefs_core.DEFINITIONS,
    **schemadefs_groups.DEFINITIONS,
}

_CORE_GVK_DEFINITIONS = {
    STATUS: "Status", API_VERSIONS: "APIVersions", API_GROUP_LIST: "APIGroupList",
    API_GROUP: "APIGroup", API_RESOURCE_LIST: "APIResourceList",
}


def definition_name(info, kind=None):
    """
    The definition name of a kind (or of C{kind} in its group/version), in
    the style of upstream: for the server's own groups the package is the
    first label of the group, C{core} for the core group
    (C{io.orch.api.apps.v1.Deployment}); a custom resource's group is
    written reversed (C{com.example.v1.Widget}), so that groups sharing a
    first label (C{example.com}, C{example.org}) do not share a name.
    """
    return named_kind(info.group, info.version, kind or info.kind)


def named_kind(group, version, kind):
    """L{definition_name} of C{kind} of C{group/version}."""
    if "." in group and not canonical_group(group).endswith(".orch.io"):
        return f"{'.'.join(reversed(group.split('.')))}.{version}.{kind}"
    package = group.split(".")[0] if group else "core"
    return f"io.orch.api.{package}.{version}.{kind}"


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
    described = info.schema
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
    _annotate(schema, info.patch_schema, pool, info.kind)
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


@functools.lru_cache(maxsize=None)
def named_definitions():
    """
    The shared named definitions (everything but kinds and their lists),
    with the patch extensions of the kinds met so far: building a kind's
    definitions adds its own (L{kind_definitions}). Callers must not change it.
    """
    pool = copy.deepcopy(NAMED_DEFINITIONS)
    # Every kind's patch metadata has ObjectMeta's rules: written at once, so
    # that ObjectMeta carries them even in documents without kinds.
    _annotate(ref(OBJECT_META), patchschema.OBJECT_META, pool, "ObjectMeta")
    return pool


_DEFINITIONS = "schemas.definitions"


def kind_definitions(info):
    """
    C{(kind definition, list definition)} of the kind of C{info}, in this
    module's dialect (references are bare names, resolved by
    L{named_definitions} and L{definition_name}), built once and kept
    with C{info}. Do not mutate.

    @raise ValueError: if C{info} has no schema (L{orchd.api.kinds.subresource_kind}).
    """
    found = info.derived.get(_DEFINITIONS)
    if found is None:
        if info.schema is None:
            raise ValueError(f"{info!r} has no schema")
        pool = named_definitions()
        found = info.derived[_DEFINITIONS] = (_kind_definition(info, pool),
                                              _list_definition(info))
    return found


def definitions(kinds):
    """
    Every definition the documents for C{kinds} may need, by name: the kinds,
    their lists, what they refer to, and the shared ones with the GVK
    extensions clients look them up by. Shared between calls: do not mutate.
    """
    pool = named_definitions()
    roots, own, owners = [], {}, {}
    for info in kinds:
        name, list_name = definition_name(info), definition_name(info, info.list_kind)
        kind, kind_list = kind_definitions(info)
        first = owners.setdefault(name, info)
        if first is not info and canonical_group(first.group) == canonical_group(info.group):
            # One kind served under both spellings of its group
            # (--upstream-group-names): one definition, looked up by either
            # GVK, as upstream lists every GVK a definition is served as.
            kind, kind_list = _both_gvks(own[name], kind), _both_gvks(own[list_name], kind_list)
        own[name], own[list_name] = kind, kind_list
        roots.append(name)
        # The kinds its subresources take (a Scale), when described.
        roots.extend(name for name in (named_kind(*sub) for sub in info.subresource_kinds.values())
                     if name in pool)
    result = {name: pool[name] for name in schemadefs_meta.DEFINITIONS}
    for name, kind in _CORE_GVK_DEFINITIONS.items():
        result[name] = {**result[name], GVK_EXTENSION: [gvk("", "v1", kind)]}
    group_versions = sorted({(k.group, k.version) for k in kinds if k.group})
    result[DELETE_OPTIONS] = {
        **result[DELETE_OPTIONS],
        GVK_EXTENSION: [gvk("", "v1", "DeleteOptions")]
        + [gvk(g, v, "DeleteOptions") for g, v in group_versions],
    }
    result.update(own)
    for name in closure(roots, {**pool, **result}):
        result.setdefault(name, pool.get(name))
    return result


def _both_gvks(first, second):
    """C{first} with the GVKs of C{second} added to its GVK extension."""
    known = first[GVK_EXTENSION]
    added = [entry for entry in second[GVK_EXTENSION] if entry not in known]
    return {**first, GVK_EXTENSION: known + added}


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
