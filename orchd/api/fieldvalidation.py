# -*- test-case-name: tests.api.test_fieldvalidation -*-
"""
Unknown fields: finding and dropping the fields a kind's schema does not
know, and the messages of the C{fieldValidation} modes (REFERENCE section 5).

Upstream decodes built-in kinds strictly into Go structs; its errors name
each unknown field by its path from the object root, dotted, with list
indices in brackets and no leading dot: C{unknown field "spec.foo"},
C{unknown field "spec.template.spec.initContainers[0].restartPolicy"}, and a
top-level field bare: C{unknown field "foo"}. Duplicate fields read
C{duplicate field "metadata.name"}. Map keys join the path like fields.

Pruning follows the schemas of L{orchd.api.schemas}, compiled once per kind
(and kept with its KindInfo) into a small tree walked without allocation
for known fields:

  - C{apiVersion}, C{kind} and C{metadata} are always known; metadata is
    pruned per ObjectMeta, for loose kinds too;
  - below C{x-kubernetes-preserve-unknown-fields}, unknown fields are kept
    (fields the schema does name are still checked, as upstream's pruning
    does); loose kinds keep everything but their metadata;
  - objects without properties (embedded objects, field sets) and maps of
    scalars are opaque: nothing inside them is looked at.
"""

from orchd.api import schemas
from orchd.api.errors import StatusError

_MISSING = object()


class _Object:
    """
    A compiled object schema.

    @ivar props: field name -> compiled schema (None: known, not descended).
    @ivar extra: the compiled schema of map values, None when they are not
        descended, or C{_MISSING} when the object has no other fields.
    @ivar preserve: unknown fields are kept.
    """

    __slots__ = ("props", "extra", "preserve")

    def __init__(self):
        self.props = {}
        self.extra = _MISSING
        self.preserve = False


class _Array:
    __slots__ = ("items",)

    def __init__(self, items):
        self.items = items


def _compile(schema, pool, memo):
    """The pruning tree of C{schema}: L{_Object}, L{_Array}, or None (nothing to check)."""
    name = schema.get("$ref")
    if name is not None:
        if name not in memo:
            memo[name] = None  # a reference cycle ends in "nothing to check"
            memo[name] = _compile(pool[name], pool, memo)
        return memo[name]
    kind = schema.get("type")
    if kind == "array":
        items = _compile(schema.get("items", {}), pool, memo)
        return None if items is None else _Array(items)
    properties = schema.get("properties")
    additional = schema.get("additionalProperties", _MISSING)
    if kind != "object" and properties is None:
        return None
    if not properties:
        if additional is _MISSING or not isinstance(additional, dict):
            return None  # free-form: an embedded object, a field set
        compiled = _compile(additional, pool, memo)
        if compiled is None:
            return None  # a map of scalars
        node = _Object()
        node.extra = compiled
        return node
    node = _Object()
    node.preserve = bool(schema.get(schemas.PRESERVE))
    for key, value in properties.items():
        node.props[key] = _compile(value, pool, memo)
    if isinstance(additional, dict):
        node.extra = _compile(additional, pool, memo)
    elif additional is True:
        node.extra = None
    return node


_KIND = "fieldvalidation.kind"
_LIST = "fieldvalidation.list"


def _root(info, listing):
    key = _LIST if listing else _KIND
    node = info.derived.get(key, _MISSING)
    if node is _MISSING:
        node = None
        if info.schema is not None:
            schema = schemas.kind_definitions(info)[1 if listing else 0]
            # A list's items refer to the kind's definition by name.
            pool = {**schemas.named_definitions(),
                    schemas.definition_name(info): schemas.kind_definitions(info)[0]}
            node = _compile(schema, pool, {})
            if isinstance(node, _Object):
                # The type and object metadata are known whatever the schema says.
                for name in ("apiVersion", "kind"):
                    node.props.setdefault(name, None)
        info.derived[key] = node
    return node


def _prune_object(value, node, prefix, found):
    props = node.props
    doomed = None
    for key, item in value.items():
        child = props.get(key, _MISSING)
        if child is _MISSING:
            child = node.extra
            if child is _MISSING:
                if not node.preserve:
                    if doomed is None:
                        doomed = [key]
                    else:
                        doomed.append(key)
                    found.append(prefix + key)
                continue
        if child is None:
            continue
        kind = type(item)
        if kind is dict:
            if type(child) is _Object:
                _prune_object(item, child, prefix + key + ".", found)
        elif kind is list and type(child) is _Array:
            _prune_list(item, child.items, prefix + key, found)
    if doomed is not None:
        for key in doomed:
            del value[key]


def _prune_list(values, node, path, found):
    is_object = type(node) is _Object
    for index, item in enumerate(values):
        kind = type(item)
        if kind is dict:
            if is_object:
                _prune_object(item, node, f"{path}[{index}].", found)
        elif kind is list and type(node) is _Array:
            _prune_list(item, node.items, f"{path}[{index}]", found)


def prune_unknown_fields(obj, info, listing=False):
    """
    Remove from C{obj} (in place) every field the kind's schema does not
    know, and return their paths in document order, in upstream's form
    (C{spec.foo}, C{spec.ports[0].bar}). Known fields are left untouched.
    Kinds without a schema (C{info.schema} None), and anything not a dict,
    are left alone.

    @param info: the L{orchd.api.kinds.KindInfo} of the object.
    @param listing: C{obj} is a list of that kind (C{ConfigMapList}).
    """
    if type(obj) is not dict:
        return []
    if info.pruner is not None:
        return [] if listing else info.pruner(obj)
    node = _root(info, listing)
    if node is None:
        return []
    found = []
    _prune_object(obj, node, "", found)
    return found


def unknown_field_message(path):
    """The strict decoding error (and warning) text of an unknown field."""
    return f'unknown field "{path}"'


def duplicate_field_message(path):
    """The strict decoding error (and warning) text of a duplicated field."""
    return f'duplicate field "{path}"'


def strict_error(kind, version, messages):
    """
    The 400 of C{fieldValidation=Strict}:
    C{<Kind> in version "<v>" cannot be handled as a <Kind>: strict decoding
    error: <messages joined by ", ">}. C{version} is the bare version
    (C{v1}), as upstream writes it.
    """
    return StatusError.bad_request(
        f'{kind} in version "{version}" cannot be handled as a {kind}: '
        f"strict decoding error: {', '.join(messages)}")
