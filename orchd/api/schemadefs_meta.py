# -*- test-case-name: tests.api.test_schemas -*-
"""
Definitions every document may refer to: object and list metadata, Status,
DeleteOptions, the discovery kinds, and the value types (times, quantities,
int-or-string, label selectors, conditions, embedded objects).
"""

from orchd.api.schemadefs_base import (
    API_GROUP, API_GROUP_LIST, API_RESOURCE_LIST, API_VERSIONS, CONDITION, DELETE_OPTIONS,
    INT_OR_STRING, LABEL_SELECTOR, LABEL_SELECTOR_REQUIREMENT, LIST_META, META, MICRO_TIME,
    OBJECT_META, PATCH, QUANTITY, RAW_EXTENSION, STATUS, TIME, array, boolean, int32, integer,
    obj, preserved, ref, string, string_map, strings, timestamp,
)

_OWNER_REFERENCE = obj(
    {
        "apiVersion": string("API version of the owner."),
        "blockOwnerDeletion": boolean(
            "If true and the owner has the foregroundDeletion finalizer, the owner is "
            "removed from storage only after this reference is gone."),
        "controller": boolean("If true, this reference points to the managing controller."),
        "kind": string("Kind of the owner."),
        "name": string("Name of the owner."),
        "uid": string("UID of the owner."),
    },
    required=("apiVersion", "kind", "name", "uid"),
    description="Identifies an owning object, which must be in the same namespace or "
                "cluster-scoped.",
    map_type="atomic",
)

_MANAGED_FIELDS_ENTRY = obj(
    {
        "apiVersion": string("Version of the resource the field set applies to."),
        "fieldsType": string("Format of the fields field; only FieldsV1."),
        "fieldsV1": ref(META + "FieldsV1", "The field set in FieldsV1 format."),
        "manager": string("Identifier of the workflow managing these fields."),
        "operation": string("Apply or Update: the kind of operation that made this entry."),
        "subresource": string("The subresource used to update the object, if any."),
        "time": timestamp("When this entry was last changed."),
    },
    description="A workflow, the fields it manages, and the version they are expressed in.",
)

_OBJECT_META = obj(
    {
        "annotations": string_map("Unstructured key/value data stored with the object."),
        "creationTimestamp": timestamp("When the object was created; set by the server."),
        "deletionGracePeriodSeconds": integer(
            "Seconds allowed for graceful termination; set with deletionTimestamp."),
        "deletionTimestamp": timestamp(
            "When the object will be deleted; set by the server on a graceful delete."),
        "finalizers": strings(
            "Must be empty before the object is removed from storage; each entry names the "
            "component that removes it.", list_type="set"),
        "generateName": string("Prefix for a server-generated name, used when name is empty."),
        "generation": integer("Sequence number of the desired state; set by the server."),
        "labels": string_map("Key/value pairs used to organize and select objects."),
        "managedFields": array(
            ref(META + "ManagedFieldsEntry"), "Which workflow manages which fields.",
            list_type="atomic"),
        "name": string("Unique name within a namespace; cannot be changed."),
        "namespace": string("The namespace of the object; empty for cluster-scoped kinds."),
        "ownerReferences": array(
            ref(META + "OwnerReference"),
            "Objects this object depends on; it is garbage collected when all are gone.",
            list_type="map", list_map_keys=["uid"]),
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
        "apiVersion": string("The versioned schema of this object."),
        "code": int32("HTTP status code; 0 if not set."),
        "details": ref(META + "StatusDetails", "Extended data of the reason."),
        "kind": string("The REST resource this object represents."),
        "message": string("Human-readable description of the status."),
        "metadata": ref(LIST_META, "Standard list metadata."),
        "reason": string("Machine-readable reason of a Failure status."),
        "status": string("Success or Failure."),
    },
    description="The result of an operation that returns no object.",
)

_STATUS_DETAILS = obj(
    {
        "causes": array(ref(META + "StatusCause"), "Details of each error, when known.",
                        list_type="atomic"),
        "group": string("Group of the resource the status is about."),
        "kind": string("Kind (or resource) the status is about."),
        "name": string("Name of the object the status is about."),
        "retryAfterSeconds": int32("Seconds to wait before retrying, when given."),
        "uid": string("UID of the object the status is about."),
    },
    description="Data that explains a Status reason.",
)

