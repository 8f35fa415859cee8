# -*- test-case-name: tests.api.test_patch -*-
"""
Strategic merge patch metadata of the built-in kinds.

Upstream reads it from the C{patchStrategy}/C{patchMergeKey} tags of the Go
types; here it is data.  A schema is a dict from a field name to a
L{PatchField}; a field that is absent merges as a map if both sides are
maps and is replaced otherwise, so only lists that merge, and the maps
leading to them, need rows.  A kind's schema is the C{patch_schema} of its
L{orchd.api.kinds.KindInfo}: one of the constants below, named in its row
of L{orchd.registry.kinds.builtin}, or L{DEFAULT} (ObjectMeta's rules only).
"""


class PatchField:
    """
    How one field merges.

    @ivar merge: for a list, merge element by element instead of replacing.
    @ivar key: the merge key of a list of maps (a field name, or a tuple of
        names for a custom resource's multi-key C{map} list); None for a list
        of scalars.
    @ivar retain_keys: the field carries C{retainKeys} (a union type).
    @ivar replace: for a map, replace it whole instead of merging.
    @ivar fields: the schema of the map, or of each list element.
    """

    __slots__ = ("merge", "key", "retain_keys", "replace", "fields")

    def __init__(self, merge=False, key=None, retain_keys=False, replace=False, fields=None):
        self.merge = merge
        self.key = key
        self.retain_keys = retain_keys
        self.replace = replace
        self.fields = fields if fields is not None else {}

    def __repr__(self):
        flags = [name for name in ("merge", "retain_keys", "replace") if getattr(self, name)]
        kind = "+".join(flags) or "map"
        return f"<PatchField {kind} key={self.key!r} fields={sorted(self.fields)}>"


#: A field with no metadata of its own: maps merge, lists are replaced.
PLAIN = PatchField()


def struct(fields, retain_keys=False):
    """A map field whose own fields have patch metadata."""
    return PatchField(retain_keys=retain_keys, fields=fields)


def merge_list(key=None, fields=None, retain_keys=False):
    """A list merged by C{key} (maps), or as a set (scalars) when C{key} is None."""
    return PatchField(merge=True, key=key, retain_keys=retain_keys, fields=fields)


OBJECT_META = {
    "finalizers": merge_list(),
    "ownerReferences": merge_list("uid"),
}

_CONDITIONS = merge_list("type")

CONTAINER = {
    "ports": merge_list("containerPort"),
    "env": merge_list("name"),
    "volumeMounts": merge_list("mountPath"),
    "volumeDevices": merge_list("devicePath"),
}

POD_SPEC = {
    "volumes": merge_list("name", retain_keys=True),
    "initContainers": merge_list("name", CONTAINER),
    "containers": merge_list("name", CONTAINER),
    "ephemeralContainers": merge_list("name", CONTAINER),
    "imagePullSecrets": merge_list("name"),
    "hostAliases": merge_list("ip"),
    "topologySpreadConstraints": merge_list("topologyKey"),
    "schedulingGates": merge_list("name"),
    "resourceClaims": merge_list("name", retain_keys=True),
}

POD_STATUS = {
    "conditions": _CONDITIONS,
    "podIPs": merge_list("ip"),
    "hostIPs": merge_list("ip"),
    "resourceClaimStatuses": merge_list("name", retain_keys=True),
}

POD_TEMPLATE_SPEC = {
    "metadata": struct(OBJECT_META),
    "spec": struct(POD_SPEC),
}

_TEMPLATE = struct(POD_TEMPLATE_SPEC)
_CONDITIONS_ONLY = struct({"conditions": _CONDITIONS})


def kind_schema(**fields):
    """The schema of a whole object: ObjectMeta rules plus the given fields."""
    schema = {"metadata": struct(OBJECT_META)}
    schema.update(fields)
    return schema


def _workload(retain_strategy=False):
    spec = {"template": _TEMPLATE}
    if retain_strategy:
        spec["strategy"] = struct({}, retain_keys=True)
    return kind_schema(spec=struct(spec), status=_CONDITIONS_ONLY)


#: The schema of kinds without rules of their own: ObjectMeta's only.
DEFAULT = kind_schema()

POD = kind_schema(spec=struct(POD_SPEC), status=struct(POD_STATUS))
POD_TEMPLATE = kind_schema(template=_TEMPLATE)
REPLICATION_CONTROLLER = _workload()
NODE = kind_schema(
    spec=struct({"podCIDRs": merge_list()}),
    status=struct({"conditions": _CONDITIONS, "addresses": merge_list("type")}),
)
SERVICE = kind_schema(spec=struct({"ports": merge_list("port")}), status=_CONDITIONS_ONLY)
NAMESPACE = kind_schema(status=_CONDITIONS_ONLY)
PERSISTENT_VOLUME_CLAIM = kind_schema(status=_CONDITIONS_ONLY)
SERVICE_ACCOUNT = kind_schema(secrets=merge_list("name"))
DEPLOYMENT = _workload(retain_strategy=True)
REPLICA_SET = _workload()
STATEFUL_SET = _workload()
DAEMON_SET = _workload()
JOB = _workload()
CRON_JOB = kind_schema(
    spec=struct({"jobTemplate": struct({"metadata": struct(OBJECT_META),
                                        "spec": struct({"template": _TEMPLATE})})}),
)
POD_DISRUPTION_BUDGET = kind_schema(status=_CONDITIONS_ONLY)
API_SERVICE = kind_schema(status=_CONDITIONS_ONLY)
