# -*- test-case-name: tests.api.test_discovery,tests.api.test_versions,tests.api.test_meta -*-
"""
What describes a served kind at the API level: L{KindInfo}, the verbs and
subresources it may have, the name rules, and the API group names.

A KindInfo names the group, version, plural resource, kind, scope, short
names, verbs and subresources of a kind, and carries its API-level facets:
its schema (OpenAPI and field validation), its printer (C{kubectl get}
columns), its strategic merge patch metadata and its selectable fields.
Code that serves a kind reads them as attributes of the kind's KindInfo;
nothing looks them up in tables. The built-in kinds are the rows of
L{orchd.registry.kinds.builtin}, which pairs each KindInfo with its strategy;
this module has no table of kinds.
"""

from orchd.api.patchschema import DEFAULT as DEFAULT_PATCH_SCHEMA
from orchd.api.schemadefs_base import LOOSE

STANDARD_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
NO_COLLECTION_DELETE = ("create", "delete", "get", "list", "patch", "update", "watch")
CREATE_ONLY = ("create",)
READ_ONLY = ("get", "list")

#: Verbs of the subresources the generic registry serves.
SUBRESOURCE_VERBS = {
    "status": ("get", "patch", "update"),
    "finalize": ("update",),
    "approval": ("get", "patch", "update"),
    "token": ("create",),
    "binding": ("create",),
    "eviction": ("create",),
    "proxy": ("create", "delete", "get", "patch", "update"),
    "log": ("get",),
    "scale": ("get", "patch", "update"),
}

#: Subresources answered with a raw stream from elsewhere (the node agent),
#: not with API objects: an L{orchd.registry.catalog.IStreamConnector} serves them.
STREAM_SUBRESOURCES = frozenset(("proxy", "log"))

# Name rules, as the upstream validators name them.
SUBDOMAIN = "subdomain"          # RFC 1123 subdomain, at most 253 characters
LABEL = "label"                  # RFC 1123 label, at most 63 characters
DNS1035 = "dns1035"              # RFC 1035 label: starts with a letter
PATH_SEGMENT = "path-segment"    # anything that is a valid URL path segment


