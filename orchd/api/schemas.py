# -*- test-case-name: tests.api.test_openapi -*-
"""
The one description of object schemas that OpenAPI v2 and v3 are both
generated from.

A schema is a plain JSON-Schema-shaped dict in the subset Swagger 2.0 and
OpenAPI 3.0 share (C{type}, C{format}, C{properties}, C{items},
C{additionalProperties}, C{required}, C{x-kubernetes-*} extensions), with
C{$ref} holding a bare definition name; L{render} turns it into either
dialect. Kinds without a description in L{KIND_SCHEMAS} get a loose schema
(C{apiVersion}, C{kind}, C{metadata}, and anything else accepted); making a
kind complete is adding its entry here.
"""

GVK_EXTENSION = "x-kubernetes-group-version-kind"

META = "io.orch.apimachinery.pkg.apis.meta.v1."
OBJECT_META = META + "ObjectMeta"
LIST_META = META + "ListMeta"
STATUS = META + "Status"
DELETE_OPTIONS = META + "DeleteOptions"
PATCH = META + "Patch"
API_VERSIONS = META + "APIVersions"
API_GROUP_LIST = META + "APIGroupList"
API_GROUP = META + "APIGroup"
API_RESOURCE_LIST = META + "APIResourceList"
RAW_EXTENSION = "io.orch.apimachinery.pkg.runtime.RawExtension"


# Building blocks -------------------------------------------------------------

def string(description="", fmt=None, enum=None):
    schema = {"type": "string"}
    if fmt:
        schema["format"] = fmt
    if enum:
        schema["enum"] = list(enum)
    return _described(schema, description)


def integer(description="", fmt="int64"):
    return _described({"type": "integer", "format": fmt}, description)


def boolean(description=""):
    return _described({"type": "boolean"}, description)


def timestamp(description=""):
    """An RFC 3339 time, as C{metav1.Time} is serialized."""
    return string(description, fmt="date-time")


def string_map(description="", fmt=None):
    return _described({"type": "object", "additionalProperties": string(fmt=fmt)}, description)


def array(items, description="", **extensions):
    """A list; C{extensions} are C{x-kubernetes-*} keys with C{_} for C{-}."""
    schema = {"type": "array", "items": items}
    schema.update(_extensions(extensions))
    return _described(schema, description)


def obj(properties=None, required=(), description="", **extensions):
    schema = {"type": "object"}
    if properties:
        schema["properties"] = dict(sorted(properties.items()))
    if required:
        schema["required"] = list(required)
    schema.update(_extensions(extensions))
    return _described(schema, description)


def ref(name, description=""):
    """A reference to the definition C{name}; rendered per dialect."""
    return _described({"$ref": name}, description)


def _described(schema, description):
    if description:
        schema["description"] = description
    return schema


def _extensions(extensions):
    return {"x-kubernetes-" + key.replace("_", "-"): value for key, value in extensions.items()}


def gvk(group, version, kind):
    return {"group": group, "kind": kind, "version": version}


# Metadata and the other shared definitions ----------------------------------

_OWNER_REFERENCE = obj(
    {
        "apiVersion": string("API version of the referent."),
        "blockOwnerDeletion": boolean("If true, the owner is deleted only after this object."),
        "controller": boolean("If true, this reference points to the managing controller."),
        "kind": string("Kind of the referent."),
        "name": string("Name of the referent."),
        "uid": string("UID of the referent."),
    },
    required=("apiVersion", "kind", "name", "uid"),
    description="Identifies an owning object, which must be in the same namespace.",
    map_type="atomic",
)

_MANAGED_FIELDS_ENTRY = obj(
    {
        "apiVersion": string("Version of the resource the field set applies to."),
        "fieldsType": string("Format of the fields field; only FieldsV1."),
        "fieldsV1": ref(META + "FieldsV1", "The field set in FieldsV1 format."),
        "manager": string("Identifier of the workflow managing these fields."),
        "operation": string("Apply or Update."),
        "subresource": string("The subresource used to update the object, if any."),
        "time": timestamp("When this entry was last changed."),
    },
    description="A workflow and the set of fields it manages.",
)

