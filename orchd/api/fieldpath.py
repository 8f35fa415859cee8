# -*- test-case-name: tests.api.test_fieldmanager -*-
"""
Field sets of server-side apply: their algebra, and FieldsV1 parsing and printing.

A field set is kept in its wire form, the trie that
C{metadata.managedFields[].fieldsV1} carries (structured-merge-diff
C{fieldpath/serialize.go}): keys are serialized path elements, C{f:<field>},
C{k:<key fields as JSON>}, C{v:<value as JSON>}, C{i:<index>}; a child C{{}}
is a member with nothing below it, and C{"."} marks a member that also has
children.  Working on that form means a stored set is used as it is and an
untouched one goes back out without a copy.  Sets are canonical: C{"."}
first, then path elements in upstream order (fields, keys, values, indices,
each sorted as upstream compares them).  No function here mutates its
arguments; results may share unchanged parts with them.

The walks over objects that make sets (and raise L{SchemaError}) are in
L{orchd.api.fieldwalk}: this module works on paths alone.
"""

import json
import re

from orchd.api.bounded import parse_json

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode
_encode_string = json.encoder.encode_basestring
_HTML = re.compile("[<>&\u2028\u2029]")
_QUOTED = {}
_GO_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                             "\u2028": "\\u2028", "\u2029": "\\u2029"})


class SchemaError(ValueError):
    """An applied configuration that the kind's list keys cannot index."""


# -- path elements -----------------------------------------------------------

def go_json(value):
    """Compact JSON as Go writes it: sorted keys, HTML characters escaped."""
    kind = type(value)
    if kind is str:
        text = _encode_string(value)
    elif kind is int:
        return str(value)
    else:
        if kind is float and value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        text = _encode(value)
    return text.translate(_GO_ESCAPES) if _HTML.search(text) else text


def key_element(key, value):
    """The path element of an associative list item: C{k:{"name":"c"}}."""
    quoted = _QUOTED.get(key)
    if quoted is None:
        quoted = _QUOTED[key] = go_json(key)
    return "k:{" + quoted + ":" + go_json(value) + "}"


def item_key_element(key, item):
    """
    The path element of an associative list item keyed by C{key}: one field
    name, or a tuple of names (a custom resource's C{x-kubernetes-list-map-keys}),
    whose fields are written sorted by name as upstream's C{k:{"name":"a","port":80}}.

    @return: None when C{item} lacks one of the key fields.
    """
    if type(key) is str:
        if key not in item:
            return None
        return key_element(key, item[key])
    parts = []
    for name in sorted(key):
        if name not in item:
            return None
        parts.append(go_json(name) + ":" + go_json(item[name]))
    return "k:{" + ",".join(parts) + "}"


def key_fields(key):
    """The field names of a list's key (one name, or a tuple of names)."""
    return (key,) if type(key) is str else tuple(key)


def value_element(value):
    """The path element of a set item: C{v:"a"}."""
    return "v:" + go_json(value)


def parse_element(element):
    """
    Split a serialized path element into its kind (C{f k v i}) and payload.

    @raise KeyError: for an unknown kind letter (upstream drops those).
    @raise ValueError: for anything else that is not a path element.
    """
    if len(element) < 2 or element[1] != ":":
        raise ValueError(f"invalid path element {element!r}")
    kind, text = element[0], element[2:]
    if kind == "f":
        return kind, text
    if kind == "k":
        fields = parse_json(text)
        if not isinstance(fields, dict):
            raise ValueError(f"invalid key {text!r}")
        return kind, fields
    if kind == "v":
        return kind, parse_json(text)
    if kind == "i":
        return kind, int(text)
    raise KeyError(kind)


def _value_order(value):
    """Upstream C{value.Compare}: numbers < strings < booleans < lists < maps < null."""
    if value is None:
        return (5,)
    if value is True or value is False:
        return (2, value)
    if isinstance(value, (int, float)):
        return (0, value)
    if isinstance(value, str):
        return (1, value)
    if isinstance(value, list):
        return (3, tuple(_value_order(v) for v in value))
    return (4, tuple((k, _value_order(value[k])) for k in sorted(value)))


_ORDERS = {}


def element_order(element):
    """Sort key of a path element: fields, keys, values, indices, as upstream."""
    if element[0] == "f":
        return (0, element)
    order = _ORDERS.get(element)
    if order is None:
        kind, payload = parse_element(element)
        if kind == "k":
            order = (1, tuple((name, _value_order(payload[name])) for name in sorted(payload)))
        elif kind == "v":
            order = (2, _value_order(payload))
        else:
            order = (3, payload)
        if len(_ORDERS) > 8192:
            _ORDERS.clear()
        _ORDERS[element] = order
    return order


def _canonical_element(element):
    kind, payload = parse_element(element)
    if kind == "k":
        return "k:" + go_json(payload)
    if kind == "v":
        return value_element(payload)
    if kind == "i":
        return f"i:{payload}"
    return element


