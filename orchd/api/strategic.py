# -*- test-case-name: tests.api.test_patch -*-
"""
Strategic merge patch, applied to plain JSON objects.

Upstream's algorithm (C{util/strategicpatch/patch.go}, server side): maps
merge, C{null} deletes, lists the schema marks as merging are merged by
their key, other lists are replaced, and the directives C{$patch},
C{$retainKeys}, C{$setElementOrder/<list>} and
C{$deleteFromPrimitiveList/<list>} are honoured.  The schema comes from
L{orchd.api.patchschema}.  Also home to the JSON helpers the other patch
formats share.
"""

import json

import orjson

from orchd.api.bounded import parse_json
from orchd.api.errors import StatusError
from orchd.api.patchschema import PLAIN, kind_schema

DIRECTIVE = "$patch"
RETAIN_KEYS = "$retainKeys"
SET_ORDER = "$setElementOrder"
DELETE_FROM = "$deleteFromPrimitiveList"

# Upstream's error texts (mergepatch/errors.go), which clients may match.
BAD_PRIMITIVE_LIST = "invalid patch format of primitive list"
BAD_RETAIN_KEYS = "invalid patch format of retainKeys"
BAD_SET_ORDER = "invalid patch format of setElementOrder list"
NO_LIST_OF_LISTS = "lists of lists are not supported"

_MISSING = object()
_DELETE = object()  # a map answered "$patch: delete": its key goes away


# -- JSON helpers ----------------------------------------------------------

def copy_json(value):
    """
    Deep copy of a JSON value: through orjson (C, several times faster than a
    walk in Python on a pod), or by a walk for what orjson cannot write
    (integers past 64 bits).
    """
    if not isinstance(value, (dict, list)):
        return value
    try:
        return orjson.loads(orjson.dumps(value))
    except (TypeError, orjson.JSONEncodeError):
        return _walk_copy(value)


def _walk_copy(value):
    if isinstance(value, dict):
        return {k: _walk_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk_copy(v) for v in value]
    return value


def decode_document(document, what):
    """Read a patch given as bytes or text; objects pass through."""
    if isinstance(document, (bytes, bytearray, memoryview)):
        document = bytes(document).decode("utf-8", "replace")
    if isinstance(document, str):
        try:
            return parse_json(document)
        except ValueError as e:
            raise StatusError.bad_request(f"error decoding {what}: {e}") from None
    return document


def json_kind(value):
    """The JSON type name of a value, for messages."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if value is None:
        return "null"
    return "number"


def go_format(value):
    """Render a value the way Go's C{%v} does, as upstream messages show it."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_format(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_format(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return str(value)


# -- strategic merge patch -----------------------------------------------------

class _PatchError(Exception):
    """A strategic patch that cannot be applied; C{code} is 400 or 422."""

    def __init__(self, message, code=400):
        super().__init__(message)
        self.code = code


def apply_strategic_merge_patch(obj, patch, schema=None):
    """
    Apply a strategic merge patch using C{schema}, the kind's patch metadata
    (the C{patch_schema} of its L{orchd.api.kinds.KindInfo}).

    Lists the schema marks as merging are merged by their key; other lists
    are replaced; directives (C{$patch}, C{$retainKeys},
    C{$setElementOrder/...}, C{$deleteFromPrimitiveList/...}) are honoured and
    never appear in the result.  C{schema} None means ObjectMeta rules only.

    @raise StatusError: 400 for a malformed patch or directive, 422 for a
        list of lists.
    """
    patch = decode_document(patch, "patch")
    if not isinstance(patch, dict):
        raise StatusError.bad_request(
            f"json: cannot unmarshal {json_kind(patch)} into Go value of type "
            "map[string]interface {}")
    original = copy_json(obj) if isinstance(obj, dict) else {}
    try:
        result = _merge_map(original, patch, kind_schema() if schema is None else schema)
    except _PatchError as e:
        if e.code == 422:
            raise StatusError.unprocessable(str(e)) from None
        raise StatusError.bad_request(str(e)) from None
    return {} if result is _DELETE else result


def _field(schema, name):
    return schema.get(name, PLAIN)


def _bad_patch_type(directive, where):
    return _PatchError(f"unknown patch type: {go_format(directive)} in map: {go_format(where)}")


def _no_merge_key(item, key):
    return _PatchError(f"map: {go_format(item)} does not contain declared merge key: {key}")


