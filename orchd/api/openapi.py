# -*- test-case-name: tests.api.test_openapi -*-
"""
The OpenAPI documents: Swagger 2.0 at C{/openapi/v2}, and OpenAPI 3.0 at
C{/openapi/v3} (an index) and C{/openapi/v3/<path>} (one document per
group/version, plus the discovery roots).

kubectl reads them for C{explain}, for its query-parameter verifier (the
parameters of each kind's PATCH operations decide whether it sends
C{dryRun} and C{fieldValidation}), and for client-side apply (the patch
media types and schemas). Each operation is described once (L{Operation})
and rendered in either dialect, as schemas are (L{orchd.api.schemas}).

Documents depend only on the enabled kinds; the v3 set is built once per
kind set and shared, so callers must not mutate what they get.
"""

import functools
import hashlib
from typing import NamedTuple

import orjson

from orchd.api import schemas
from orchd.api.discovery import GIT_VERSION
from orchd.api.kinds import STREAM_SUBRESOURCES, SUBRESOURCE_VERBS

TITLE = "Orchestration"

JSON = "application/json"
WATCH_STREAM = "application/json;stream=watch"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

_QUERY_PARAMETERS = {
    "allowWatchBookmarks": ("boolean", "Ask for BOOKMARK events in a watch; they may not come."),
    "continue": ("string", "The continue token of the previous page of a limited list."),
    "dryRun": ("string", "If 'All', process the request fully without persisting it."),
    "fieldManager": ("string", "Name of the actor making the change, for field ownership."),
    "fieldSelector": ("string", "Restrict the list to objects whose fields match."),
    "fieldValidation": (
        "string",
        "How to treat unknown or duplicate fields in the body: Ignore, Warn or Strict.",
    ),
    "force": ("boolean", "Apply requests: take ownership of conflicting fields."),
    "gracePeriodSeconds": ("integer", "Seconds before the object is deleted; 0 deletes at once."),
    "ignoreStoreReadErrorWithClusterBreakingPotential": (
        "boolean", "Delete an object that cannot be read from storage.",
    ),
    "labelSelector": ("string", "Restrict the list to objects whose labels match."),
    "limit": ("integer", "Maximum number of items to return; the rest is paged with continue."),
    "orphanDependents": ("boolean", "Deprecated: use propagationPolicy."),
    "pretty": ("string", "If 'true', the output is indented."),
    "propagationPolicy": ("string", "Dependents: Orphan, Background or Foreground."),
    "resourceVersion": ("string", "Which version of the data to serve, with resourceVersionMatch."),
    "resourceVersionMatch": ("string", "How resourceVersion applies: Exact or NotOlderThan."),
    "sendInitialEvents": ("boolean", "Start a watch with the current objects as ADDED events."),
    "timeoutSeconds": ("integer", "Limit the duration of a list or watch call."),
    "watch": ("boolean", "Watch for changes instead of listing, from resourceVersion."),
}

_LIST_SELECTION = (
    "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion",
    "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds",
)
LIST_PARAMETERS = ("allowWatchBookmarks",) + _LIST_SELECTION + ("watch", "pretty")
WRITE_PARAMETERS = ("dryRun", "fieldManager", "fieldValidation", "pretty")
PATCH_PARAMETERS = ("dryRun", "fieldManager", "fieldValidation", "force", "pretty")
DELETE_PARAMETERS = (
    "dryRun", "gracePeriodSeconds", "ignoreStoreReadErrorWithClusterBreakingPotential",
    "orphanDependents", "propagationPolicy", "pretty",
)
DELETE_COLLECTION_PARAMETERS = DELETE_PARAMETERS[:-1] + _LIST_SELECTION + ("pretty",)

_UNAUTHORIZED = ("401", "Unauthorized", None)


class Operation(NamedTuple):
    """One HTTP operation, independent of the OpenAPI dialect."""
    method: str
    action: str
    operation_id: str
    description: str
    tag: str
    gvk: dict = None
    parameters: tuple = ()
    body: str = None
    body_required: bool = False
    consumes: tuple = ()
    produces: tuple = (JSON,)
    responses: tuple = ()


class PathItem(NamedTuple):
    path: str
    path_parameters: tuple
    operations: tuple


def group_ident(group):
    """C{Core}, C{Apps}, C{RbacAuthorization}: the group in operation ids."""
    if not group:
        return "Core"
    name = group.removesuffix(".orch.io")
    return "".join(part[:1].upper() + part[1:] for part in name.split("."))


def _tag(group, version):
    ident = group_ident(group)
    return f"{ident[:1].lower()}{ident[1:]}_{version}"


