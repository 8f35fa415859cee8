# -*- test-case-name: tests.registry.test_customresourcedefinition -*-
"""
The CustomResourceDefinition kind (upstream's
C{pkg/registry/customresourcedefinition} and, for the status it writes at
once, the naming and establishing controllers of C{pkg/controller}).

A definition is defaulted and validated (L{orchd.registry.kinds.crdvalidation});
the server writes its status itself on every write, before it is stored:
C{acceptedNames} (the requested names that no other definition of the
group, nor a built-in kind, holds; a name in conflict keeps the one
accepted before), the C{NamesAccepted} condition (False with upstream's
C{PluralConflict}, C{SingularConflict}, C{ShortNamesConflict},
C{KindConflict}, C{ListKindConflict} reasons and C{"x" is already in use}
messages), C{Established} (True once the names are accepted, and from then
on), and C{storedVersions} (every storage version it ever had). A new
definition gets the C{customresourcecleanup} finalizer; deleting it marks
it C{Terminating} and the cleanup
(L{orchd.registry.customresources.CustomResourceKinds}) deletes its
resources before the finalizer goes.

Its kinds are served from just before the write is stored (and withdrawn if
the write fails), so a resource created right after the definition's create
returns is served.
"""

from orchd.api import meta as metadata
from orchd.registry.customresources import CustomResourceKinds, established
from orchd.registry.kinds.crdvalidation import (
    default_definition, validate_definition, validate_definition_update,
)
from orchd.registry.kinds.customresource import CLEANUP_FINALIZER, storage_version
from orchd.registry.strategy import DefaultStrategy

_NAME_FIELDS = (("plural", "PluralConflict"), ("singular", "SingularConflict"))
_KIND_FIELDS = (("kind", "KindConflict"), ("listKind", "ListKindConflict"))


def _set_condition(conditions, kind, status, reason, message, now):
    """Set the condition C{kind}; its transition time changes only with its status."""
    for condition in conditions:
        if condition.get("type") == kind:
            if condition.get("status") != status:
                condition["lastTransitionTime"] = now
            condition.update(status=status, reason=reason, message=message)
            return
    conditions.append({"type": kind, "status": status, "lastTransitionTime": now,
                       "reason": reason, "message": message})


def _fresh(requested, accepted, used):
    """Upstream's C{equalToAcceptedOrFresh}: None, or why C{requested} cannot be had."""
    if requested == accepted or requested not in used:
        return None
    return f'"{requested}" is already in use'


def accepted_names(requested, accepted, used_resources, used_kinds):
    """
    Upstream's naming controller's C{calculateNamesAndConditions}: the
    names to accept, and C{(reason, message)} of the first conflict or None.
    """
    names = dict(accepted)
    problem = None
    for field, reason in _NAME_FIELDS:
        why = _fresh(requested.get(field, ""), accepted.get(field, ""), used_resources)
        if why is None:
            names[field] = requested.get(field, "")
        elif problem is None:
            problem = (reason, why)
    mine = set(accepted.get("shortNames") or ())
    short_problems = [f'"{name}" is already in use' for name in requested.get("shortNames") or ()
                      if name not in mine and name in used_resources]
    if short_problems:
        problem = problem or ("ShortNamesConflict", ", ".join(short_problems))
    else:
        names["shortNames"] = list(requested.get("shortNames") or ())
    for field, reason in _KIND_FIELDS:
        why = _fresh(requested.get(field, ""), accepted.get(field, ""), used_kinds)
        if why is None:
            names[field] = requested.get(field, "")
        elif problem is None:
            problem = (reason, why)
    names["categories"] = list(requested.get("categories") or ())
    return {k: v for k, v in names.items() if v not in ("", None, [])}, problem


