# -*- test-case-name: tests.api.test_schemas -*-
"""
Full schemas of the named-group kinds: RBAC roles and bindings,
ControllerRevision, Lease, events.orch.io Event, the access reviews of
the authentication and authorization groups, and the autoscaling/v1 Scale
of the scale subresources.
"""

from orchd.api.schemadefs_base import (
    LABEL_SELECTOR, LABEL_SELECTOR_REQUIREMENT, OBJECT_META, RAW_EXTENSION, KindSchema, array,
    boolean, gvk, int32, integer, micro_time, obj, ref, string, strings, timestamp,
)
from orchd.api.schemadefs_core import EVENT_SOURCE, OBJECT_REFERENCE

_RBAC = "io.orch.api.rbac.v1."
_EVENTS = "io.orch.api.events.v1."
_COORDINATION = "io.orch.api.coordination.v1."
_AUTOSCALING = "io.orch.api.autoscaling.v1."

# RBAC --------------------------------------------------------------------------

_RBAC_DEFINITIONS = {
    _RBAC + "PolicyRule": obj(
        {
            "apiGroups": strings('API groups of the resources: "" is the core group, "*" '
                                 "every group; any operation on a listed resource in any "
                                 "listed group is allowed."),
            "nonResourceURLs": strings(
                'Partial URLs the subject may access; "*" only as a whole, final path '
                "segment. Only for ClusterRoles bound by ClusterRoleBindings, and never "
                "together with resources."),
            "resourceNames": strings("Optional allow-list of object names; empty means all."),
            "resources": strings('Resources the rule applies to; "*" means all.'),
            "verbs": strings('Verbs allowed on every resource of the rule; "*" means all.'),
        },
        required=("verbs",),
        description="One permission: verbs on resources or on non-resource URLs. It says "
                    "nothing of who holds it or where.",
    ),
    _RBAC + "AggregationRule": obj(
        {"clusterRoleSelectors": array(
            ref(LABEL_SELECTOR),
            "Selectors of ClusterRoles whose rules are added to this one when any matches.",
            list_type="atomic")},
        description="How to find the ClusterRoles whose rules make up this ClusterRole.",
    ),
    _RBAC + "RoleRef": obj(
        {
            "apiGroup": string("API group of the referenced role."),
            "kind": string("Role or ClusterRole."),
            "name": string("Name of the referenced role."),
        },
        required=("apiGroup", "kind", "name"),
        description="The role a binding grants.",
        map_type="atomic",
    ),
    _RBAC + "Subject": obj(
        {
            "apiGroup": string('API group of the subject: "" for ServiceAccount (the '
                               "default), rbac.authorization.orch.io for User and Group."),
            "kind": string("User, Group or ServiceAccount; authorizers report other "
                           "values as errors."),
            "name": string("Name of the subject."),
            "namespace": string("Namespace of the subject; must be empty for User and "
                                "Group."),
        },
        required=("kind", "name"),
        description="A user, group or service account a binding applies to.",
        map_type="atomic",
    ),
}


def _rules(whose):
    return array(ref(_RBAC + "PolicyRule"), f"All the PolicyRules of this {whose}.",
                 list_type="atomic")


def _subjects():
    return array(ref(_RBAC + "Subject"), "The parties the role is granted to.",
                 list_type="atomic")


CLUSTER_ROLE = KindSchema(
    {
        "aggregationRule": ref(
            _RBAC + "AggregationRule",
            "How rules is built. When set, a controller manages rules and "
            "overwrites direct changes to it."),
        "rules": _rules("ClusterRole"),
    },
    description="A cluster-wide set of PolicyRules that RoleBindings and "
                "ClusterRoleBindings reference as a unit.",
)
ROLE = KindSchema(
    {"rules": _rules("Role")},
    description="A namespaced set of PolicyRules that RoleBindings reference as a unit.",
)
CLUSTER_ROLE_BINDING = KindSchema(
    {
        "roleRef": ref(_RBAC + "RoleRef",
                       "The ClusterRole granted; an unresolvable reference is an "
                       "authorizer error. Cannot be changed."),
        "subjects": _subjects(),
    },
    required=("roleRef",),
    description="Grants a ClusterRole to subjects across the whole cluster.",
)
ROLE_BINDING = KindSchema(
    {
        "roleRef": ref(_RBAC + "RoleRef",
                       "The Role in this namespace, or ClusterRole, granted; an "
                       "unresolvable reference is an authorizer error. Cannot be "
                       "changed."),
        "subjects": _subjects(),
    },
    required=("roleRef",),
    description="Grants a Role or ClusterRole to subjects within one namespace.",
)