def _prefix(group, version):
    return f"/apis/{group}/{version}" if group else f"/api/{version}"


def patch_media_types(info):
    """
    The patch types a kind's PATCH operations announce: every one for full
    kinds (L{orchd.api.schemas}), all but strategic merge patch for loose
    ones. kubectl's client-side apply computes a strategic merge patch from
    the v3 schema of any kind whose PATCH announces it, and warns
    ("error calculating patch from openapi v3 spec: unable to find api
    field ...") on every field a loose schema does not name. Without it,
    kubectl falls back cleanly: to its built-in types for kinds it knows
    (a strategic merge patch, which the server applies by its own table),
    to a JSON merge patch for the others. Checked with kubectl v1.32 for
    every kind: full kinds with it, and loose kinds without it, apply
    without warnings. Kinds that refuse strategic merge patches (custom
    resources, 415) never announce it, so kubectl sends them a JSON merge
    patch.
    """
    if info.schema.complete and info.strategic_patch:
        return (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)
    return (JSON_PATCH, MERGE_PATCH, APPLY_PATCH)


def _kind_operations(info):
    """The path items of one kind: collection, item, all namespaces, subresources."""
    ident = group_ident(info.group) + info.version[:1].upper() + info.version[1:]
    scoped = ("Namespaced" if info.namespaced else "") + info.kind
    tag = _tag(info.group, info.version)
    gvk = schemas.gvk(info.group, info.version, info.kind)
    kind_ref = schemas.definition_name(info)
    list_ref = schemas.definition_name(info, info.list_kind)
    verbs = set(info.verbs)
    scope_params = ("namespace",) if info.namespaced else ()
    collection = _prefix(info.group, info.version) + (
        "/namespaces/{namespace}" if info.namespaced else "") + "/" + info.resource
    item = collection + "/{name}"
    status_responses = (
        ("200", "OK", schemas.STATUS), ("202", "Accepted", schemas.STATUS), _UNAUTHORIZED)

    def op(method, action, verb, description, suffix="", operation_id=None, own_gvk=None,
           **kw):
        operation_id = operation_id or f"{verb}{ident}{scoped}{suffix}"
        return Operation(method, action, operation_id, description, tag, own_gvk or gvk, **kw)

    def listing(operation_id=None):
        return op("get", "list", "list", f"list or watch objects of kind {info.kind}",
                  operation_id=operation_id, parameters=LIST_PARAMETERS,
                  produces=(JSON, WATCH_STREAM),
                  responses=(("200", "OK", list_ref), _UNAUTHORIZED))

    def read(sub="", ref=kind_ref, own_gvk=None):
        what = f"{sub} of the specified" if sub else "the specified"
        return op("get", "get", "read", f"read {what} {info.kind}", sub.capitalize(),
                  own_gvk=own_gvk, parameters=("pretty",),
                  responses=(("200", "OK", ref), _UNAUTHORIZED))

    def replace(sub="", ref=kind_ref, own_gvk=None):
        what = f"{sub} of the specified" if sub else "the specified"
        return op("put", "put", "replace", f"replace {what} {info.kind}", sub.capitalize(),
                  own_gvk=own_gvk, parameters=WRITE_PARAMETERS, body=ref, body_required=True,
                  consumes=(JSON,),
                  responses=(("200", "OK", ref), ("201", "Created", ref), _UNAUTHORIZED))

    def patch(sub="", ref=kind_ref, own_gvk=None):
        what = f"{sub} of the specified" if sub else "the specified"
        return op("patch", "patch", "patch", f"partially update {what} {info.kind}",
                  sub.capitalize(), own_gvk=own_gvk,
                  parameters=PATCH_PARAMETERS, body=schemas.PATCH, body_required=True,
                  consumes=(JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)
                  if own_gvk else patch_media_types(info),
                  responses=(("200", "OK", ref), ("201", "Created", ref), _UNAUTHORIZED))

    items = []
    ops = []
    if "list" in verbs:
        ops.append(listing())
    if "create" in verbs:
        ops.append(op("post", "post", "create", f"create a {info.kind}",
                      parameters=WRITE_PARAMETERS, body=kind_ref, body_required=True,
                      consumes=(JSON,),
                      responses=(("200", "OK", kind_ref), ("201", "Created", kind_ref),
                                 ("202", "Accepted", kind_ref), _UNAUTHORIZED)))
    if "deletecollection" in verbs:
        ops.append(op("delete", "deletecollection", "delete", f"delete collection of {info.kind}",
                      operation_id=f"delete{ident}Collection{scoped}",
                      parameters=DELETE_COLLECTION_PARAMETERS, body=schemas.DELETE_OPTIONS,
                      consumes=(JSON,), responses=(("200", "OK", schemas.STATUS), _UNAUTHORIZED)))
    if ops:
        items.append(PathItem(collection, scope_params, tuple(ops)))

    ops = []
    if "get" in verbs:
        ops.append(read())
    if "update" in verbs:
        ops.append(replace())
    if "patch" in verbs:
        ops.append(patch())
    if "delete" in verbs:
        ops.append(op("delete", "delete", "delete", f"delete a {info.kind}",
                      parameters=DELETE_PARAMETERS, body=schemas.DELETE_OPTIONS, consumes=(JSON,),
                      responses=status_responses))
    if ops:
        items.append(PathItem(item, ("name",) + scope_params, tuple(ops)))

    if info.namespaced and "list" in verbs:
        all_namespaces = listing(f"list{ident}{info.kind}ForAllNamespaces")
        items.append(PathItem(f"{_prefix(info.group, info.version)}/{info.resource}", (),
                              (all_namespaces,)))

    for sub in info.subresources:
        if sub in STREAM_SUBRESOURCES:
            continue    # raw streams, not objects: not described here
        sub_verbs = SUBRESOURCE_VERBS[sub]
        own = info.subresource_kinds.get(sub)
        # A subresource of a kind of its own (a Scale) is described by that kind.
        described = {"ref": schemas.named_kind(*own), "own_gvk": schemas.gvk(*own)} if own else {}
        ops = [make(sub, **described)
               for verb, make in (("get", read), ("update", replace), ("patch", patch))
               if verb in sub_verbs]
        items.append(PathItem(f"{item}/{sub}", ("name",) + scope_params, tuple(ops)))
    return items


