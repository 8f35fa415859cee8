# -*- test-case-name: tests.api.crdschema.test_patch -*-
"""
A custom resource schema's merge metadata as L{orchd.api.patchschema} rows.

Server-side apply reads upstream's C{x-kubernetes-list-type} (C{atomic},
the default; C{set}; C{map} keyed by C{x-kubernetes-list-map-keys}) and
C{x-kubernetes-map-type} (C{granular}, the default; C{atomic}).  A
L{PatchField} says the same: C{merge} for set and map lists, C{key} for a
map list's key, C{replace} for an atomic map.  Only fields with metadata
of their own, and the maps leading to them, get rows.
"""

from orchd.api.patchschema import PatchField, kind_schema


def _field(node):
    """The row of one schema node, or None when it merges the default way."""
    list_type = node.list_type
    if list_type in ("set", "map") and node.items is not None:
        keys = node.list_map_keys if list_type == "map" else ()
        key = keys[0] if len(keys) == 1 else (tuple(keys) if keys else None)
        fields = _fields(node.items) if list_type == "map" else {}
        return PatchField(merge=True, key=key, fields=fields)
    if node.map_type == "atomic":
        return PatchField(replace=True)
    fields = _fields(node)
    if fields:
        return PatchField(fields=fields)
    return None


def _fields(node):
    rows = {}
    if node.properties:
        for name, sub in node.properties.items():
            row = _field(sub)
            if row is not None:
                rows[name] = row
    return rows


def patch_schema(root):
    """The whole object's rows: ObjectMeta's rules plus the schema's own (never its metadata)."""
    rows = _fields(root)
    rows.pop("metadata", None)
    rows.pop("apiVersion", None)
    rows.pop("kind", None)
    return kind_schema(**rows)
