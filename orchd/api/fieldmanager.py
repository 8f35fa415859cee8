# -*- test-case-name: tests.api.test_fieldmanager -*-
"""
Field management: C{metadata.managedFields} and server-side apply.

L{FieldManager} does what upstream's field manager stack does
(C{k8s.io/apimachinery/pkg/util/managedfields/internal}: the structured
merge manager, C{stripMeta}, C{managedFieldsUpdater},
C{buildManagerInfo}, C{capManagers}, C{skipNonApplied},
C{lastAppliedManager}, C{lastAppliedUpdater}) on plain JSON objects; the
set algebra is in L{orchd.api.fieldpath}, the walks over objects in
L{orchd.api.fieldwalk}, and the C{managedFields} entries themselves in
L{orchd.api.managedfields}.

A manager is identified by its name, operation, subresource and, for
C{Update} only, the API version, so one client may hold an C{Apply} and an
C{Update} entry at once and they conflict like any two managers.
"""


import orjson

from orchd.api.bounded import parse_json
from orchd.api.errors import FieldError, StatusError
from orchd.api.fieldpath import (
    SchemaError, canonical, difference, go_json, has, intersection, path_string, paths, union,
    without,
)
from orchd.api.fieldwalk import added_fields, diff, field_set, merge, prune
from orchd.api.managedfields import (
    _APPLY, _UPDATE, _cap_update_managers, _encode, _Entry, _is_reset, _read_request,
    _read_trusted,
)
# Public here before managedFields entries had a module of their own.
from orchd.api.managedfields import MAX_UPDATE_MANAGERS  # noqa: F401
from orchd.api.meta import rfc3339

__all__ = [
    "FieldManager", "default_manager", "field_manager_errors", "validate_manager",
    "apply_manager_required", "reset_fields", "FIELD_MANAGER_MAX", "LAST_APPLIED",
]

#: Longest fieldManager, in bytes.
FIELD_MANAGER_MAX = 128
#: [COMPAT] kubectl's client-side apply annotation, kept in sync by kubectl's applies.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

_KUBECTL = "kubectl"
_ANNOTATIONS_MAX = 256 * 1024
# Fields no manager owns (upstream stripMeta), plus deletionTimestamp, which
# only the server sets.
_STRIPPED_TOP = ("f:apiVersion", "f:kind")
_STRIPPED_META = ("f:name", "f:namespace", "f:creationTimestamp", "f:selfLink", "f:uid",
                  "f:clusterName", "f:generation", "f:managedFields", "f:resourceVersion",
                  "f:deletionTimestamp")


# -- manager names -------------------------------------------------------------

def default_manager(user_agent):
    """
    The manager of a request without C{fieldManager}: the User-Agent up to
    its first C{/}, printable characters only, at most 128 bytes.
    """
    kept, size = [], 0
    for char in (user_agent or "").split("/", 1)[0]:
        if not char.isprintable():
            continue
        size += len(char.encode())
        if size > FIELD_MANAGER_MAX:
            break
        kept.append(char)
    return "".join(kept)


def field_manager_errors(manager, field="fieldManager"):
    """The L{FieldError}s of a C{fieldManager} value (length, printable characters)."""
    errors = []
    encoded = manager.encode()
    if len(encoded) > FIELD_MANAGER_MAX:
        errors.append(FieldError.too_long(field, FIELD_MANAGER_MAX))
    position = 0
    for char in manager:
        if not char.isprintable():
            errors.append(FieldError.invalid(
                field, manager, f"invalid character U+{ord(char):04X} (at position {position})"))
        position += len(char.encode())
    return errors


def validate_manager(manager, options="PatchOptions", apply=False):
    """
    Check C{fieldManager} as upstream validates C{<options>.meta.k8s.io}.

    @param options: C{CreateOptions}, C{UpdateOptions} or C{PatchOptions}.
    @param apply: the request is an apply patch, which requires a manager.
    @raise StatusError: 422 naming the options kind.
    """
    errors = []
    if apply and not manager:
        errors.append(FieldError.required("fieldManager", "is required for apply patch"))
    errors.extend(field_manager_errors(manager or ""))
    if errors:
        raise StatusError.invalid(options, "meta.k8s.io", "", errors)


