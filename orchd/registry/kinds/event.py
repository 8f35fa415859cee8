# -*- test-case-name: tests.controllers.test_events -*-
"""
Events: the fields a field selector may name.

core/v1 Events are selected by their involved object, reason, reporting
component, source and type (upstream C{pkg/registry/core/event/strategy.go});
events.orch.io/v1 Events by the same facts under their own names
(C{regarding.*}, C{reportingController}; upstream
C{pkg/apis/events/v1/conversion.go}). In both, C{source} is the source
component, or the reporting controller when the source is empty.
"""

from zope.interface import implementer

from orchd.registry.strategy import DefaultStrategy, IStrategy

_OBJECT_FIELDS = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")

#: The selectable fields of core/v1 Events (their strategy computes C{source}).
EVENT_FIELDS = tuple(f"involvedObject.{f}" for f in _OBJECT_FIELDS) + (
    "reason", "reportingComponent", "source", "type")
#: The selectable fields of events.orch.io/v1 Events.
EVENTS_V1_FIELDS = tuple(f"regarding.{f}" for f in _OBJECT_FIELDS) + (
    "reason", "reportingController", "source", "type")


def _text(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _component(source):
    return source.get("component") if isinstance(source, dict) else None


@implementer(IStrategy)
class EventStrategy(DefaultStrategy):
    """core/v1 Event."""

    selectable_fields = EVENT_FIELDS

    def field_values(self, obj):
        values = super().field_values(obj)
        values["source"] = (_text(_component(obj.get("source")))
                            or _text(obj.get("reportingComponent")))
        return values


@implementer(IStrategy)
class EventsV1EventStrategy(DefaultStrategy):
    """events.orch.io/v1 Event: C{involvedObject} is C{regarding}, C{source} is deprecated."""

    selectable_fields = EVENTS_V1_FIELDS

    def field_values(self, obj):
        values = super().field_values(obj)
        values["source"] = (_text(_component(obj.get("deprecatedSource")))
                            or _text(obj.get("reportingController")))
        return values
