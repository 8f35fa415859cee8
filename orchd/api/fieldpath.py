# -*- test-case-name: tests.api.test_fieldmanager -*-
"""
Field sets of server-side apply, and the walks over objects that make them.

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

The walks (L{field_set}, L{diff}, L{added_fields}, L{merge}, L{prune}) read
an object through the kind's patch metadata (L{orchd.api.patchschema}): a
merging list with a key is an associative list keyed by it, a merging list
without one is a set, any other list is atomic; maps are granular unless
marked C{replace}.  Upstream also types fields it knows as structs: those
exist (empty) in a zero object, so creating them does not make their own
path a member.  Here that holds for C{metadata}, C{spec} and C{status} at
the top, for the maps the patch metadata lists, and for C{containers}.
"""

import json
import re

from orchd.api.patchschema import PLAIN

_MISSING = object()
_ROOT_STRUCTS = frozenset(("metadata", "spec", "status"))
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
        fields = json.loads(text)
        if not isinstance(fields, dict):
            raise ValueError(f"invalid key {text!r}")
        return kind, fields
    if kind == "v":
        return kind, json.loads(text)
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


# -- walks over objects --------------------------------------------------------

def list_elements(items, schema):
    """The path elements of a granular list's items; None if it must be atomic."""
    key = schema.key
    elements = []
    seen = set()
    for item in items:
        if key is not None:
            if type(item) is not dict or key not in item:
                return None
            element = key_element(key, item[key])
        else:
            element = value_element(item)
        if element in seen:
            return None
        seen.add(element)
        elements.append(element)
    return elements


def _implicit(name, schema, root):
    """Whether a field exists in a zero object (a struct, or C{containers})."""
    if root and name in _ROOT_STRUCTS:
        return True
    if schema is PLAIN:
        return False
    return not schema.merge or (name == "containers" and schema.key == "name")


def _by_element(pairs):
    return sorted(pairs, key=lambda pair: element_order(pair[0]))


def _subtree(value, schema):
    """The set of a value that is wholly added or removed: itself and all below."""
    kind = type(value)
    if kind is dict:
        if not value or schema.replace:
            return {}
        return _subtree_map(value, schema.fields)
    if kind is list and value and schema.merge:
        elements = list_elements(value, schema)
        if elements is not None:
            node = {".": {}}
            node.update(_items(elements, value, schema))
            return node
    return {}


def _subtree_map(value, fields):
    node = {".": {}}
    for name in sorted(value):
        node["f:" + name] = _subtree(value[name], fields.get(name, PLAIN))
    return node


def _items(elements, items, schema):
    if schema.key is None:
        return {element: {} for element, _ in _by_element(zip(elements, items))}
    return {element: _subtree_map(item, schema.fields)
            for element, item in _by_element(zip(elements, items))}


def added_fields(value, fields, root=False):
    """
    The set a map adds against a zero object: its fields, but not the maps
    (and C{containers}) a zero object already has.
    """
    node = {}
    for name in sorted(value):
        child, schema = value[name], fields.get(name, PLAIN)
        if _implicit(name, schema, root):
            below = _against_zero(child, schema)
            if below is not None:
                node["f:" + name] = below
        else:
            node["f:" + name] = _subtree(child, schema)
    return node


def _against_zero(value, schema):
    """What a value sets over the empty value a zero object has there; None if nothing."""
    kind = type(value)
    if kind is dict and not schema.replace:
        return added_fields(value, schema.fields) or None
    if kind is list and schema.merge:
        if not value:
            return None
        elements = list_elements(value, schema)
        return {} if elements is None else _items(elements, value, schema)
    return _subtree(value, schema)


def _inner(value, schema):
    """What lies below a value, as a non-member node; None for a scalar."""
    node = _subtree(value, schema)
    if not node:
        return None
    rest = dict(node)
    del rest["."]
    return rest


def _scalar_equal(a, b):
    if a != b:
        return False
    ta, tb = type(a), type(b)
    return ta is tb or (ta is not bool and tb is not bool)


def diff(old, new, fields):
    """
    Compare two objects as upstream C{TypedValue.Compare} does.

    @return: C{(added, modified, removed)} field sets.  A map or list that
        appears (or goes) is itself added (removed) with all below it; one
        that changes contributes only the changed paths below it.
    """
    added, modified, removed = _diff_map(old, new, fields, True)
    return added or {}, modified or {}, removed or {}


def _put(node, element, entry):
    if node is None:
        node = {}
    node[element] = entry
    return node


