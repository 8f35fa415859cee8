# -*- test-case-name: tests.api.test_tables -*-
"""
The pieces every printer is built from: a L{Column} (its definition and the
function that fills its cell), a L{Printer} (the columns of one kind) and
the cell helpers they share.

A cell function takes a L{Row}: the object, the time the table is made at,
and a memo for values several cells of one row derive from (a pod's status
feeds three cells). Cells are computed the way the upstream printers compute
them, reading the JSON-shaped object and applying the defaults the upstream
API server would have applied before printing.
"""

import calendar
import math
import re

from orchd.api.errors import StatusError
from orchd.api.selectors import selector_from_label_selector_object

# Column types, as OpenAPI names them.
STRING = "string"
INTEGER = "integer"
NUMBER = "number"
BOOLEAN = "boolean"
DATE = "date"
TYPES = (STRING, INTEGER, NUMBER, BOOLEAN, DATE)

NAME_DESCRIPTION = (
    "Name must be unique within a namespace (within the cluster for cluster-scoped objects). "
    "Cannot be updated."
)
CREATED_DESCRIPTION = (
    "CreationTimestamp is the server time when this object was created, in RFC 3339 form "
    "and UTC. Set by the system; read-only."
)
CONTAINERS_DESCRIPTION = "Names of each container in the template."
IMAGES_DESCRIPTION = "Images referenced by each container in the template."


class Column:
    """
    One column: its definition in the Table and the function that fills its cell.

    @ivar cell: called with a L{Row}, returns a JSON value of the column's type.
    @ivar priority: 0 for columns always shown, 1 for those only C{-o wide} shows.
    """

    __slots__ = ("name", "type", "description", "cell", "priority", "format")

    def __init__(self, name, type, description, cell, priority=0, format=""):
        if type not in TYPES:
            raise ValueError(f"unknown column type {type!r}")
        self.name = name
        self.type = type
        self.description = description
        self.cell = cell
        self.priority = priority
        self.format = format

    def definition(self):
        """The C{TableColumnDefinition}; every field is written, as upstream does."""
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }

    def __repr__(self):
        return f"<Column {self.name} {self.type} p{self.priority}>"


class Printer:
    """
    The columns of one kind, and what a row carries besides its cells.

    @ivar conditions: None, or a function of a L{Row} returning the row's
        C{conditions} (pods mark finished rows C{Completed}).
    @ivar order: None, or a sort key (a function of the object) for the rows
        of a list, for kinds whose upstream printer sorts (flow schemas print
        in matching order).
    """

    __slots__ = ("columns", "conditions", "order")

    def __init__(self, *columns, conditions=None, order=None):
        self.columns = columns
        self.conditions = conditions
        self.order = order

    def definitions(self):
        return [column.definition() for column in self.columns]

    def cells(self, obj, now):
        row = Row(obj, now)
        return [column.cell(row) for column in self.columns]

    def row_conditions(self, obj, now):
        return self.conditions(Row(obj, now)) if self.conditions else None


class ConvertedPrinter(Printer):
    """
    Another version's printer, for a version served converted from it
    (L{orchd.registry.converted}): each object is converted before its
    cells are computed, as upstream prints the internal object whatever
    version was asked for.
    """

    __slots__ = ("convert",)

    def __init__(self, printer, convert):
        super().__init__(*printer.columns, conditions=printer.conditions, order=printer.order)
        self.convert = convert

    def cells(self, obj, now):
        return super().cells(self.convert(obj), now)

    def row_conditions(self, obj, now):
        return super().row_conditions(self.convert(obj), now) if self.conditions else None


class Row:
    """What a cell function sees: the object and the table's clock."""

    __slots__ = ("obj", "now", "_memo")

    def __init__(self, obj, now):
        self.obj = obj
        self.now = now
        self._memo = {}

    @property
    def meta(self):
        return as_dict(self.obj.get("metadata"))

    def get(self, *path, default=None):
        """The value at C{path} (keys of nested objects), or C{default} if absent or null."""
        return dig(self.obj, path, default)

    def memo(self, derive):
        """C{derive(self)}, computed once per row."""
        if derive not in self._memo:
            self._memo[derive] = derive(self)
        return self._memo[derive]

    def since(self, timestamp):
        """Upstream's C{translateTimestampSince}: the age of a timestamp, C{<unknown>} if unset."""
        when = parse_time(timestamp)
        if when is None:
            return "<unknown>"
        return human_duration(self.now - when)


def as_dict(value):
    return value if isinstance(value, dict) else {}


def as_list(value):
    return value if isinstance(value, list) else []


def dig(obj, path, default=None):
    """The value at C{path} inside nested dicts, or C{default} if absent or null."""
    for key in path:
        if not isinstance(obj, dict):
            return default
        obj = obj.get(key)
        if obj is None:
            return default
    return obj


# -- time ------------------------------------------------------------------------


_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z"
)
#: Go's zero time, 0001-01-01T00:00:00Z: what an unset timestamp is upstream.
ZERO_TIME = calendar.timegm((1, 1, 1, 0, 0, 0, 0, 0, 0))
ZERO_TIME_TEXT = "0001-01-01T00:00:00Z"


