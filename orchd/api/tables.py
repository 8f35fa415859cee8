# -*- test-case-name: tests.api.test_tables -*-
"""
Server-side printing: the C{Table} responses C{kubectl get} asks for.

kubectl sends C{Accept: application/json;as=Table;v=v1;g=meta.k8s.io, ...}
and prints the columns the server chooses. L{wants_table} reads one Accept
media range; L{to_table} turns the objects of a GET, LIST or watch event
into the Table, using the kind's printer (the C{printer} of its KindInfo,
from L{orchd.api.printers}) or the default table (Name, Created At) for
kinds without one. Everything here is pure: the HTTP layer negotiates,
reads C{includeObject}, and encodes.

[COMPAT] The Table's group keeps its upstream spelling, C{meta.k8s.io}:
kubectl recognises a Table by that group/version/kind and would print a
C{meta.orch.io} one as an unknown object. The renamed group is accepted in
the request, but the answer is always C{meta.k8s.io}.
"""

from types import MappingProxyType

from orchd.api.errors import StatusError
from orchd.api.printers.base import (
    CREATED_DESCRIPTION, DATE, Column, Printer, format_time, name_column, parse_time,
)

#: [COMPAT] The group of Table and PartialObjectMetadata in answers.
TABLE_GROUP = "meta.k8s.io"
#: The groups a request may name: upstream's, and the renamed one.
TABLE_GROUPS = (TABLE_GROUP, "meta.orch.io")
#: Table versions, preferred first.
TABLE_VERSIONS = ("v1", "v1beta1")

#: Every accepted C{as}/C{g}/C{v} parameter set of a Table media range (read-only).
TABLE_MEDIA_PARAMS = tuple(
    MappingProxyType({"as": "Table", "g": group, "v": version})
    for group in TABLE_GROUPS for version in TABLE_VERSIONS
)

#: The values of C{includeObject}: what C{rows[].object} holds.
INCLUDE_NONE = "None"
INCLUDE_METADATA = "Metadata"
INCLUDE_OBJECT = "Object"
INCLUDE_OBJECT_VALUES = (INCLUDE_NONE, INCLUDE_METADATA, INCLUDE_OBJECT)


def wants_table(media_range_params):
    """
    The Table version an Accept media range asks for, or None.

    @param media_range_params: the parameters of one media range, names
        lower-cased and values as sent (C{{"as": "Table", "v": "v1",
        "g": "meta.k8s.io"}}). Other parameters are not looked at.
    @return: C{"v1"} or C{"v1beta1"}, or None if the range is not a Table
        this server serves. Values match exactly, as upstream matches them.
    """
    if media_range_params.get("as") != "Table":
        return None
    if media_range_params.get("g") not in TABLE_GROUPS:
        return None
    version = media_range_params.get("v")
    return version if version in TABLE_VERSIONS else None


def table_media_type(version="v1"):
    """The Content-Type of a Table answer: C{application/json;as=Table;v=v1;g=meta.k8s.io}."""
    return f"application/json;as=Table;v={version};g={TABLE_GROUP}"


def validate_include_object(value):
    """
    Check an C{includeObject} query value and return what it means.

    Absent (None) and empty mean C{Metadata}, the default.

    @return: one of L{INCLUDE_OBJECT_VALUES}.
    @raise StatusError: 400 for any other value, with upstream's message.
    """
    if value is None or value == "":
        return INCLUDE_METADATA
    if value in INCLUDE_OBJECT_VALUES:
        return value
    raise StatusError.bad_request(f"unrecognized includeObject value: {_go_quote(value)}")


def _go_quote(value):
    """Go's C{%q} for the printable strings a query value holds."""
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


# -- the default table -------------------------------------------------------------

#: What kinds without a printer get, as upstream's C{DefaultTableConvertor}.
DEFAULT_PRINTER = Printer(
    name_column(),
    Column("Created At", DATE, CREATED_DESCRIPTION,
           lambda row: format_time(parse_time(row.meta.get("creationTimestamp")))),
)


def printer_for(info):
    """The printer of a kind: its own, or the default table."""
    return info.printer or DEFAULT_PRINTER


def column_definitions(info):
    """The C{columnDefinitions} of a kind's Tables."""
    return printer_for(info).definitions()


# -- tables ------------------------------------------------------------------------


def to_table(info, objects, now_seconds, include_object=INCLUDE_METADATA, version="v1",
             list_meta=None, with_columns=True):
    """
    The Table of C{objects}, all of the kind C{info}.

    Every column is filled, the C{-o wide} ones (priority 1) too: the server
    answers as upstream's does with C{Wide} set, and kubectl hides them.

    @param info: the L{orchd.api.kinds.KindInfo} of the objects.
    @param objects: the objects, JSON-shaped; one for a GET, the items of a
        LIST, the object of a watch event.
    @param now_seconds: the time AGE cells are measured from (seconds since
        the epoch), so a caller with a clock gets stable ages.
    @param include_object: C{None}, C{Metadata} (the default, also for a
        Python None or empty value) or C{Object}: what C{rows[].object} holds.
    @param version: the Table version, C{v1} or C{v1beta1}.
    @param list_meta: the list's C{metadata} (C{resourceVersion}, C{continue},
        C{remainingItemCount}). Without it, a single object's
        C{resourceVersion} is the Table's, as upstream does for a GET.
    @param with_columns: False leaves C{columnDefinitions} out, for the
        watch events after the first.
    @raise StatusError: 400 for an unknown C{include_object}, 406 for a
        version with no Table.
    """
    include = validate_include_object(include_object)
    if version not in TABLE_VERSIONS:
        raise StatusError.not_acceptable(
            f"no Table exists in group version {TABLE_GROUP}/{version}")
    printer = printer_for(info)
    objects = list(objects)
    if printer.order is not None and len(objects) > 1:
        objects.sort(key=printer.order)

    table = {
        "kind": "Table",
        "apiVersion": f"{TABLE_GROUP}/{version}",
        "metadata": _table_meta(list_meta, objects),
    }
    if with_columns:
        table["columnDefinitions"] = printer.definitions()
    table["rows"] = [_row(printer, obj, now_seconds, include, version) for obj in objects]
    return table


def _table_meta(list_meta, objects):
    meta = {}
    if list_meta is not None:
        for key in ("resourceVersion", "continue"):
            if list_meta.get(key):
                meta[key] = list_meta[key]
        if list_meta.get("remainingItemCount") is not None:
            meta["remainingItemCount"] = list_meta["remainingItemCount"]
    elif len(objects) == 1:
        version = (objects[0].get("metadata") or {}).get("resourceVersion")
        if version:
            meta["resourceVersion"] = version
    return meta


def _row(printer, obj, now, include, version):
    row = {"cells": printer.cells(obj, now)}
    conditions = printer.row_conditions(obj, now)
    if conditions:
        row["conditions"] = [dict(c) for c in conditions]
    if include == INCLUDE_OBJECT:
        row["object"] = obj
    elif include == INCLUDE_METADATA:
        row["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": f"{TABLE_GROUP}/{version}",
            "metadata": dict(obj.get("metadata") or {}),
        }
    else:
        # Upstream writes an empty object reference as null.
        row["object"] = None
    return row