def _discovery_operation(operation_id, description, tag, result):
    return Operation("get", "", operation_id, description, tag,
                     responses=(("200", "OK", result), _UNAUTHORIZED))


def _api_root_item():
    return PathItem("/api/", (), (_discovery_operation(
        "getCoreAPIVersions", "get available API versions", "core", schemas.API_VERSIONS),))


def _apis_root_item():
    return PathItem("/apis/", (), (_discovery_operation(
        "getAPIVersions", "get available API versions", "apis", schemas.API_GROUP_LIST),))


def _group_item(group):
    ident = group_ident(group)
    tag = ident[:1].lower() + ident[1:]
    return PathItem(f"/apis/{group}/", (), (_discovery_operation(
        f"get{ident}APIGroup", "get information of a group", tag, schemas.API_GROUP),))


def _group_version_items(kinds, group, version):
    ident = group_ident(group) + version[:1].upper() + version[1:]
    items = [PathItem(_prefix(group, version) + "/", (), (_discovery_operation(
        f"get{ident}APIResources", "get available resources", _tag(group, version),
        schemas.API_RESOURCE_LIST),))]
    for info in sorted(kinds, key=lambda k: k.resource):
        if info.group == group and info.version == version:
            items.extend(_kind_operations(info))
    return items


# Rendering ----------------------------------------------------------------------

_PATH_PARAMETER_TEXT = {
    "name": "name of the object",
    "namespace": "object name and auth scope, such as for teams and projects",
}


@functools.lru_cache(maxsize=None)
def _parameter(name, v3, location="query"):
    if location == "path":
        kind, description = "string", _PATH_PARAMETER_TEXT[name]
    else:
        kind, description = _QUERY_PARAMETERS[name]
    parameter = {"name": name, "in": location, "description": description}
    if location == "path":
        parameter["required"] = True
    if v3:
        parameter["schema"] = {"type": kind}
    else:
        parameter["type"] = kind
    return parameter


def _render_operation(operation, v3):
    rendered = {
        "tags": [operation.tag],
        "description": operation.description,
        "operationId": operation.operation_id,
    }
    parameters = [_parameter(name, v3) for name in operation.parameters]
    body = schemas.render(schemas.ref(operation.body), v3) if operation.body else None
    if v3:
        if parameters:
            rendered["parameters"] = parameters
        if body:
            rendered["requestBody"] = {
                "content": {media_type: {"schema": body} for media_type in operation.consumes},
                "required": operation.body_required,
            }
    else:
        if body:
            rendered["consumes"] = list(operation.consumes)
            parameters.insert(0, {"name": "body", "in": "body", "required": operation.body_required,
                                  "schema": body})
        rendered["produces"] = list(operation.produces)
        rendered["schemes"] = ["https"]
        if parameters:
            rendered["parameters"] = parameters
    responses = {}
    for code, description, result in operation.responses:
        response = {"description": description}
        if result:
            schema = schemas.render(schemas.ref(result), v3)
            if v3:
                response["content"] = {
                    media_type: {"schema": schema} for media_type in operation.produces}
            else:
                response["schema"] = schema
        responses[code] = response
    rendered["responses"] = responses
    if operation.action:
        rendered["x-kubernetes-action"] = operation.action
    if operation.gvk:
        rendered["x-kubernetes-group-version-kind"] = operation.gvk
    return rendered