def _target(name, prefix, message):
    """The list a parallel directive key (C{$prefix/<list>}) applies to."""
    head, sep, tail = name.partition("/")
    if head != prefix or not sep:
        raise _PatchError(message)
    return tail


def _merge_map(original, patch, schema):
    """Merge C{patch} into C{original} (owned, mutated); may return L{_DELETE}."""
    if DIRECTIVE in patch:
        directive = patch[DIRECTIVE]
        if directive == "replace":
            rest = {k: v for k, v in patch.items() if k != DIRECTIVE}
            return _merge_map({}, rest, schema)
        if directive == "delete":
            return _DELETE
        if directive != "merge":
            raise _bad_patch_type(directive, patch)
    if RETAIN_KEYS in patch:
        _retain_keys(original, patch)
    ordered = set()
    for key, value in patch.items():
        if key.startswith(SET_ORDER):
            name = _target(key, SET_ORDER, BAD_SET_ORDER)
            if _order_list(original, patch, name, value, _field(schema, name)):
                ordered.add(name)
    deletions = []
    for key, value in patch.items():
        if key.startswith("$"):
            if key.startswith(DELETE_FROM):
                deletions.append((_target(key, DELETE_FROM, BAD_PRIMITIVE_LIST), value))
            continue  # other directives are done; unknown ones are dropped
        if key in ordered:
            continue
        if value is None:
            original.pop(key, None)
            continue
        merged = _merge_value(original.get(key, _MISSING), value, _field(schema, key))
        if merged is _DELETE:
            original.pop(key, None)
        else:
            original[key] = merged
    for name, values in deletions:
        _delete_from_list(original, name, values)
    return original


def _merge_value(current, value, field):
    if isinstance(value, dict) and isinstance(current, dict) and not field.replace:
        return _merge_map(current, value, field.fields)
    if isinstance(value, list) and isinstance(current, list) and field.merge:
        return _merge_list(current, value, field)
    return _fresh(value, field)


def _fresh(value, field):
    """A patch value that replaces whatever was there, with directives applied."""
    if isinstance(value, dict):
        return _merge_map({}, value, field.fields if not field.replace else {})
    if isinstance(value, list):
        if field.merge:
            return _merge_list([], value, field)
        return [_strip(v) for v in value if not (isinstance(v, dict) and DIRECTIVE in v)]
    return value


def _strip(value):
    """Copy an element of a replaced list, dropping directive keys."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _retain_keys(original, patch):
    keys = patch[RETAIN_KEYS]
    if not isinstance(keys, list):
        raise _PatchError(BAD_RETAIN_KEYS)
    allowed = {k for k in keys if isinstance(k, str)}
    for key, value in patch.items():
        if value is None or key.startswith("$"):
            continue
        if key not in allowed:
            raise _PatchError(BAD_RETAIN_KEYS)
    for key in [k for k in original if k not in allowed]:
        del original[key]


def _identity(value):
    """A hashable stand-in for a scalar (or, rarely, composite) JSON value."""
    try:
        hash(value)
    except TypeError:
        return ("json", json.dumps(value, sort_keys=True))
    return (type(value) is bool, value)


def _element_kind(*lists):
    """The one kind of element the lists hold, as upstream's sliceElementType."""
    kind = None
    for items in lists:
        for item in items:
            if isinstance(item, list):
                raise _PatchError(NO_LIST_OF_LISTS, 422)
            this = json_kind(item)
            if kind is None:
                kind = this
            elif this != kind:
                raise _PatchError(
                    "list element types are not identical: " + go_format(list(lists)))
    return kind


def _merge_list(original, patch, field):
    """Merge a patch list into an owned original list, per C{field}."""
    if not original and not patch:
        return original
    if _element_kind(original, patch) != "object":
        seen = set()
        union = []
        for item in original + patch:
            ident = _identity(item)
            if ident not in seen:
                seen.add(ident)
                union.append(copy_json(item))
        return union
    key = field.key
    if key is None:
        raise _PatchError("cannot merge lists without merge key for type map")
    original, items = _special_elements(original, patch, key, field)
    for item in items:
        if key not in item:
            raise _no_merge_key(item, key)
        index = _find(original, key, item[key])
        if index is None:
            merged = _merge_map({}, item, field.fields)
            if merged is not _DELETE:
                original.append(merged)
        else:
            merged = _merge_map(original[index], item, field.fields)
            if merged is _DELETE:
                del original[index]
            else:
                original[index] = merged
    return original