_OBJECT_META = obj(
    {
        "annotations": string_map("Unstructured key/value data stored with the object."),
        "creationTimestamp": timestamp("When the object was created; set by the server."),
        "deletionGracePeriodSeconds": integer("Seconds allowed for graceful termination."),
        "deletionTimestamp": timestamp("When the object will be deleted; set by the server."),
        "finalizers": array(
            string(), "Must be empty before the object is deleted from storage.",
            list_type="set", patch_strategy="merge",
        ),
        "generateName": string("Prefix for a server-generated name."),
        "generation": integer("Sequence number of the desired state."),
        "labels": string_map("Key/value pairs used to organize and select objects."),
        "managedFields": array(
            ref(META + "ManagedFieldsEntry"), "Which workflow manages which fields.",
            list_type="atomic",
        ),
        "name": string("Unique name within a namespace."),
        "namespace": string("The namespace of the object; empty for cluster-scoped kinds."),
        "ownerReferences": array(
            ref(META + "OwnerReference"), "Objects this object depends on.",
            list_type="map", list_map_keys=["uid"], patch_merge_key="uid", patch_strategy="merge",
        ),
        "resourceVersion": string("Opaque version of the object for optimistic concurrency."),
        "selfLink": string("Deprecated; not set."),
        "uid": string("Unique identifier in time and space; set by the server."),
    },
    description="Metadata every persisted object has.",
)

_LIST_META = obj(
    {
        "continue": string("Token to fetch the next page of a limited list."),
        "remainingItemCount": integer("Number of items after this page, when known."),
        "resourceVersion": string("Version of the list, to watch from."),
        "selfLink": string("Deprecated; not set."),
    },
    description="Metadata of lists.",
)

_STATUS = obj(
    {
        "apiVersion": string(),
        "code": integer("HTTP status code.", fmt="int32"),
        "details": ref(META + "StatusDetails", "Extended data of the reason."),
        "kind": string(),
        "message": string("Human-readable description of the status."),
        "metadata": ref(LIST_META),
        "reason": string("Machine-readable reason of a Failure status."),
        "status": string("Success or Failure."),
    },
    description="The result of an operation that returns no object.",
)

_STATUS_DETAILS = obj(
    {
        "causes": array(ref(META + "StatusCause"), list_type="atomic"),
        "group": string(),
        "kind": string(),
        "name": string(),
        "retryAfterSeconds": integer(fmt="int32"),
        "uid": string(),
    },
)

_STATUS_CAUSE = obj({"field": string(), "message": string(), "reason": string()})

_DELETE_OPTIONS = obj(
    {
        "apiVersion": string(),
        "dryRun": array(string(), "All: process the request without persisting it.",
                        list_type="atomic"),
        "gracePeriodSeconds": integer("Seconds before the object is deleted."),
        "ignoreStoreReadErrorWithClusterBreakingPotential": boolean(),
        "kind": string(),
        "orphanDependents": boolean("Deprecated: use propagationPolicy."),
        "preconditions": ref(META + "Preconditions"),
        "propagationPolicy": string("Orphan, Background or Foreground."),
    },
    description="Options of a delete request.",
)

_ADDRESSES = array(ref(META + "ServerAddressByClientCIDR"), list_type="atomic")

