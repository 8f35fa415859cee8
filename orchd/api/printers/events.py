# -*- test-case-name: tests.api.test_tables -*-
"""
Events, in both groups: C{v1} (core) and C{events.orch.io/v1}.

Upstream serves both from one storage and prints the core shape; the
C{events.orch.io} fields are the same data under other names (C{note} for
C{message}, C{regarding} for C{involvedObject}, C{deprecated*} for the
series counters), so each group reads its own names into one L{EventView}
and the columns print that.
"""

from orchd.api.printers.base import STRING, Column, Printer, as_dict, name_column, parse_time


class EventView:
    """The fields the event columns print, read from either group's shape."""

    __slots__ = ("last_seen", "first_seen", "count", "type", "reason", "target", "subobject",
                 "source", "message")

    def __init__(self, row, names):
        def get(key):
            return row.get(names[key])

        first = _since(row, get("first")) or _since(row, row.get("eventTime")) or "<unknown>"
        last = _since(row, get("last")) or first
        count = get("count") or 0
        series = row.get("series")
        if isinstance(series, dict):
            last = _since(row, series.get("lastObservedTime")) or "<unknown>"
            count = series.get("count") or 0
        elif count == 0:
            count = 1  # singleton events of the newer API carry no count
        regarding = as_dict(get("regarding"))
        kind, name = str(regarding.get("kind", "")).lower(), regarding.get("name", "")
        source = as_dict(get("source"))
        component = source.get("component") or row.get(names["controller"]) or ""
        instance = source.get("host") or row.get("reportingInstance") or ""

        self.last_seen = last
        self.first_seen = first
        self.count = count
        self.type = row.get("type", default="")
        self.reason = row.get("reason", default="")
        self.target = f"{kind}/{name}" if name else kind
        self.subobject = regarding.get("fieldPath", "")
        self.source = f"{component}, {instance}" if instance else component
        self.message = str(get("message") or "").strip()


def _since(row, timestamp):
    when = parse_time(timestamp)
    return None if when is None else row.since(timestamp)


#: Where each group keeps the fields the columns print.
CORE_NAMES = {
    "first": "firstTimestamp", "last": "lastTimestamp", "count": "count",
    "regarding": "involvedObject", "source": "source", "message": "message",
    "controller": "reportingComponent",
}
EVENTS_NAMES = {
    "first": "deprecatedFirstTimestamp", "last": "deprecatedLastTimestamp",
    "count": "deprecatedCount", "regarding": "regarding", "source": "deprecatedSource",
    "message": "note", "controller": "reportingController",
}


def event_printer(names):
    """The event columns, reading the fields under C{names}."""
    def derive(row):
        return EventView(row, names)

    def cell(attribute):
        return lambda row: getattr(row.memo(derive), attribute)

    return Printer(
        Column("Last Seen", STRING, "The time the event was last observed.", cell("last_seen")),
        Column("Type", STRING, "Type of this event (Normal, Warning).", cell("type")),
        Column("Reason", STRING, "Why the action was taken, in machine-readable form.",
               cell("reason")),
        Column("Object", STRING, "The object this event is about.", cell("target")),
        Column("Subobject", STRING, "The part of the object the event is about.",
               cell("subobject"), priority=1),
        Column("Source", STRING, "The component that reported this event.", cell("source"),
               priority=1),
        Column("Message", STRING, "A human-readable description of the event.", cell("message")),
        Column("First Seen", STRING, "The time the event was first observed.",
               cell("first_seen"), priority=1),
        Column("Count", STRING, "The number of times this event has occurred.", cell("count"),
               priority=1),
        name_column(priority=1),
    )

CORE_EVENT = event_printer(CORE_NAMES)
EVENTS_EVENT = event_printer(EVENTS_NAMES)
