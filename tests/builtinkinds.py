"""The built-in kinds, for tests that name one by its group and kind."""

from orchd.api.fieldmanager import FieldManager
from orchd.api.patchschema import DEFAULT
from orchd.registry.kinds.builtin import KINDS


def kind_info(group, kind, version=None):
    """
    The L{orchd.api.kinds.KindInfo} of a built-in kind: of C{version}, or
    its first row in the table; None if the table has none.
    """
    for info in KINDS:
        if (info.group, info.kind) == (group, kind) and version in (None, info.version):
            return info
    return None


def patch_schema_for(group, kind):
    """The patch schema of a built-in kind; ObjectMeta's rules for any other."""
    info = kind_info(group, kind)
    return DEFAULT if info is None else info.patch_schema


class KindFieldManagers:
    """
    C{update} and C{apply} of L{FieldManager} for objects of any kind, each
    kind through a manager of its own, as the catalog has one per resource.
    """

    def __init__(self, clock_seconds):
        self._clock = clock_seconds
        self._managers = {}

    def _manager(self, group, kind):
        manager = self._managers.get((group, kind))
        if manager is None:
            manager = self._managers[(group, kind)] = FieldManager(
                patch_schema_for(group, kind), self._clock)
        return manager

    def update(self, old, new, manager, api_version, group, kind, *args, **kwargs):
        return self._manager(group, kind).update(old, new, manager, api_version, group, kind,
                                                 *args, **kwargs)

    def apply(self, live, applied, manager, force, api_version, group, kind, *args, **kwargs):
        return self._manager(group, kind).apply(live, applied, manager, force, api_version,
                                                group, kind, *args, **kwargs)