def _diff_map(old, new, fields, root):
    added = modified = removed = None
    get = fields.get
    for name, theirs in new.items():
        ours = old.get(name, _MISSING)
        if ours is theirs:
            continue
        schema = get(name, PLAIN)
        a, m, r = _diff_entry(ours, theirs, schema, _implicit(name, schema, root))
        element = "f:" + name
        if a is not None:
            added = _put(added, element, a)
        if m is not None:
            modified = _put(modified, element, m)
        if r is not None:
            removed = _put(removed, element, r)
    for name, ours in old.items():
        if name not in new:
            schema = get(name, PLAIN)
            _, _, r = _diff_entry(ours, _MISSING, schema, _implicit(name, schema, root))
            if r is not None:
                removed = _put(removed, "f:" + name, r)
    return added, modified, removed


_NOTHING = (None, None, None)


def _diff_entry(ours, theirs, schema, implicit):
    if ours is _MISSING or theirs is _MISSING:
        present = theirs if ours is _MISSING else ours
        change = _against_zero(present, schema) if implicit else _subtree(present, schema)
        if change is None:
            return _NOTHING
        return (change, None, None) if ours is _MISSING else (None, None, change)
    kinds = type(ours), type(theirs)
    if kinds == (dict, dict):
        if ours == theirs:
            return _NOTHING
        if schema.replace:
            return None, {}, None
        return _diff_map(ours, theirs, schema.fields, False)
    if kinds == (list, list):
        if ours == theirs:
            return _NOTHING
        if not schema.merge:
            return None, {}, None
        return _diff_list(ours, theirs, schema)
    if _scalar_equal(ours, theirs):
        return _NOTHING
    return _inner(theirs, schema), {}, _inner(ours, schema)


def _diff_list(ours, theirs, schema):
    old_elements = list_elements(ours, schema)
    new_elements = list_elements(theirs, schema)
    if old_elements is None or new_elements is None:
        return None, {}, None
    old_items = dict(zip(old_elements, ours))
    added = modified = removed = None
    for element, item in zip(new_elements, theirs):
        before = old_items.pop(element, _MISSING)
        if before is _MISSING:
            entry = {} if schema.key is None else _subtree_map(item, schema.fields)
            added = _put(added, element, entry)
        elif schema.key is not None and before is not item and before != item:
            a, m, r = _diff_map(before, item, schema.fields, False)
            if a:
                added = _put(added, element, a)
            if m:
                modified = _put(modified, element, m)
            if r:
                removed = _put(removed, element, r)
    for element, item in old_items.items():
        entry = {} if schema.key is None else _subtree_map(item, schema.fields)
        removed = _put(removed, element, entry)
    return added, modified, removed


def field_set(config, fields, where=""):
    """
    The fields an applied configuration sets (upstream C{ToFieldSet}):
    every leaf and list item, but not the maps holding them.

    @raise SchemaError: if an associative list item lacks its key or repeats one.
    """
    node = {}
    for name in sorted(config):
        value, schema = config[name], fields.get(name, PLAIN)
        element, kind = "f:" + name, type(value)
        if kind is dict:
            if schema.replace:
                node[element] = {}
            elif value:
                below = field_set(value, schema.fields, f"{where}.{name}")
                if below:
                    node[element] = below
        elif kind is list:
            if not schema.merge:
                node[element] = {}
            elif value:
                node[element] = _list_field_set(value, schema, f"{where}.{name}")
        else:
            node[element] = {}
    return node


def _list_field_set(items, schema, where):
    key, elements = schema.key, []
    for index, item in enumerate(items):
        if key is not None:
            if type(item) is not dict:
                raise SchemaError(f"{where}: element {index}: associative list with keys may "
                                  "not have non-map elements")
            if key not in item:
                raise SchemaError(f"{where}: element {index}: associative list with keys has an "
                                  f"element that omits key field {json.dumps(key)} (and doesn't "
                                  "have default value)")
            element = key_element(key, item[key])
        else:
            element = value_element(item)
        if element in elements:
            raise SchemaError(f"{where}: duplicate entries for key {path_string((element,))}")
        elements.append(element)
    node = {}
    for element, item in _by_element(zip(elements, items)):
        if key is None:
            node[element] = {}
        else:
            below = field_set(item, schema.fields, where + path_string((element,)))
            node[element] = {".": {}, **below}
    return node