def _render_paths(items, v3):
    paths = {}
    for item in items:
        rendered = {op.method: _render_operation(op, v3) for op in item.operations}
        if item.path_parameters:
            rendered["parameters"] = [_parameter(name, v3, "path") for name in item.path_parameters]
        paths[item.path] = rendered
    return paths


def _referenced(items):
    names = set()
    for item in items:
        for operation in item.operations:
            if operation.body:
                names.add(operation.body)
            names.update(result for _, _, result in operation.responses if result)
    return names


def _render_definitions(items, available, v3):
    names = schemas.closure(_referenced(items), available)
    return {name: schemas.render(available[name], v3) for name in sorted(names)}


_SECURITY_SCHEME = {
    "type": "apiKey", "name": "authorization", "in": "header",
    "description": "Bearer Token authentication",
}


def openapi_v2(kinds):
    """The Swagger 2.0 document of every enabled kind and the discovery paths."""
    kinds = list(kinds)
    groups = {}
    for info in kinds:
        groups.setdefault(info.group, set()).add(info.version)
    items = [_api_root_item(), _apis_root_item()]
    for group in sorted(groups):
        if group:
            items.append(_group_item(group))
        for version in sorted(groups[group]):
            items.extend(_group_version_items(kinds, group, version))
    return {
        "swagger": "2.0",
        "info": {"title": TITLE, "version": GIT_VERSION},
        "paths": _render_paths(items, v3=False),
        "definitions": _render_definitions(items, schemas.definitions(kinds), v3=False),
        "securityDefinitions": {"BearerToken": _SECURITY_SCHEME},
        "security": [{"BearerToken": []}],
    }


def _v3_document(items, available):
    return {
        "openapi": "3.0.0",
        "info": {"title": TITLE, "version": GIT_VERSION},
        "paths": _render_paths(items, v3=True),
        "components": {
            "schemas": _render_definitions(items, available, v3=True),
            "securitySchemes": {"BearerToken": _SECURITY_SCHEME},
        },
        "security": [{"BearerToken": []}],
    }


def document_hash(document):
    """Upstream's document hash: uppercase hex SHA-512 of the serialized document."""
    return hashlib.sha512(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest().upper()


@functools.lru_cache(maxsize=8)
def _v3_documents(kinds):
    available = schemas.definitions(kinds)
    groups = {}
    for info in kinds:
        groups.setdefault(info.group, set()).add(info.version)
    documents = {"api": _v3_document([_api_root_item()], available),
                 "apis": _v3_document([_apis_root_item()], available)}
    for group in sorted(groups):
        if group:
            documents[f"apis/{group}"] = _v3_document([_group_item(group)], available)
        for version in sorted(groups[group]):
            path = f"apis/{group}/{version}" if group else f"api/{version}"
            documents[path] = _v3_document(_group_version_items(kinds, group, version), available)
    index = {
        "paths": {
            path: {"serverRelativeURL": f"/openapi/v3/{path}?hash={document_hash(document)}"}
            for path, document in documents.items()
        },
    }
    return index, documents


def openapi_v3_documents(kinds):
    """
    Every OpenAPI v3 document, by the path the index names it with
    (C{api/v1}, C{apis/apps/v1}, C{api}, C{apis}, C{apis/apps}): what
    C{/openapi/v3/<path>} serves. Shared between calls: do not mutate.
    """
    return _v3_documents(tuple(kinds))[1]


def openapi_v3_index(kinds):
    """
    The C{/openapi/v3} index: each path with a C{serverRelativeURL} carrying
    the hash of its document, so that clients may cache documents by URL.
    """
    return _v3_documents(tuple(kinds))[0]


def openapi_v3_document(kinds, path):
    """The v3 document served at C{/openapi/v3/<path>}, or C{None} if unknown."""
    return openapi_v3_documents(kinds).get(path.strip("/"))


def openapi_v3_group_version(kinds, group, version):
    """The v3 document of one group/version, or C{None} if none of its kinds is enabled."""
    return openapi_v3_document(kinds, f"apis/{group}/{version}" if group else f"api/{version}")