class CustomResourceDefinitionStrategy(DefaultStrategy):
    """
    @param catalog: the catalog serving definitions; its kinds follow them
        through this strategy's L{CustomResourceKinds}.
    """

    def __init__(self, catalog):
        self.clock = catalog.clock
        #: The custom resource kinds this server serves.
        self.custom_resources = CustomResourceKinds(catalog)

    def prepare_for_create(self, ctx, obj):
        default_definition(obj)
        meta = obj["metadata"]
        finalizers = meta.get("finalizers") or []
        if CLEANUP_FINALIZER not in finalizers:
            meta["finalizers"] = finalizers + [CLEANUP_FINALIZER]
        obj["status"] = {}
        self._write_status(obj)

    def validate(self, ctx, obj):
        return validate_definition(obj)

    def prepare_for_update(self, ctx, obj, old):
        default_definition(obj)
        self._write_status(obj)

    def validate_update(self, ctx, obj, old):
        return validate_definition_update(obj, old)

    def subresource_update(self, subresource, obj, old):
        old = super().subresource_update(subresource, obj, old)
        if not isinstance(old.get("status"), dict):
            old["status"] = {}
        self._write_status(old)
        return old

    def prepare_for_delete(self, ctx, obj):
        if CLEANUP_FINALIZER not in (obj["metadata"].get("finalizers") or ()):
            return
        status = obj.setdefault("status", {})
        _set_condition(status.setdefault("conditions", []), "Terminating", "True",
                       "InstanceDeletionInProgress", "CustomResource deletion is in progress",
                       metadata.rfc3339(self.clock.seconds()))

    def _write_status(self, crd):
        """The status the server keeps: accepted names, conditions, stored versions."""
        spec = crd.get("spec")
        if not isinstance(spec, dict) or not isinstance(spec.get("names"), dict):
            return
        status = crd["status"]
        now = metadata.rfc3339(self.clock.seconds())
        used_resources, used_kinds = self.custom_resources.served_names(
            spec.get("group"), crd["metadata"].get("name"))
        names, problem = accepted_names(spec["names"], status.get("acceptedNames") or {},
                                        used_resources, used_kinds)
        status["acceptedNames"] = names
        conditions = status.setdefault("conditions", [])
        if problem is None:
            _set_condition(conditions, "NamesAccepted", "True", "NoConflicts",
                           "no conflicts found", now)
        else:
            _set_condition(conditions, "NamesAccepted", "False", *problem, now)
        if not established(crd):
            if problem is None and names.get("plural"):
                _set_condition(conditions, "Established", "True", "InitialNamesAccepted",
                               "the initial names have been accepted", now)
            else:
                _set_condition(conditions, "Established", "False", "NotAccepted",
                               "not all names are accepted", now)
        stored = status.setdefault("storedVersions", [])
        storage = storage_version(crd)
        if storage and storage not in stored:
            stored.append(storage)

    async def begin_create(self, ctx, obj):
        return self._begin(obj)

    async def begin_update(self, ctx, obj, old):
        return self._begin(obj)

    def _begin(self, crd):
        """Serve C{crd}'s kinds now; what is returned undoes it if the write fails."""
        kinds = self.custom_resources
        name = crd["metadata"]["name"]
        known = kinds.definitions.get(name)
        if established(crd) and not crd["metadata"].get("deletionTimestamp"):
            previous = kinds.serve(crd)
        else:
            previous = None
        return _Undo(kinds, name, known, previous)

    async def after_delete(self, ctx, obj):
        self.custom_resources.definitions.pop(obj["metadata"]["name"], None)
        self.custom_resources.withdraw(obj["metadata"]["name"])


class _Undo:
    """Serve again what a failed write of a definition replaced."""

    def __init__(self, kinds, name, known, previous):
        self._kinds, self._name, self._known, self._previous = kinds, name, known, previous

    async def revert(self):
        if self._known is None:
            self._kinds.definitions.pop(self._name, None)
        else:
            self._kinds.definitions[self._name] = self._known
        self._kinds.restore(self._name, self._previous)

    async def commit(self):
        pass