_DISCOVERY = {
    API_VERSIONS: obj(
        {
            "apiVersion": string(),
            "kind": string(),
            "serverAddressByClientCIDRs": _ADDRESSES,
            "versions": array(string(), list_type="atomic"),
        },
        required=("versions", "serverAddressByClientCIDRs"),
    ),
    META + "ServerAddressByClientCIDR": obj(
        {"clientCIDR": string(), "serverAddress": string()},
        required=("clientCIDR", "serverAddress"),
    ),
    META + "GroupVersionForDiscovery": obj(
        {"groupVersion": string(), "version": string()}, required=("groupVersion", "version"),
    ),
    API_GROUP: obj(
        {
            "apiVersion": string(),
            "kind": string(),
            "name": string(),
            "preferredVersion": ref(META + "GroupVersionForDiscovery"),
            "serverAddressByClientCIDRs": _ADDRESSES,
            "versions": array(ref(META + "GroupVersionForDiscovery"), list_type="atomic"),
        },
        required=("name", "versions"),
    ),
    API_GROUP_LIST: obj(
        {"apiVersion": string(), "kind": string(),
         "groups": array(ref(API_GROUP), list_type="atomic")},
        required=("groups",),
    ),
    META + "APIResource": obj(
        {
            "categories": array(string(), list_type="atomic"),
            "group": string(),
            "kind": string(),
            "name": string(),
            "namespaced": boolean(),
            "shortNames": array(string(), list_type="atomic"),
            "singularName": string(),
            "storageVersionHash": string(),
            "verbs": array(string()),
            "version": string(),
        },
        required=("name", "singularName", "namespaced", "kind", "verbs"),
    ),
    API_RESOURCE_LIST: obj(
        {
            "apiVersion": string(),
            "groupVersion": string(),
            "kind": string(),
            "resources": array(ref(META + "APIResource"), list_type="atomic"),
        },
        required=("groupVersion", "resources"),
    ),
}

#: Definitions every document may refer to, by name. GVK extensions of
#: Status, DeleteOptions and the discovery kinds are added by L{definitions}.
SHARED_DEFINITIONS = {
    OBJECT_META: _OBJECT_META,
    LIST_META: _LIST_META,
    META + "OwnerReference": _OWNER_REFERENCE,
    META + "ManagedFieldsEntry": _MANAGED_FIELDS_ENTRY,
    META + "FieldsV1": obj(description="A set of fields, as a trie of field paths."),
    STATUS: _STATUS,
    META + "StatusDetails": _STATUS_DETAILS,
    META + "StatusCause": _STATUS_CAUSE,
    DELETE_OPTIONS: _DELETE_OPTIONS,
    META + "Preconditions": obj({"resourceVersion": string(), "uid": string()}),
    PATCH: obj(description="The body of a PATCH request, in the format its media type names."),
    RAW_EXTENSION: obj(description="An embedded object of any kind.", preserve_unknown_fields=True),
    **_DISCOVERY,
}

_CORE_GVK_DEFINITIONS = {
    STATUS: "Status", API_VERSIONS: "APIVersions", API_GROUP_LIST: "APIGroupList",
    API_GROUP: "APIGroup", API_RESOURCE_LIST: "APIResourceList",
}


# Kinds -----------------------------------------------------------------------

class KindSchema:
    """
    The fields of one kind besides C{apiVersion}, C{kind} and C{metadata}.

    @ivar complete: true when C{properties} name every field, so clients may
        compute strategic merge patches from the schema. A loose schema is
        never complete: kubectl would fail on unknown fields and warn.
    @ivar definitions: further named definitions the properties refer to.
    """

    def __init__(self, properties=None, required=(), description="", definitions=None,
                 complete=True):
        self.properties = properties or {}
        self.required = tuple(required)
        self.description = description
        self.definitions = definitions or {}
        self.complete = complete


LOOSE = KindSchema(complete=False)

_CORE = "io.orch.api.core.v1."

_NAMESPACE_CONDITION = obj(
    {
        "lastTransitionTime": timestamp(),
        "message": string(),
        "reason": string(),
        "status": string("True, False or Unknown."),
        "type": string("Type of the condition."),
    },
    required=("type", "status"),
)