# Apps, coordination, events ------------------------------------------------------

_OTHER_DEFINITIONS = {
    _COORDINATION + "LeaseSpec": obj(
        {
            "acquireTime": micro_time("When the current holder acquired the lease."),
            "holderIdentity": string("Identity of the current holder of the lease."),
            "leaseDurationSeconds": int32(
                "Seconds candidates must wait, counted from renewTime, before they may take "
                "the lease over."),
            "leaseTransitions": int32("Number of times the lease changed holders."),
            "preferredHolder": string("The holder the lease should pass to; set by the "
                                      "coordinator of coordinated leader election."),
            "renewTime": micro_time("When the current holder last renewed the lease."),
            "strategy": string("How the holder is chosen under coordinated leader "
                               "election, such as OldestEmulationVersion."),
        },
        description="The state of a lease.",
    ),
    _AUTOSCALING + "Scale": obj(
        {
            "apiVersion": string("The versioned schema of this object."),
            "kind": string("The REST resource this object represents."),
            "metadata": ref(OBJECT_META, "Standard object metadata."),
            "spec": ref(_AUTOSCALING + "ScaleSpec", "The desired scale."),
            "status": ref(_AUTOSCALING + "ScaleStatus", "The current scale; read-only."),
        },
        description="The scale of a workload: its replicas, read and set through the "
                    "scale subresource of its parent.",
        group_version_kind=[gvk("autoscaling", "v1", "Scale")],
    ),
    _AUTOSCALING + "ScaleSpec": obj(
        {"replicas": int32("The desired number of instances.")},
        description="The desired scale.",
    ),
    _AUTOSCALING + "ScaleStatus": obj(
        {
            "replicas": int32("The number of instances observed."),
            "selector": string("The label selector of the instances, in the query form of "
                               "label selectors (app=web)."),
        },
        required=("replicas",),
        description="The observed scale.",
    ),
    _EVENTS + "EventSeries": obj(
        {
            "count": int32("Number of occurrences in the series up to the last heartbeat."),
            "lastObservedTime": micro_time("When the last event of the series was seen."),
        },
        required=("count", "lastObservedTime"),
        description="A series of events that happened repeatedly.",
    ),
}

CONTROLLER_REVISION = KindSchema(
    {
        "data": ref(RAW_EXTENSION, "The serialized state; cannot be changed."),
        "revision": integer("The revision of the state in data."),
    },
    required=("revision",),
    description="An immutable snapshot of state data, used by controllers to update "
                "and roll back.",
)
LEASE = KindSchema(
    {"spec": ref(_COORDINATION + "LeaseSpec", "The state of the lease.")},
    description="A lease: who holds it and until when.",
)
EVENTS_EVENT = KindSchema(
    {
        "action": string("What was done, or failed, about the regarding object."),
        "deprecatedCount": int32("Count of the core v1 Event."),
        "deprecatedFirstTimestamp": timestamp("firstTimestamp of the core v1 Event."),
        "deprecatedLastTimestamp": timestamp("lastTimestamp of the core v1 Event."),
        "deprecatedSource": ref(EVENT_SOURCE, "source of the core v1 Event."),
        "eventTime": micro_time("When the event was first observed."),
        "note": string("Human-readable description of the event."),
        "reason": string("Why the action was taken."),
        "regarding": ref(OBJECT_REFERENCE, "The object the event is about."),
        "related": ref(OBJECT_REFERENCE, "A secondary object of the event."),
        "reportingController": string("Controller that emitted the event."),
        "reportingInstance": string("ID of the controller instance."),
        "series": ref(_EVENTS + "EventSeries", "The series the event belongs to, if any."),
        "type": string("Normal or Warning."),
    },
    required=("eventTime",),
    description="A report of an event somewhere in the cluster.",
)

# Access reviews ------------------------------------------------------------------

_EXTRA = {"type": "object", "additionalProperties": {"type": "array", "items": string()}}


def _extra(description):
    return {**_EXTRA, "description": description}