def apply_manager_required():
    """The 422 of an apply patch sent without C{fieldManager}."""
    return StatusError.invalid(
        "PatchOptions", "meta.k8s.io", "",
        [FieldError.required("fieldManager", "is required for apply patch")])


def reset_fields(has_status, subresource=""):
    """
    The usual fields a write cannot set, so nobody owns them through it
    (upstream strategies' C{GetResetFields}): C{status} through the main
    resource of a kind with a status subresource, C{spec} through C{status}.
    Pass the result as C{ignored}; a strategy may know a finer set.
    """
    if subresource == "status":
        return {"f:spec": {}}
    if not subresource and has_status:
        return {"f:status": {}}
    return None


# -- helpers on objects --------------------------------------------------------

def _meta(obj):
    meta = obj.get("metadata") if obj else None
    return meta if isinstance(meta, dict) else {}


def _view(obj):
    """The object as its fields are compared: without managedFields."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = dict(obj)
        obj["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return obj


def _with_entries(obj, managers):
    out = dict(obj)
    meta = dict(_meta(obj))
    if managers:
        meta["managedFields"] = _encode(managers)
    else:
        meta.pop("managedFields", None)
    out["metadata"] = meta
    return out


def _strip(fields):
    """Remove what no manager may own (upstream C{stripMeta}), memberships only."""
    if not any(e in fields for e in _STRIPPED_TOP + ("f:metadata",)):
        return fields
    out = dict(fields)
    for element in _STRIPPED_TOP:
        _unmember(out, element)
    meta = out.get("f:metadata")
    if meta is not None:
        meta = {k: v for k, v in meta.items() if k != "."}
        for element in _STRIPPED_META:
            _unmember(meta, element)
        if meta:
            out["f:metadata"] = meta
        else:
            del out["f:metadata"]
    return out


def _unmember(node, element):
    entry = node.get(element)
    if entry is None:
        return
    rest = {k: v for k, v in entry.items() if k != "."}
    if rest:
        node[element] = rest
    else:
        del node[element]


def _gvk(api_version, kind):
    group_version = api_version if "/" in api_version else "/" + api_version
    return f"{group_version}, Kind={kind}"


# -- conflicts -----------------------------------------------------------------

class _Conflicts(Exception):
    """Fields of other managers an apply would change: C{[(entry, path)]}."""

    def __init__(self, found):
        super().__init__(len(found))
        self.found = found

    @classmethod
    def of(cls, managers, sets):
        found = []
        for key in sorted(sets, key=lambda k: managers[k].identifier()):
            found.extend((managers[key], path) for path in paths(sets[key]))
        return cls(found)

    def without(self, allowed):
        return _Conflicts([(e, p) for e, p in self.found if not has(allowed, p)])

    def status(self):
        """The 409 upstream answers (C{internal/conflict.go})."""
        causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {e.describe()}",
                   "field": path_string(p)} for e, p in self.found]
        if len(self.found) == 1:
            entry, path = self.found[0]
            message = (f"Apply failed with 1 conflict: conflict with {entry.describe()}: "
                       f"{path_string(path)}")
        else:
            lines, current = [], None
            for entry, path in self.found:
                if entry is not current:
                    lines.append(f"conflicts with {entry.describe()}:")
                    current = entry
                lines.append(f"- {path_string(path)}")
            message = f"Apply failed with {len(self.found)} conflicts: " + "\n".join(lines)
        return StatusError(409, "Conflict", message, {"causes": causes})


# -- the field manager -----------------------------------------------------------

class FieldManager:
    """
    Keeps C{metadata.managedFields} and merges server-side applies, for the
    objects of one kind (as upstream has a field manager per resource).

    @param patch_schema: the kind's patch metadata, which says how its lists
        are keyed (the C{patch_schema} of its L{orchd.api.kinds.KindInfo}).
    @param clock_seconds: the current time in seconds, for entry times.

    L{update} and L{apply} take the C{group} and C{kind} of the objects as
    their callers have them; the kind names the objects in messages.
    """

    def __init__(self, patch_schema, clock_seconds):
        self._schema = patch_schema
        self._clock = clock_seconds

    def _now(self):
        return rfc3339(self._clock())

    # -- create, update, non-apply patch ------------------------------------------

    def update(self, old, new, manager, api_version, group, kind, subresource="", ignored=None):
        """
        Record a create (C{old} None), update or non-apply patch by C{manager}.

        The manager's C{Update} entry gains every field that was added or
        changed; other managers lose those fields and every removed one.  A
        request carrying managedFields of its own (not through a
        subresource) replaces the stored ones when they are well formed and
        is ignored otherwise; C{[]} or C{[{}]} clears them, after which
        updates are not tracked again until the next apply (as upstream).

        @param ignored: fields the write cannot change (see L{reset_fields}),
            as a FieldsV1 set: nobody gains or loses them here.
        @return: C{new} with its managedFields set; C{new} is not modified,
            and the result may share unchanged values with C{old} and C{new}.
        """
        schema = self._schema
        managers = self._managers_for_update(old, new, subresource)
        if not managers and old is not None and _meta(old).get("uid"):
            return _with_entries(new, None)
        if old is None:
            ours = added_fields(_view(new), schema, root=True)
            changed, fresh = ours, True
        else:
            added, modified, removed = diff(_view(old), _view(new), schema)
            ours = union(modified, added) if modified else added
            changed = union(ours, removed) if removed else ours
            fresh = False
        if ignored:
            ours, changed = without(ours, ignored), without(changed, ignored)
        if changed:
            for key, entry in list(managers.items()):
                kept = difference(entry.fields, changed)
                if not kept:
                    del managers[key]
                elif kept is not entry.fields:
                    managers[key] = entry.changed(fields=kept)
        ours = _strip(ours)
        if ours:
            name = manager or "unknown"
            key = (name, _UPDATE, api_version, subresource)
            previous = managers.get(key)
            if previous is not None:
                fields = union(previous.fields, ours)
            else:
                fields = ours if fresh else canonical(ours)
            managers[key] = _Entry(name, _UPDATE, api_version, subresource, self._now(), fields)
        _cap_update_managers(managers)
        return _with_entries(new, managers)

    @staticmethod
    def _managers_for_update(old, new, subresource):
        """Upstream C{decodeLiveOrNew}: the request's entries, else the stored ones."""
        stored = _meta(old).get("managedFields")
        if not subresource:
            sent = _meta(new).get("managedFields")
            if _is_reset(sent):
                return {}
            if sent is not None and sent is not stored and sent != stored:
                try:
                    managers = _read_request(sent)
                except (ValueError, TypeError, KeyError):
                    managers = None
                if managers:
                    return managers
        try:
            return _read_trusted(stored)
        except (AttributeError, KeyError, TypeError):
            return {}

    # -- apply -----------------------------------------------------------------

    def apply(self, live, applied, manager, force, api_version, group, kind, subresource="",
              ignored=None):
        """
        Merge an applied configuration by C{manager} into C{live} (None: create).

        @param ignored: fields the write cannot change (see L{reset_fields}):
            the applier does not own them and they cause no conflicts.
        @raise StatusError: 409 on conflicts with other managers unless
            C{force}; 400 if C{applied} carries managedFields; 422 (upstream:
            500) if a keyed list item lacks or repeats its key.
        @return: the new object, a fresh copy sharing nothing with the inputs.
        """
        if _meta(applied).get("managedFields") is not None:
            raise StatusError.bad_request("metadata.managedFields must be nil")
        schema = self._schema
        try:
            config_fields = field_set(applied, schema)
        except SchemaError as e:
            # Upstream answers 500 here, though the configuration is at fault
            # (a keyed list item without its key, or a key twice): a client
            # error is a 4xx, so this is a 422 with upstream's text.
            meta = _meta(applied)
            raise StatusError.unprocessable(
                f"failed to create typed patch object ({meta.get('namespace', '')}/"
                f"{meta.get('name', '')}; {_gvk(api_version, kind)}): {e}") from None
        if ignored:
            config_fields = without(config_fields, ignored)
        managers = self._managers_for_apply(live, api_version, schema, subresource)
        attempt = (live, applied, config_fields, manager or "unknown", api_version, subresource,
                   schema, managers, ignored or {})
        try:
            obj, managers = self._apply(*attempt, force=force)
        except _Conflicts as conflicts:
            if manager != _KUBECTL:
                raise conflicts.status() from None
            allowed = _allowed_by_last_applied(live, api_version, schema)
            if allowed is None:
                raise conflicts.status() from None
            left = conflicts.without(allowed)
            if left.found:
                raise left.status() from None
            obj, managers = self._apply(*attempt, force=True)
        if manager == _KUBECTL:
            obj = _sync_last_applied(obj, applied)
        return orjson.loads(orjson.dumps(_with_entries(obj, managers)))

    def _managers_for_apply(self, live, api_version, schema, subresource):
        try:
            managers = _read_trusted(_meta(live).get("managedFields"))
        except (AttributeError, KeyError, TypeError) as e:
            raise StatusError(500, "", f"failed to decode managed fields: {e}") from None
        if not managers and live is not None:
            # Upstream skipNonApplied: what exists before the first apply
            # belongs to "before-first-apply".
            fields = _strip(added_fields(_view(live), schema, root=True))
            if fields:
                entry = _Entry("before-first-apply", _UPDATE, api_version, subresource,
                               self._now(), fields)
                managers[entry.key] = entry
        return managers

    def _apply(self, live, applied, config_fields, manager, api_version, subresource, schema,
               managers, ignored, force):
        managers = dict(managers)
        before = live if live is not None else {}
        merged = merge(before, applied, schema)
        key = (manager, _APPLY, "", subresource)
        last = managers.get(key)
        managers[key] = _Entry(manager, _APPLY, api_version, subresource,
                               last.time if last else None, config_fields)
        if last is not None and last.fields:
            owned = {}
            for entry in managers.values():
                owned = union(owned, entry.fields)
            merged = prune(merged, last.fields, owned, schema)
        others = [k for k in managers if k != key]
        if others:
            added, modified, removed = diff(_view(before), _view(merged), schema)
            touched = union(modified, added) if modified else added
            touched, removed = without(touched, ignored), without(removed, ignored)
            conflicts = {}
            for other in others:
                found = intersection(managers[other].fields, touched)
                if found:
                    conflicts[other] = found
            if conflicts and not force:
                raise _Conflicts.of(managers, conflicts)
            for other in others:
                entry = managers[other]
                kept = difference(entry.fields, conflicts.get(other, {}))
                kept = difference(kept, removed)
                if not kept:
                    del managers[other]
                elif kept is not entry.fields:
                    managers[other] = entry.changed(fields=kept)
        ours = _strip(config_fields)
        if not ours:
            del managers[key]
        else:
            no_op = live is not None and merged == live
            managers[key] = managers[key].changed(fields=ours,
                                                  time=None if no_op else self._now())
        return merged, managers