#: Kinds described field by field, keyed by C{(group, kind)}.
KIND_SCHEMAS = {
    ("", "ConfigMap"): KindSchema(
        {
            "binaryData": string_map("Binary values, base64-encoded.", fmt="byte"),
            "data": string_map("Configuration values."),
            "immutable": boolean("If true, data cannot be changed after creation."),
        },
        description="Configuration data for pods to consume.",
    ),
    ("", "Secret"): KindSchema(
        {
            "data": string_map("Secret values, base64-encoded.", fmt="byte"),
            "immutable": boolean("If true, data cannot be changed after creation."),
            "stringData": string_map("Write-only convenience: merged into data as plain text."),
            "type": string("Used to facilitate programmatic handling of secret data."),
        },
        description="Secret data, such as passwords, tokens or keys.",
    ),
    ("apps", "ControllerRevision"): KindSchema(
        {
            "data": ref(RAW_EXTENSION, "The serialized state; immutable."),
            "revision": integer("The revision of the state in data."),
        },
        required=("revision",),
        description="An immutable snapshot of state data.",
    ),
    ("", "Namespace"): KindSchema(
        {
            "spec": ref(_CORE + "NamespaceSpec", "The desired behaviour of the namespace."),
            "status": ref(_CORE + "NamespaceStatus", "The observed status of the namespace."),
        },
        description="A scope for names.",
        definitions={
            _CORE + "NamespaceSpec": obj(
                {"finalizers": array(string(), "Must be empty before the namespace is removed.",
                                     list_type="atomic")},
            ),
            _CORE + "NamespaceStatus": obj(
                {
                    "conditions": array(
                        ref(_CORE + "NamespaceCondition"), "Latest observations of the namespace.",
                        list_type="map", list_map_keys=["type"],
                        patch_merge_key="type", patch_strategy="merge",
                    ),
                    "phase": string("Active or Terminating.", enum=("Active", "Terminating")),
                },
            ),
            _CORE + "NamespaceCondition": _NAMESPACE_CONDITION,
        },
    ),
}


def kind_schema(info):
    """The L{KindSchema} of a kind: its entry, or L{LOOSE}."""
    return KIND_SCHEMAS.get((info.group, info.kind), LOOSE)


def definition_name(info, kind=None):
    """
    The definition name of a kind (or of C{kind} in its group/version), in
    the style of upstream (C{io.k8s.api.apps.v1.Deployment}): the package is
    the first label of the group, C{core} for the core group.
    """
    package = info.group.split(".")[0] if info.group else "core"
    return f"io.orch.api.{package}.{info.version}.{kind or info.kind}"


def _kind_definition(info):
    description = kind_schema(info)
    properties = {
        "apiVersion": string("The versioned schema of this object."),
        "kind": string("The REST resource this object represents."),
        "metadata": ref(OBJECT_META, "Standard object metadata."),
        **description.properties,
    }
    extensions = {"group_version_kind": [gvk(info.group, info.version, info.kind)]}
    if not description.properties:
        extensions["preserve_unknown_fields"] = True
        if info.has_status:
            # Every kind with a status subresource has spec and status; naming
            # them lets `kubectl explain <kind>.spec` answer, if only loosely.
            properties["spec"] = obj(description="The desired state.", preserve_unknown_fields=True)
            properties["status"] = obj(description="The observed state; written through the "
                                       "status subresource.", preserve_unknown_fields=True)
    return obj(properties, required=description.required,
               description=description.description, **extensions)


def _list_definition(info):
    return obj(
        {
            "apiVersion": string(),
            "items": array(ref(definition_name(info)), f"List of {info.kind} objects."),
            "kind": string(),
            "metadata": ref(LIST_META, "Standard list metadata."),
        },
        required=("items",),
        description=f"A list of {info.kind} objects.",
        group_version_kind=[gvk(info.group, info.version, info.list_kind)],
    )


def definitions(kinds):
    """
    Every definition the documents for C{kinds} may need, by name: the kinds,
    their lists, what they refer to, and the shared ones with the GVK
    extensions clients look them up by.
    """
    result = dict(SHARED_DEFINITIONS)
    for name, kind in _CORE_GVK_DEFINITIONS.items():
        result[name] = {**result[name], GVK_EXTENSION: [gvk("", "v1", kind)]}
    group_versions = sorted({(k.group, k.version) for k in kinds if k.group})
    result[DELETE_OPTIONS] = {
        **result[DELETE_OPTIONS],
        GVK_EXTENSION: [gvk("", "v1", "DeleteOptions")]
        + [gvk(g, v, "DeleteOptions") for g, v in group_versions],
    }
    for info in kinds:
        result[definition_name(info)] = _kind_definition(info)
        result[definition_name(info, info.list_kind)] = _list_definition(info)
        result.update(kind_schema(info).definitions)
    return result


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
    return {key: value if key.startswith("x-") else render(value, v3)
            for key, value in schema.items()}