def _to_string(value):
    """Upstream C{value.ToString}, used in printed paths."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(_to_string(v) for v in value) + "]"
    return "".join(f"{k}={_to_string(value[k])}" for k in sorted(value))


def path_string(path):
    """Print a path as upstream does: C{.spec.containers[name="c"].image}."""
    parts = []
    for element in path:
        kind, payload = parse_element(element)
        if kind == "f":
            parts.append("." + payload)
        elif kind == "k":
            parts.append("[" + ",".join(
                f"{name}={_to_string(payload[name])}" for name in sorted(payload)) + "]")
        elif kind == "v":
            parts.append(f"[={_to_string(payload)}]")
        else:
            parts.append(f"[{payload}]")
    return "".join(parts)


# -- set algebra -------------------------------------------------------------

def _member(entry):
    return not entry or "." in entry


def _sorted_node(node):
    """The same node with C{"."} first and elements in order."""
    out = {".": {}} if "." in node else {}
    for element in sorted((e for e in node if e != "."), key=element_order):
        out[element] = node[element]
    return out


def canonical(node):
    """A canonical copy of C{node} (the node itself when it already is)."""
    if not node:
        return node
    elements = [e for e in node if e != "."]
    ordered = sorted(elements, key=element_order)
    changed = ordered != elements or ("." in node and next(iter(node)) != ".")
    out = {".": {}} if "." in node else {}
    for element in ordered:
        child = node[element]
        fixed = canonical(child)
        changed = changed or fixed is not child
        out[element] = fixed
    return out if changed else node


def union(a, b):
    """C{a | b}; canonical when C{a} is."""
    if not b:
        return a
    if not a:
        return canonical(b)
    out = dict(a)
    grew = False
    for element, theirs in b.items():
        if element == ".":
            if "." not in out:
                out["."] = {}
                grew = True
            continue
        ours = out.get(element)
        if ours is None:
            out[element] = canonical(theirs)
            grew = True
        elif ours is not theirs:
            out[element] = _union_entry(ours, theirs)
    return _sorted_node(out) if grew else out


def _union_entry(ours, theirs):
    if not theirs:
        return ours if _member(ours) else {".": {}, **ours}
    if not ours:
        merged = canonical(theirs)
        return merged if "." in merged else {".": {}, **merged}
    return union(ours, theirs)


def difference(a, b):
    """C{a - b}: the paths of C{a} that are not members of C{b}; C{a} itself if none go."""
    out = None
    for element, theirs in b.items():
        if element == ".":
            continue
        ours = a.get(element)
        if ours is None:
            continue
        kept = _difference_entry(ours, theirs)
        if kept is not ours:
            if out is None:
                out = dict(a)
            if kept is None:
                del out[element]
            else:
                out[element] = kept
    return a if out is None else out


def _difference_entry(ours, theirs):
    if not ours:
        return None if _member(theirs) else ours
    rest = difference(ours, theirs) if theirs else ours
    if "." in rest and _member(theirs):
        rest = {e: c for e, c in rest.items() if e != "."}
        return rest or None
    if rest is ours:
        return ours
    if not rest:
        return None
    if len(rest) == 1 and "." in rest:
        return {}
    return rest


def intersection(a, b):
    """C{a & b}, in the order of C{a}."""
    out = {}
    for element, ours in a.items():
        if element == ".":
            continue
        theirs = b.get(element)
        if theirs is None:
            continue
        below = intersection(ours, theirs) if ours and theirs else {}
        if _member(ours) and _member(theirs):
            out[element] = {".": {}, **below} if below else {}
        elif below:
            out[element] = below
    return out


def without(a, ignored):
    """C{a} less every path at or below a member of C{ignored} (upstream C{RecursiveDifference})."""
    out = None
    for element, theirs in ignored.items():
        ours = a.get(element) if element != "." else None
        if ours is None:
            continue
        if _member(theirs):
            kept = None
        elif not ours:
            continue
        else:
            kept = without(ours, theirs)
            if kept is ours:
                continue
            if not kept:
                kept = None
            elif len(kept) == 1 and "." in kept:
                kept = {}
        if out is None:
            out = dict(a)
        if kept is None:
            del out[element]
        else:
            out[element] = kept
    return a if out is None else out


def paths(node, prefix=()):
    """Every member path, in upstream's iteration order (members, then children)."""
    found = []
    for element, entry in node.items():
        if element != "." and _member(entry):
            found.append(prefix + (element,))
    for element, entry in node.items():
        if element != "." and entry and (len(entry) > 1 or "." not in entry):
            found.extend(paths(entry, prefix + (element,)))
    return found


def has(node, path):
    """Whether C{path} (a tuple of path elements) is a member of the set."""
    for element in path[:-1]:
        node = node.get(element)
        if not node:
            return False
    entry = node.get(path[-1])
    return entry is not None and _member(entry)


def parse_fields(fields):
    """
    Read a FieldsV1 value from a client into a canonical set.

    Unknown path element kinds are dropped, as upstream does.

    @raise ValueError: if it is not a FieldsV1 trie.
    """
    if fields is None:
        return {}
    if not isinstance(fields, dict):
        raise ValueError("fieldsV1 must be an object")
    return canonical(_parse_node(fields))


def _parse_node(node):
    out = {}
    for key, child in node.items():
        if not isinstance(child, dict):
            raise ValueError(f"invalid value at {key!r}")
        if key == ".":
            out["."] = {}
            continue
        try:
            element = _canonical_element(key)
        except KeyError:
            continue
        below = _parse_node(child)
        if "." in below and len(below) == 1:
            below = {}
        out[element] = union(out[element], below) if element in out else below
    return out
