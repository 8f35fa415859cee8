# -*- test-case-name: tests.api.test_fieldmanager -*-
"""
The entries of C{metadata.managedFields}: one per manager, each naming its
field set with the manager, operation, API version, subresource and time.

L{orchd.api.fieldmanager} decides which fields each manager holds; this
module reads entries from stored objects and from requests (checked as
upstream C{DecodeManagedFields} does), writes them back in upstream's order,
and merges the oldest C{Update} entries into C{ancient-changes} so that the
list stays bounded (upstream C{capManagers}).
"""

from datetime import datetime, timezone

from orchd.api.fieldpath import go_json, parse_fields, union

#: Most C{Update} entries kept; older ones merge into C{ancient-changes}.
MAX_UPDATE_MANAGERS = 10

_APPLY, _UPDATE = "Apply", "Update"


class _Entry:
    """One manager's set, with what C{managedFields} writes about it."""

    __slots__ = ("manager", "operation", "api_version", "subresource", "time", "fields", "raw")

    def __init__(self, manager, operation, api_version, subresource, time, fields, raw=None):
        self.manager = manager
        self.operation = operation
        self.api_version = api_version
        self.subresource = subresource
        self.time = time
        self.fields = fields
        self.raw = raw  # the wire entry this was read from, reused while unchanged

    @property
    def key(self):
        version = "" if self.operation == _APPLY else self.api_version
        return (self.manager, self.operation, version, self.subresource)

    def changed(self, fields=None, time=None, api_version=None):
        return _Entry(self.manager, self.operation, api_version or self.api_version,
                      self.subresource, time or self.time,
                      self.fields if fields is None else fields)

    def identifier(self):
        """Upstream's manager identifier: the entry's JSON without time and fields."""
        parts = [f'"manager":{go_json(self.manager)}'] if self.manager else []
        parts.append(f'"operation":{go_json(self.operation)}')
        if self.operation == _UPDATE and self.api_version:
            parts.append(f'"apiVersion":{go_json(self.api_version)}')
        if self.subresource:
            parts.append(f'"subresource":{go_json(self.subresource)}')
        return "{" + ",".join(parts) + "}"

    def describe(self):
        """How conflict messages name the manager (upstream C{printManager})."""
        text = go_json(self.manager)
        if self.subresource:
            text += f" with subresource {go_json(self.subresource)}"
        if self.operation == _UPDATE:
            # Upstream prints " at <time>" only when the identifier has a
            # time, which identifiers never carry, so the time is left out.
            text += f" using {self.api_version}"
        return text

    def encode(self):
        if self.raw is not None:
            return self.raw
        entry = {"manager": self.manager} if self.manager else {}
        entry["operation"] = self.operation
        entry["apiVersion"] = self.api_version
        if self.time:
            entry["time"] = self.time
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = self.fields
        if self.subresource:
            entry["subresource"] = self.subresource
        return entry


def _order(entry):
    return (entry.operation, entry.time or "", entry.manager, entry.api_version,
            entry.subresource)


def _encode(managers):
    return [entry.encode() for entry in sorted(managers.values(), key=_order)]


def _read_trusted(entries):
    """Entries this module wrote: no checks beyond their shape."""
    managers = {}
    for raw in entries or ():
        entry = _Entry(raw.get("manager", ""), raw["operation"], raw.get("apiVersion", ""),
                       raw.get("subresource", ""), raw.get("time"), raw.get("fieldsV1") or {},
                       raw)
        managers[entry.key] = entry
    return managers


def _read_request(entries):
    """
    Entries a client sent, checked as upstream C{DecodeManagedFields} does.

    @raise ValueError: for anything upstream would refuse to decode.
    """
    if not isinstance(entries, list):
        raise ValueError("managedFields must be a list")
    managers = {}
    for raw in entries:
        if not isinstance(raw, dict):
            raise ValueError("entry must be an object")
        manager, subresource = raw.get("manager") or "", raw.get("subresource") or ""
        operation, version = raw.get("operation"), raw.get("apiVersion")
        if operation not in (_APPLY, _UPDATE):
            raise ValueError("operation must be `Apply` or `Update`")
        if not isinstance(version, str) or not version:
            raise ValueError("apiVersion must not be empty")
        if raw.get("fieldsType") != "FieldsV1":
            raise ValueError("fieldsType must be FieldsV1")
        if not isinstance(manager, str) or not isinstance(subresource, str):
            raise ValueError("manager and subresource must be strings")
        entry = _Entry(manager, operation, version, subresource, _read_time(raw.get("time")),
                       parse_fields(raw.get("fieldsV1")))
        managers[entry.key] = entry
    return managers


def _read_time(value):
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("time must be a string")
    moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError("time must carry a zone")
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _is_reset(entries):
    """C{[]} or C{[{}]}: a client clearing managedFields (upstream C{isResetManagedFields})."""
    if not isinstance(entries, list) or len(entries) > 1:
        return False
    return not entries or (isinstance(entries[0], dict)
                           and all(v is None or v == "" for v in entries[0].values()))


def _cap_update_managers(managers):
    """Merge the oldest C{Update} entries into C{ancient-changes} (upstream capManagers)."""
    updaters = [k for k, e in managers.items() if e.operation == _UPDATE]
    if len(updaters) <= MAX_UPDATE_MANAGERS:
        return
    updaters.sort(key=lambda k: (managers[k].time or "", managers[k].identifier()))
    first_of_version, count = {}, len(updaters)
    for key in updaters:
        if count <= MAX_UPDATE_MANAGERS:
            break
        entry = managers[key]
        version = entry.api_version
        bucket = ("ancient-changes", _UPDATE, version, "")
        if version not in first_of_version:
            first_of_version[version] = key
            continue
        if key == bucket:
            continue
        if bucket not in managers:
            first = managers.pop(first_of_version[version])
            managers[bucket] = _Entry("ancient-changes", _UPDATE, version, "", first.time,
                                      first.fields)
        held = managers[bucket]
        managers[bucket] = held.changed(fields=union(held.fields, entry.fields), time=entry.time)
        del managers[key]
        count -= 1