_STATUS_CAUSE = obj(
    {
        "field": string("The field that caused the error, as a JSON path such as "
                        "items[0].name."),
        "message": string("Human-readable description of the cause."),
        "reason": string("Machine-readable cause type."),
    },
    description="One cause of a failure.",
)

_DELETE_OPTIONS = obj(
    {
        "apiVersion": string("The versioned schema of this object."),
        "dryRun": strings("All: process the request without persisting it."),
        "gracePeriodSeconds": integer("Seconds before the object is deleted; 0 deletes at once."),
        "ignoreStoreReadErrorWithClusterBreakingPotential": boolean(
            "Delete an object that cannot be read from storage."),
        "kind": string("The REST resource this object represents."),
        "orphanDependents": boolean("Deprecated: use propagationPolicy."),
        "preconditions": ref(META + "Preconditions", "Must hold for the delete to proceed."),
        "propagationPolicy": string("Orphan, Background or Foreground."),
    },
    description="Options of a delete request.",
)

_LABEL_SELECTOR = obj(
    {
        "matchExpressions": array(ref(LABEL_SELECTOR_REQUIREMENT),
                                  "Requirements on labels, all of which must hold.",
                                  list_type="atomic"),
        "matchLabels": string_map("Labels that must all be present with these values."),
    },
    description="A label query; an empty selector matches everything, a null one nothing.",
    map_type="atomic",
)

_LABEL_SELECTOR_REQUIREMENT = obj(
    {
        "key": string("The label key the requirement applies to."),
        "operator": string("In, NotIn, Exists or DoesNotExist."),
        "values": strings("Values for In and NotIn; empty for Exists and DoesNotExist."),
    },
    required=("key", "operator"),
    description="One requirement of a label selector.",
)

_CONDITION = obj(
    {
        "lastTransitionTime": timestamp("When the condition last changed status."),
        "message": string("Human-readable details of the transition."),
        "observedGeneration": integer("The generation the condition was set for."),
        "reason": string("CamelCase reason of the last transition."),
        "status": string("True, False or Unknown."),
        "type": string("Type of the condition, in CamelCase."),
    },
    required=("type", "status", "lastTransitionTime", "reason", "message"),
    description="One aspect of the current state of an object.",
)

_ADDRESSES = array(ref(META + "ServerAddressByClientCIDR"), list_type="atomic")

_DISCOVERY = {
    API_VERSIONS: obj(
        {
            "apiVersion": string(),
            "kind": string(),
            "serverAddressByClientCIDRs": _ADDRESSES,
            "versions": strings(),
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
            "categories": strings(),
            "group": string(),
            "kind": string(),
            "name": string(),
            "namespaced": boolean(),
            "shortNames": strings(),
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
#: Status, DeleteOptions and the discovery kinds are added by
#: L{orchd.api.schemas.definitions}.
DEFINITIONS = {
    OBJECT_META: _OBJECT_META,
    LIST_META: _LIST_META,
    META + "OwnerReference": _OWNER_REFERENCE,
    META + "ManagedFieldsEntry": _MANAGED_FIELDS_ENTRY,
    META + "FieldsV1": obj(description="A set of fields, as a trie of field paths."),
    STATUS: _STATUS,
    META + "StatusDetails": _STATUS_DETAILS,
    META + "StatusCause": _STATUS_CAUSE,
    DELETE_OPTIONS: _DELETE_OPTIONS,
    META + "Preconditions": obj(
        {"resourceVersion": string("The resourceVersion the object must have."),
         "uid": string("The UID the object must have.")},
        description="Conditions an operation requires of the object.",
    ),
    PATCH: obj(description="The body of a PATCH request, in the format its media type names."),
    RAW_EXTENSION: preserved("An embedded object of any kind, kept as written."),
    TIME: string("An RFC 3339 date and time, in seconds.", fmt="date-time"),
    MICRO_TIME: string("An RFC 3339 date and time with microseconds.", fmt="date-time"),
    QUANTITY: {
        "description": "A fixed-point number with an optional suffix, such as 500m, 1Gi or "
                       "2e3; written as a string.",
        "oneOf": [{"type": "string"}, {"type": "number"}],
    },
    INT_OR_STRING: {
        "description": "An integer or a string, such as a port number or a port name.",
        "format": "int-or-string",
        "oneOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    },
    LABEL_SELECTOR: _LABEL_SELECTOR,
    LABEL_SELECTOR_REQUIREMENT: _LABEL_SELECTOR_REQUIREMENT,
    CONDITION: _CONDITION,
    **_DISCOVERY,
}