def _find(items, key, value):
    want = _identity(value)
    for index, item in enumerate(items):
        if isinstance(item, dict) and key in item and _identity(item[key]) == want:
            return index
    return None


def _special_elements(original, patch, key, field):
    """Apply C{$patch} list elements; return the original and the plain items."""
    items = []
    replace = False
    for item in patch:
        directive = item.get(DIRECTIVE, _MISSING)
        if directive is _MISSING or directive == "merge":
            items.append(item)
        elif directive == "delete":
            if key not in item:
                raise _no_merge_key(item, key)
            want = _identity(item[key])
            original = [o for o in original
                        if not (isinstance(o, dict) and key in o and _identity(o[key]) == want)]
        elif directive == "replace":
            replace = True
        else:
            raise _bad_patch_type(directive, item)
    if replace:
        kept = (_merge_map({}, item, field.fields) for item in items)
        return [item for item in kept if item is not _DELETE], []
    return original, items


def _delete_from_list(original, name, values):
    if not isinstance(values, list):
        raise _PatchError(BAD_PRIMITIVE_LIST)
    current = original.get(name)
    if isinstance(current, list):
        drop = {_identity(v) for v in values}
        original[name] = [v for v in current if _identity(v) not in drop]


def _order_list(original, patch, name, order, field):
    """
    Merge list C{name} and order it by its C{$setElementOrder} list.

    Returns False when there is nothing to order (the list is in neither
    side, or the patch deletes it), leaving the key to the plain merge.
    """
    if not isinstance(order, list):
        raise _PatchError(BAD_SET_ORDER)
    patch_list = patch.get(name, _MISSING)
    if patch_list is None:
        return False
    if patch_list is not _MISSING and not isinstance(patch_list, list):
        raise _PatchError(BAD_SET_ORDER)
    current = original.get(name, _MISSING)
    if not isinstance(current, list):
        current = _MISSING
    if current is _MISSING and patch_list is _MISSING:
        return False
    key = field.key if field.merge else None
    if patch_list is not _MISSING:
        _check_order(patch_list, order, key)
    if patch_list is _MISSING:
        merged = current
    elif field.merge:
        merged = _merge_list([] if current is _MISSING else current, patch_list, field)
    else:
        merged = _fresh(patch_list, field)
    server = [] if current is _MISSING else current
    original[name] = _apply_order(merged, order, server, key)
    return True


def _ident_of(item, key):
    if key is None or not isinstance(item, dict):
        return _identity(item)
    if key not in item:
        raise _no_merge_key(item, key)
    return _identity(item[key])


def _check_order(patch_list, order, key):
    """The patch items must appear in the order list, in the same order."""
    if not patch_list or not order:
        return
    items = [i for i in patch_list if not (isinstance(i, dict) and i.get(DIRECTIVE) == "delete")]
    at = seen = 0
    while at < len(items) and seen < len(order):
        item = items[at]
        if isinstance(item, dict) and DIRECTIVE in item:
            at += 1
            continue
        if _ident_of(item, key) == _ident_of(order[seen], key):
            at += 1
        seen += 1
    if at < len(items):
        raise _PatchError(
            f"The order in patch list:\n{go_format(patch_list)}\n doesn't match "
            f"{SET_ORDER} list:\n{go_format(order)}\n")


def _apply_order(merged, order, server, key):
    """
    Order a merged list: items named by C{order} follow it, the others keep
    their place from the live list, interleaved as upstream does.
    """
    wanted = {}
    for index, item in enumerate(order):
        wanted.setdefault(_ident_of(item, key), index)
    live = {}
    for index, item in enumerate(server):
        live.setdefault(_ident_of(item, key), index)
    named, others = [], []
    for item in merged:
        (named if _ident_of(item, key) in wanted else others).append(item)
    named.sort(key=lambda item: wanted[_ident_of(item, key)])
    others.sort(key=lambda item: live.get(_ident_of(item, key), len(server)))
    result = []
    i = j = 0
    while i < len(others) or j < len(named):
        if j >= len(named):
            result.append(others[i])
            i += 1
        elif i >= len(others):
            result.append(named[j])
            j += 1
        else:
            left = live.get(_ident_of(others[i], key))
            right = live.get(_ident_of(named[j], key))
            if left is not None and right is not None and left < right:
                result.append(others[i])
                i += 1
            else:
                result.append(named[j])
                j += 1
    return result