def _authentication(version):
    prefix = f"io.orch.api.authentication.{version}."
    definitions = {
        prefix + "TokenReviewSpec": obj(
            {"audiences": strings("Audiences the token must be valid for; empty means the "
                                  "server's own."),
             "token": string("The opaque bearer token.")},
            description="The token to check.",
        ),
        prefix + "TokenReviewStatus": obj(
            {
                "audiences": strings("Audiences the token is valid for."),
                "authenticated": boolean("True when the token is valid."),
                "error": string("Why the token could not be checked."),
                "user": ref(prefix + "UserInfo", "The user the token authenticates."),
            },
            description="The result of a token review.",
        ),
        prefix + "UserInfo": obj(
            {
                "extra": _extra("Further information from the authenticator."),
                "groups": strings("Groups the user belongs to."),
                "uid": string("Unique identifier of the user."),
                "username": string("Name of the user."),
            },
            description="The identity of an authenticated user.",
        ),
    }
    kinds = {
        "TokenReview": KindSchema(
            {
                "spec": ref(prefix + "TokenReviewSpec", "The token to check."),
                "status": ref(prefix + "TokenReviewStatus", "The result, set by the server."),
            },
            required=("spec",),
            description="Checks a bearer token and reports whom it authenticates.",
        ),
    }
    if version == "v1":
        definitions[prefix + "SelfSubjectReviewStatus"] = obj(
            {"userInfo": ref(prefix + "UserInfo", "The requesting user.")},
            description="The result of a self subject review.",
        )
        kinds["SelfSubjectReview"] = KindSchema(
            {"status": ref(prefix + "SelfSubjectReviewStatus", "The result, set by the "
                                                               "server.")},
            description="Reports the attributes the server sees for the requesting user.",
        )
    return definitions, kinds


def _authorization(version):
    prefix = f"io.orch.api.authorization.{version}."
    # v1beta1 spells the groups of a review "group".
    groups = "groups" if version == "v1" else "group"
    definitions = {
        prefix + "ResourceAttributes": obj(
            {
                "fieldSelector": ref(prefix + "FieldSelectorAttributes",
                                     "Limits access to objects whose fields match."),
                "group": string('API group of the resource; "*" means all.'),
                "labelSelector": ref(prefix + "LabelSelectorAttributes",
                                     "Limits access to objects whose labels match."),
                "name": string('Name of the object; "" means all.'),
                "namespace": string('Namespace of the action; "" means all (or none, for '
                                    "cluster-scoped resources)."),
                "resource": string('The resource; "*" means all.'),
                "subresource": string('The subresource; "" means none.'),
                "verb": string('The API verb, such as get, list or create; "*" means all.'),
                "version": string('API version of the resource; "*" means all.'),
            },
            description="The attributes of a resource request.",
        ),
        prefix + "NonResourceAttributes": obj(
            {"path": string("URL path of the request."),
             "verb": string("The lowercase HTTP verb.")},
            description="The attributes of a non-resource request.",
        ),
        prefix + "FieldSelectorAttributes": obj(
            {"rawSelector": string("The field selector as written in a query."),
             "requirements": array(ref(prefix + "FieldSelectorRequirement"),
                                   "The parsed selector.", list_type="atomic")},
            description="A limit on access by field selector.",
        ),
        prefix + "LabelSelectorAttributes": obj(
            {"rawSelector": string("The label selector as written in a query."),
             "requirements": array(ref(LABEL_SELECTOR_REQUIREMENT), "The parsed selector.",
                                   list_type="atomic")},
            description="A limit on access by label selector.",
        ),
        prefix + "FieldSelectorRequirement": obj(
            {"key": string("The field the requirement applies to."),
             "operator": string("In, NotIn, Exists or DoesNotExist."),
             "values": strings("Values for In and NotIn.")},
            required=("key", "operator"),
            description="One requirement of a field selector.",
        ),
        prefix + "SubjectAccessReviewSpec": obj(
            {
                "extra": _extra("Extra attributes of the user to check."),
                groups: strings("Groups of the user to check."),
                "nonResourceAttributes": ref(prefix + "NonResourceAttributes",
                                             "A non-resource request to check."),
                "resourceAttributes": ref(prefix + "ResourceAttributes",
                                          "A resource request to check."),
                "uid": string("UID of the user to check."),
                "user": string("Name of the user to check."),
            },
            description="The request to check: exactly one of resourceAttributes and "
                        "nonResourceAttributes.",
        ),
        prefix + "SubjectAccessReviewStatus": obj(
            {
                "allowed": boolean("True when the action is allowed."),
                "denied": boolean("True when the action is explicitly denied."),
                "evaluationError": string("Problem met while checking, if any."),
                "reason": string("Why the action is allowed or denied."),
            },
            required=("allowed",),
            description="The answer of an access review.",
        ),
    }
    review_spec = ref(prefix + "SubjectAccessReviewSpec", "The request to check.")
    review_status = ref(prefix + "SubjectAccessReviewStatus", "The answer, set by the server.")
    kinds = {
        "SubjectAccessReview": KindSchema(
            {"spec": review_spec, "status": review_status}, required=("spec",),
            description="Checks whether a user or group may perform an action.",
        ),
    }
    if version == "v1":
        definitions.update({
            prefix + "SelfSubjectAccessReviewSpec": obj(
                {"nonResourceAttributes": ref(prefix + "NonResourceAttributes",
                                              "A non-resource request to check."),
                 "resourceAttributes": ref(prefix + "ResourceAttributes",
                                           "A resource request to check.")},
                description="The request to check for the requesting user.",
            ),
            prefix + "SelfSubjectRulesReviewSpec": obj(
                {"namespace": string("The namespace to list the rules of.")},
                description="Where to list the requesting user's rules.",
            ),
            prefix + "SubjectRulesReviewStatus": obj(
                {
                    "evaluationError": string("Problem met while listing, if any."),
                    "incomplete": boolean("True when the list may be missing rules."),
                    "nonResourceRules": array(ref(prefix + "NonResourceRule"),
                                              "Allowed non-resource actions.",
                                              list_type="atomic"),
                    "resourceRules": array(ref(prefix + "ResourceRule"),
                                           "Allowed resource actions.", list_type="atomic"),
                },
                required=("resourceRules", "nonResourceRules", "incomplete"),
                description="The rules a user holds in a namespace.",
            ),
            prefix + "ResourceRule": obj(
                {
                    "apiGroups": strings('API groups of the resources; "*" means all.'),
                    "resourceNames": strings("Optional allow-list of names; empty means all."),
                    "resources": strings('Resources; "*" means all, "*/foo" subresource foo '
                                         "of all."),
                    "verbs": strings('Allowed verbs; "*" means all.'),
                },
                required=("verbs",),
                description="Actions allowed on resources.",
            ),
            prefix + "NonResourceRule": obj(
                {"nonResourceURLs": strings('Partial URLs; "*" only as the final segment.'),
                 "verbs": strings('Allowed lowercase HTTP verbs; "*" means all.')},
                required=("verbs",),
                description="Actions allowed on non-resource URLs.",
            ),
        })
        kinds.update({
            "LocalSubjectAccessReview": KindSchema(
                {"spec": review_spec, "status": review_status}, required=("spec",),
                description="Checks whether a user or group may perform an action in one "
                            "namespace.",
            ),
            "SelfSubjectAccessReview": KindSchema(
                {"spec": ref(prefix + "SelfSubjectAccessReviewSpec", "The request to check."),
                 "status": review_status},
                required=("spec",),
                description="Checks whether the requesting user may perform an action.",
            ),
            "SelfSubjectRulesReview": KindSchema(
                {"spec": ref(prefix + "SelfSubjectRulesReviewSpec", "Where to list the rules."),
                 "status": ref(prefix + "SubjectRulesReviewStatus",
                               "The rules, set by the server.")},
                required=("spec",),
                description="Lists the actions the requesting user may perform in a "
                            "namespace.",
            ),
        })
    return definitions, kinds


