# -*- test-case-name: tests.api.test_schemas -*-
"""
Building blocks of the schema descriptions (L{orchd.api.schemas}).

A schema is a plain JSON-Schema-shaped dict in the subset Swagger 2.0 and
OpenAPI 3.0 share (C{type}, C{format}, C{properties}, C{items},
C{additionalProperties}, C{required}, C{x-kubernetes-*} extensions), with
C{$ref} holding a bare definition name. The one exception is C{oneOf},
which only quantities and int-or-string values use; Swagger 2.0 has no
C{oneOf}, and rendering there turns such a value into the string it is
serialized as.

Patch extensions (C{x-kubernetes-patch-strategy}, C{-patch-merge-key}) are
never written here: they are derived from L{orchd.api.patchschema}.
"""

GVK_EXTENSION = "x-kubernetes-group-version-kind"
PRESERVE = "x-kubernetes-preserve-unknown-fields"

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
TIME = META + "Time"
MICRO_TIME = META + "MicroTime"
CONDITION = META + "Condition"
LABEL_SELECTOR = META + "LabelSelector"
LABEL_SELECTOR_REQUIREMENT = META + "LabelSelectorRequirement"
RAW_EXTENSION = "io.orch.apimachinery.pkg.runtime.RawExtension"
QUANTITY = "io.orch.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "io.orch.apimachinery.pkg.util.intstr.IntOrString"

#: Prefix of definitions of the core group's types.
CORE = "io.orch.api.core.v1."


def string(description="", fmt=None, enum=None):
    schema = {"type": "string"}
    if fmt:
        schema["format"] = fmt
    if enum:
        schema["enum"] = list(enum)
    return _described(schema, description)


def integer(description="", fmt="int64"):
    return _described({"type": "integer", "format": fmt}, description)


def int32(description=""):
    return integer(description, fmt="int32")


def boolean(description=""):
    return _described({"type": "boolean"}, description)


def timestamp(description=""):
    """An RFC 3339 time (C{metav1.Time}), by reference as upstream writes it."""
    return ref(TIME, description)


def micro_time(description=""):
    """An RFC 3339 time with microseconds (C{metav1.MicroTime})."""
    return ref(MICRO_TIME, description)


def string_map(description="", fmt=None, **extensions):
    schema = {"type": "object", "additionalProperties": string(fmt=fmt)}
    schema.update(_extensions(extensions))
    return _described(schema, description)


def array(items, description="", **extensions):
    """A list; C{extensions} are C{x-kubernetes-*} keys with C{_} for C{-}."""
    schema = {"type": "array", "items": items}
    schema.update(_extensions(extensions))
    return _described(schema, description)


def strings(description="", list_type="atomic"):
    """A list of strings, atomic unless told otherwise."""
    return array(string(), description, list_type=list_type)


def obj(properties=None, required=(), description="", **extensions):
    schema = {"type": "object"}
    if properties:
        schema["properties"] = dict(sorted(properties.items()))
    if required:
        schema["required"] = list(required)
    schema.update(_extensions(extensions))
    return _described(schema, description)


def preserved(description=""):
    """An object of any shape, kept as it is (never pruned)."""
    return obj(description=description, preserve_unknown_fields=True)


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


class KindSchema:
    """
    The fields of one kind besides C{apiVersion}, C{kind} and C{metadata}.

    @ivar complete: true when C{properties} name every field upstream has,
        so that clients may compute strategic merge patches from the schema
        and the server may prune fields it does not name. A loose schema is
        never complete.
    """

    def __init__(self, properties=None, required=(), description="", complete=True):
        self.properties = properties or {}
        self.required = tuple(required)
        self.description = description
        self.complete = complete


LOOSE = KindSchema(complete=False)