# -- kubectl's client-side apply annotation -----------------------------------------

def _allowed_by_last_applied(live, api_version, schema):
    """
    Fields kubectl's last client-side apply set and the object still holds:
    kubectl's server-side apply may take them without a conflict (upstream
    C{lastAppliedManager}).  None when there is no usable annotation.
    """
    text = (_meta(live).get("annotations") or {}).get(LAST_APPLIED)
    if not text:
        return None
    try:
        last = parse_json(text)
        if not isinstance(last, dict) or last.get("apiVersion") != api_version:
            return None
        fields = field_set(last, schema)
    except (ValueError, SchemaError):
        return None
    added, modified, removed = diff(_view(last), _view(live), schema)
    return difference(difference(difference(fields, modified), added), removed)


def _sync_last_applied(obj, applied):
    """Keep kubectl's annotation equal to what it applied (upstream C{lastAppliedUpdater})."""
    annotations = _meta(obj).get("annotations") or {}
    if not annotations.get(LAST_APPLIED):
        return obj
    config = dict(applied)
    config_meta = dict(_meta(applied))
    config_annotations = {k: v for k, v in (config_meta.get("annotations") or {}).items()
                          if k != LAST_APPLIED}
    if config_annotations:
        config_meta["annotations"] = config_annotations
    else:
        config_meta.pop("annotations", None)
    config["metadata"] = config_meta
    updated = dict(annotations)
    updated[LAST_APPLIED] = go_json(config) + "\n"
    if sum(len(k.encode()) + len(v.encode()) for k, v in updated.items()) > _ANNOTATIONS_MAX:
        del updated[LAST_APPLIED]
    out = dict(obj)
    out["metadata"] = dict(_meta(obj), annotations=updated)
    return out