class KindInfo:
    """
    One served resource: C{(group, version, resource)} and what describes it.

    @ivar stored: False for kinds answered without storage (reviews, bindings).
    @ivar name_rule: which rule object names must follow.
    @ivar schema: the L{orchd.api.schemadefs_base.KindSchema} of the objects,
        for OpenAPI and field validation: L{LOOSE} (typed metadata, every
        other field kept) unless the kind is described field by field; None
        for a kind with no schema at all (the object a subresource takes),
        whose fields are neither pruned nor checked.
    @ivar printer: the L{orchd.api.printers.base.Printer} of its Tables, or
        None for the default table (Name, Created At).
    @ivar patch_schema: its strategic merge patch metadata, rooted at the
        object (L{orchd.api.patchschema}); ObjectMeta's rules by default.
    @ivar selectable_fields: the field-selector names it has besides
        C{metadata.name} and C{metadata.namespace}.
    @ivar subresource_kinds: C{{subresource: (group, version, kind)}} for the
        subresources that take an object of their own kind (see
        L{subresource_kind}).
    @ivar storage_version: the version its objects are stored in, the same
        for every version of the resource; its own version by default.
    @ivar delete_answers_object: True for the kinds whose DELETE answers the
        deleted object, not a C{Status}, when it is removed at once (upstream's
        C{ReturnDeletedObject}: pods, services, persistent volumes and claims,
        ...; its OpenAPI's delete responses say which).
    @ivar pruner: None, or C{pruner(obj) -> paths of the unknown fields it
        removed}: the pruning of a kind whose schema is not described field
        by field here (a custom resource's structural schema), used instead
        of the one compiled from C{schema}.
    @ivar strategic_patch: False for kinds that take no strategic merge
        patch (custom resources: 415, as upstream).
    @ivar deprecation: None, or the C{Warning} a request to this version
        gets (a custom resource version marked deprecated).
    @ivar derived: what other modules compute from these facets once and
        keep with the kind (OpenAPI definitions, the compiled pruning
        schema), so that it goes when the kind goes. Keys are private to the
        module that sets them.
    """

    __slots__ = (
        "group", "version", "resource", "kind", "namespaced", "short_names", "verbs",
        "subresources", "categories", "name_rule", "stored", "singular", "schema", "printer",
        "patch_schema", "selectable_fields", "subresource_kinds", "storage_version", "derived",
        "delete_answers_object", "pruner", "strategic_patch", "deprecation",
    )

    def __init__(self, group, version, resource, kind, namespaced, short_names=(),
                 verbs=STANDARD_VERBS, subresources=(), categories=(), name_rule=SUBDOMAIN,
                 stored=True, schema=LOOSE, printer=None, patch_schema=DEFAULT_PATCH_SCHEMA,
                 selectable_fields=(), subresource_kinds=None, storage_version=None,
                 delete_answers_object=False, pruner=None, strategic_patch=True,
                 deprecation=None, singular=None):
        self.group = group
        self.version = version
        self.resource = resource
        self.kind = kind
        self.namespaced = namespaced
        self.short_names = tuple(short_names)
        self.verbs = tuple(verbs)
        self.subresources = tuple(subresources)
        self.categories = tuple(categories)
        self.name_rule = name_rule
        self.stored = stored
        self.singular = singular or kind.lower()
        self.schema = schema
        self.printer = printer
        self.patch_schema = patch_schema
        self.selectable_fields = tuple(selectable_fields)
        self.subresource_kinds = dict(subresource_kinds or {})
        self.storage_version = storage_version or version
        self.delete_answers_object = delete_answers_object
        self.pruner = pruner
        self.strategic_patch = strategic_patch
        self.deprecation = deprecation
        self.derived = {}

    @property
    def group_version(self):
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self):
        """The C{apiVersion} objects of this kind carry."""
        return self.group_version

    @property
    def list_kind(self):
        return self.kind + "List"

    @property
    def qualified_resource(self):
        """C{configmaps}, C{deployments.apps}: the name used in messages."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def stage(self):
        """C{alpha}, C{beta} or C{stable}, read off the version name."""
        if "alpha" in self.version:
            return "alpha"
        if "beta" in self.version:
            return "beta"
        return "stable"

    @property
    def has_status(self):
        return "status" in self.subresources

    def key_prefix(self, namespace=None):
        """
        The storage prefix of this resource, or of one namespace of it.

        Keys are C{/registry/[<group>/]<resource>/[<namespace>/]<name>}; the
        core group has no segment of its own.
        """
        base = f"/registry/{self.group}/{self.resource}/" if self.group else f"/registry/{self.resource}/"
        if namespace:
            return f"{base}{namespace}/"
        return base

    def key(self, namespace, name):
        return f"{self.key_prefix(namespace if self.namespaced else None)}{name}"

    def __repr__(self):
        return f"<KindInfo {self.group_version} {self.resource}>"


def subresource_kind(info, subresource):
    """
    The kind a subresource sends and answers: its parent's, except for the
    subresources that take an object of their own (C{serviceaccounts/token}
    takes a TokenRequest), which its parent names in C{subresource_kinds}.
    Such a kind has no schema here: its objects are not pruned.
    """
    own = info.subresource_kinds.get(subresource)
    if own is None:
        return info
    group, version, kind = own
    return KindInfo(group, version, f"{info.resource}/{subresource}", kind, info.namespaced,
                    verbs=SUBRESOURCE_VERBS[subresource], stored=False, schema=None)


CORE = ""
ADMISSION = "admissionregistration.orch.io"
APIEXTENSIONS = "apiextensions.orch.io"
APIREGISTRATION = "apiregistration.orch.io"
APPS = "apps"
AUTHENTICATION = "authentication.orch.io"
AUTHORIZATION = "authorization.orch.io"
AUTOSCALING = "autoscaling"
BATCH = "batch"
CERTIFICATES = "certificates.orch.io"
COORDINATION = "coordination.orch.io"
DISCOVERY = "discovery.orch.io"
EVENTS = "events.orch.io"
FLOWCONTROL = "flowcontrol.apiserver.orch.io"
METRICS = "metrics.orch.io"
NETWORKING = "networking.orch.io"
NODE = "node.orch.io"
POLICY = "policy"
RBAC = "rbac.authorization.orch.io"
SCHEDULING = "scheduling.orch.io"
STORAGE = "storage.orch.io"


def key_prefix_of(group, resource):
    """
    The storage prefix of a resource, the same for each of its versions (as
    L{KindInfo.key_prefix}), for code that reads the store without a
    KindInfo at hand.
    """
    return f"/registry/{group}/{resource}/" if group else f"/registry/{resource}/"