def merge(live, config, fields):
    """
    Merge an applied configuration into the live object (upstream
    C{TypedValue.Merge}): the configuration's values win, maps merge,
    associative lists and sets merge item by item, atomic lists are replaced.
    A C{null} scalar in the configuration removes the field.
    """
    out = dict(live)
    for name, theirs in config.items():
        schema = fields.get(name, PLAIN)
        ours = live.get(name, _MISSING)
        if theirs is None:
            if type(ours) not in (dict, list):
                out.pop(name, None)
            continue
        kinds = type(ours), type(theirs)
        if kinds == (dict, dict) and not schema.replace:
            out[name] = merge(ours, theirs, schema.fields)
        elif kinds == (list, list) and schema.merge:
            out[name] = _merge_list(ours, theirs, schema)
        else:
            out[name] = theirs
    return out


def _merge_list(ours, theirs, schema):
    old_elements = list_elements(ours, schema)
    new_elements = list_elements(theirs, schema)
    if old_elements is None or new_elements is None:
        return theirs
    old_items, new_items = dict(zip(old_elements, ours)), dict(zip(new_elements, theirs))

    def merged(element):
        before, after = old_items.get(element, _MISSING), new_items.get(element, _MISSING)
        if before is _MISSING:
            return after
        if after is _MISSING:
            return before
        if schema.key is not None and type(before) is dict and type(after) is dict:
            return merge(before, after, schema.fields)
        return after

    # Upstream's order (structured-merge-diff #205): the configuration's order
    # for shared items, the live position for items only the live list has.
    shared = [element for element in new_elements if element in old_items]
    upcoming = iter(shared[1:])
    next_shared = shared[0] if shared else None
    done, out = set(), []
    left = right = 0
    while left < len(old_elements) or right < len(new_elements):
        if left < len(old_elements) and right < len(new_elements):
            element = old_elements[left]
            if element == new_elements[right]:
                done.add(element)
                out.append(merged(element))
                left += 1
                right += 1
                next_shared = next(upcoming, None)
                continue
            if element in new_items and next_shared is not None and next_shared != element:
                left += 1
                continue
        if left < len(old_elements):
            element = old_elements[left]
            if element not in new_items:
                out.append(old_items[element])
                left += 1
                continue
            if element in done:
                left += 1
                continue
        if right < len(new_elements):
            element = new_elements[right]
            done.add(element)
            out.append(merged(element))
            right += 1
            if next_shared is not None and next_shared == element:
                next_shared = next(upcoming, None)
    return out


def prune(obj, last, owned, fields):
    """
    Remove what an applier set last time, no longer sets, and nobody owns.

    Upstream's rule (C{merge/update.go} C{prune}) with named fields counted
    as owned when anything below them is: a path goes, with all below it,
    when it is in C{last} and not in C{owned} (every manager's set,
    including the applier's new one).  A map or list left empty goes too.
    """
    kept = _prune_map(obj, last, owned, fields)
    return obj if kept is None else kept


def _owns(entry, element):
    return entry is not None and (not entry or "." in entry or element[0] == "f")


def _prune_map(value, last, owned, fields):
    out = None
    for element, theirs in last.items():
        if element[0] != "f" or element[2:] not in value:
            continue
        name = element[2:]
        child = value[name]
        mine = owned.get(element) if owned else None
        if not _owns(mine, element):
            kept = _GONE
        elif theirs and type(child) in (dict, list) and child:
            kept = _prune_value(child, theirs, mine or {}, fields.get(name, PLAIN))
        else:
            continue
        if kept is child:
            continue
        if out is None:
            out = dict(value)
        if kept is _GONE:
            del out[name]
        else:
            out[name] = kept
    return out


_GONE = object()


def _prune_value(value, last, owned, schema):
    if type(value) is dict:
        if schema.replace:
            return value
        kept = _prune_map(value, last, owned, schema.fields)
        if kept is None:
            return value
        return kept if kept else _GONE
    if not schema.merge:
        return value
    elements = list_elements(value, schema)
    if elements is None:
        return value
    out, changed = [], False
    for element, item in zip(elements, value):
        theirs = last.get(element)
        if theirs is None:
            out.append(item)
            continue
        mine = owned.get(element)
        if _member(theirs) and not (mine is not None and _member(mine)):
            changed = True
            continue
        if theirs and schema.key is not None and type(item) is dict:
            below = {e: c for e, c in theirs.items() if e != "f:" + schema.key}
            kept = _prune_map(item, below, mine or {}, schema.fields)
            if kept is not None:
                item, changed = kept, True
        out.append(item)
    if not changed:
        return value
    return out if out else _GONE