_AUTHENTICATION_V1_DEFINITIONS, _AUTHENTICATION_V1 = _authentication("v1")
_AUTHENTICATION_V1BETA1_DEFINITIONS, _AUTHENTICATION_V1BETA1 = _authentication("v1beta1")
_AUTHORIZATION_V1_DEFINITIONS, _AUTHORIZATION_V1 = _authorization("v1")
_AUTHORIZATION_V1BETA1_DEFINITIONS, _AUTHORIZATION_V1BETA1 = _authorization("v1beta1")

TOKEN_REVIEW_V1 = _AUTHENTICATION_V1["TokenReview"]
TOKEN_REVIEW_V1BETA1 = _AUTHENTICATION_V1BETA1["TokenReview"]
SELF_SUBJECT_REVIEW_V1 = _AUTHENTICATION_V1["SelfSubjectReview"]
SUBJECT_ACCESS_REVIEW_V1 = _AUTHORIZATION_V1["SubjectAccessReview"]
SUBJECT_ACCESS_REVIEW_V1BETA1 = _AUTHORIZATION_V1BETA1["SubjectAccessReview"]
LOCAL_SUBJECT_ACCESS_REVIEW_V1 = _AUTHORIZATION_V1["LocalSubjectAccessReview"]
SELF_SUBJECT_ACCESS_REVIEW_V1 = _AUTHORIZATION_V1["SelfSubjectAccessReview"]
SELF_SUBJECT_RULES_REVIEW_V1 = _AUTHORIZATION_V1["SelfSubjectRulesReview"]

DEFINITIONS = {
    **_RBAC_DEFINITIONS, **_OTHER_DEFINITIONS,
    **_AUTHENTICATION_V1_DEFINITIONS, **_AUTHENTICATION_V1BETA1_DEFINITIONS,
    **_AUTHORIZATION_V1_DEFINITIONS, **_AUTHORIZATION_V1BETA1_DEFINITIONS,
}