def parse_time(value):
    """
    Seconds since the epoch of an RFC 3339 timestamp (fractions allowed).

    None for a missing or unreadable value, and for Go's zero time, which
    upstream treats as unset.
    """
    if not isinstance(value, str):
        return None
    match = _RFC3339.match(value)
    if not match:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    try:
        seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    fraction, zone = match.group(7), match.group(8)
    if fraction:
        seconds += float("0" + fraction)
    if zone not in ("Z", "z"):
        offset = int(zone[1:3]) * 3600 + int(zone[4:6]) * 60
        seconds -= offset if zone[0] == "+" else -offset
    if seconds == ZERO_TIME:
        return None
    return seconds


def format_time(seconds):
    """RFC 3339 in UTC to the second, as Go's C{Time.UTC().Format(time.RFC3339)}."""
    if seconds is None:
        return ZERO_TIME_TEXT
    whole = math.floor(seconds)
    year, month, day, hour, minute, second = _gmtime(whole)
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z"


def _gmtime(seconds):
    days, rest = divmod(seconds, 86400)
    # Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm), valid
    # for any year, unlike time.gmtime on some platforms.
    days += 719468
    era = days // 146097
    doe = days - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (1 if month <= 2 else 0)
    return year, month, day, rest // 3600, rest % 3600 // 60, rest % 60


def human_duration(seconds):
    """
    Upstream's C{duration.HumanDuration}: about two significant figures.

    C{59s}, C{2m5s}, C{15m}, C{3h12m}, C{10h}, C{3d4h}, C{20d}, C{2y30d}, C{9y};
    up to a second in the future reads C{0s}, further is C{<invalid>}.
    """
    whole = math.trunc(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 60 * 2:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = hours // 24 % 365
        years = hours // 24 // 365
        return f"{years}y" if rest == 0 else f"{years}y{rest}d"
    return f"{hours // 24 // 365}y"


# -- cell helpers ----------------------------------------------------------------


def field(*path, default=""):
    """A cell function reading the value at C{path}."""
    return lambda row: row.get(*path, default=default)


def count(*path):
    """A cell function counting the entries of the list or map at C{path}."""
    return lambda row: len(row.get(*path, default=()))


def age(row):
    return row.since(row.meta.get("creationTimestamp"))


def since(*path):
    """A cell function giving the age of the timestamp at C{path}."""
    return lambda row: row.since(row.get(*path))


def name_column(description=NAME_DESCRIPTION, priority=0):
    return Column("Name", STRING, description, lambda row: row.meta.get("name", ""),
                  priority=priority, format="name")


def age_column():
    return Column("Age", STRING, CREATED_DESCRIPTION, age)


def format_labels(labels):
    """Upstream's C{labels.FormatLabels}: C{k=v} sorted by key, C{<none>} if empty."""
    labels = as_dict(labels)
    if not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def selector_string(selector):
    """
    A C{LabelSelector} object as selector text (C{LabelSelectorAsSelector().String()}):
    empty for a missing or empty selector.

    @raise StatusError: for an invalid selector.
    """
    return str(selector_from_label_selector_object(selector if isinstance(selector, dict)
                                                   else None))


def format_label_selector(selector):
    """Upstream's C{metav1.FormatLabelSelector}: C{<none>} if empty, C{<error>} if invalid."""
    try:
        text = selector_string(selector)
    except StatusError:
        return "<error>"
    return text or "<none>"


def containers_cells(*path):
    """The C{Containers} and C{Images} cell functions of the pod spec at C{path}."""
    def containers(row):
        return as_list(row.get(*path, "containers"))

    def names(row):
        return ",".join(as_dict(c).get("name", "") for c in containers(row))

    def images(row):
        return ",".join(as_dict(c).get("image", "") for c in containers(row))

    return names, images


def container_columns(*path, priority=1):
    """The C{Containers} and C{Images} columns of the pod template at C{path}."""
    names, images = containers_cells(*path)
    return (
        Column("Containers", STRING, CONTAINERS_DESCRIPTION, names, priority=priority),
        Column("Images", STRING, IMAGES_DESCRIPTION, images, priority=priority),
    )


def list_with_more(items, limit=3, empty="<unset>"):
    """Upstream's C{listWithMoreString}: the first C{limit}, then C{+ N more...}."""
    text = ",".join(items[:limit])
    if len(items) > limit:
        return f"{text} + {len(items) - limit} more..."
    return text or empty


def int_or_string(value):
    """An C{IntOrString} as upstream prints it."""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def bool_text(value):
    """Upstream's C{printBool}: C{True} or C{False}."""
    return "True" if value else "False"


def join_host_port(host, port):
    """Go's C{net.JoinHostPort}: IPv6 hosts in brackets."""
    host = str(host)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def load_balancer_ingress(status):
    """The IPs or host names of a load balancer status, sorted and unique (wide, unclipped)."""
    found = set()
    for ingress in as_list(as_dict(status).get("ingress")):
        ingress = as_dict(ingress)
        if ingress.get("ip"):
            found.add(ingress["ip"])
        elif ingress.get("hostname"):
            found.add(ingress["hostname"])
    return ",".join(sorted(found))


def condition(conditions, type_):
    """The first condition of C{type_} in a list of conditions, or None."""
    for item in as_list(conditions):
        if isinstance(item, dict) and item.get("type") == type_:
            return item
    return None
