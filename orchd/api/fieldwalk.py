# -*- test-case-name: tests.api.test_fieldmanager -*-
"""
The walks over objects that make field sets: the set an applied
configuration sets (L{field_set}), the sets one object changes against
another (L{diff}) or against a zero object (L{added_fields}), and the
merge and prune of server-side apply (L{merge}, L{prune}).

They are kept apart from the sets themselves (L{orchd.api.fieldpath}) as
they are the one place that reads objects, and so the one place that
knows the kind's schema.  The walks read an object through the kind's
patch metadata (L{orchd.api.patchschema}): a merging list with a key is an
associative list keyed by it, a merging list without one is a set, any
other list is atomic; maps are granular unless marked C{replace}.
Upstream also types fields it knows as structs: those exist (empty) in a
zero object, so creating them does not make their own path a member.  Here
that holds for C{metadata}, C{spec} and C{status} at the top, for the maps
the patch metadata lists, and for C{containers}.  No function here mutates
its arguments; results may share unchanged parts with them.
"""

import json

from orchd.api.fieldpath import (
    SchemaError, _member, element_order, item_key_element, key_fields, path_string,
    value_element,
)
from orchd.api.patchschema import PLAIN

_MISSING = object()
_ROOT_STRUCTS = frozenset(("metadata", "spec", "status"))


def list_elements(items, schema):
    """The path elements of a granular list's items; None if it must be atomic."""
    key = schema.key
    elements = []
    seen = set()
    for item in items:
        if key is not None:
            if type(item) is not dict:
                return None
            element = item_key_element(key, item)
            if element is None:
                return None
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
            element = item_key_element(key, item)
            if element is None:
                missing = next(name for name in key_fields(key) if name not in item)
                raise SchemaError(f"{where}: element {index}: associative list with keys has an "
                                  f"element that omits key field {json.dumps(missing)} (and doesn't "
                                  "have default value)")
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
        if kinds[1] is dict and not schema.replace:
            # A new map is merged into an empty one, so that its nulls
            # remove fields as they do in a map that exists: applying the
            # same configuration again changes nothing.
            out[name] = merge(ours if kinds[0] is dict else {}, theirs, schema.fields)
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
            keys = {"f:" + name for name in key_fields(schema.key)}
            below = {e: c for e, c in theirs.items() if e not in keys}
            kept = _prune_map(item, below, mine or {}, schema.fields)
            if kept is not None:
                item, changed = kept, True
        out.append(item)
    if not changed:
        return value
    return out if out else _GONE
