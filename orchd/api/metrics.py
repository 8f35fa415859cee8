# -*- test-case-name: tests.api.test_metrics -*-
"""
Metric families and their Prometheus text exposition (format 0.0.4).

Counting happens on the hot path of every request, so a family keeps one
child per label-value tuple in a dict and counting is a dict lookup and an
addition: no string is built per count. Children may also be looked up once
and kept (C{family.labels(...)}). The text is built only when scraped,
from label strings formatted once per child.

Why not prometheus_client: its children take a lock per increment and
its label lookup goes through keyword handling, several times the cost of
a dict lookup; the process runs one reactor thread, so locks buy nothing.
Its parser is the reference reader of this output in the tests.

Families whose values live elsewhere (watch-cache sizes, /proc) are
L{CallbackFamily}s, asked at scrape time and never on the hot path.
"""

from bisect import bisect_left
from math import inf, isinf, isnan

#: The content type of the exposition, as Prometheus and the orchlet write it.
CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"

#: Seconds between two folds of the gathering histograms (L{Registry.fold}).
FOLD_INTERVAL = 1.0

STABLE = "STABLE"
ALPHA = "ALPHA"


def format_value(value):
    """A sample value as Go's C{strconv.FormatFloat(v, 'g', -1, 64)} writes it: C{1}, C{0.005}."""
    if isinstance(value, int):
        return str(value)
    if isnan(value):
        return "NaN"
    if isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def escape_label(value):
    """A label value inside double quotes: backslash, quote and newline escaped."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text):
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def label_text(names, values, extra=""):
    """C{name="value",...} (no braces) for C{names} and C{values}, then C{extra}."""
    parts = [f'{name}="{escape_label(str(value))}"' for name, value in zip(names, values)]
    if extra:
        parts.append(extra)
    return ",".join(parts)


def exponential_buckets(start, factor, count):
    """Upstream's C{ExponentialBuckets}: C{start}, C{start*factor}, ... (C{count} bounds)."""
    return tuple(start * factor ** i for i in range(count))


def linear_buckets(start, width, count):
    """Upstream's C{LinearBuckets}."""
    return tuple(start + width * i for i in range(count))


class _Family:
    """
    A named family of samples with fixed label names.

    Each kind of family (counter, gauge, histogram) defines C{_new_child(key)},
    the child of a label-value tuple, and C{expose(out)}, which appends its
    exposition text to the list C{out}.
    """

    type = "untyped"

    def __init__(self, name, help, labels=(), stability=ALPHA):
        self.name = name
        self.help = f"[{stability}] {help}" if stability else help
        self.labelnames = tuple(labels)
        self._children = {}

    def labels(self, *values):
        """The child of C{values} (one per label name, in order), made on first use."""
        key = tuple(values)
        child = self._children.get(key)
        if child is None:
            if len(key) != len(self.labelnames):
                raise ValueError(f"{self.name} takes {len(self.labelnames)} label values, "
                                 f"got {len(key)}")
            child = self._children[key] = self._new_child(key)
        return child

    def remove(self, *values):
        """Forget the child of C{values} (a queue that is gone, say)."""
        self._children.pop(tuple(values), None)

    def clear(self):
        self._children.clear()

    def header(self, out):
        out.append(f"# HELP {self.name} {_escape_help(self.help)}\n"
                   f"# TYPE {self.name} {self.type}\n")


class _ValueChild:
    __slots__ = ("labels", "value")

    def __init__(self, labels):
        self.labels = labels
        self.value = 0

    def inc(self, amount=1):
        self.value += amount

    def dec(self, amount=1):
        self.value -= amount

    def set(self, value):
        self.value = value


class Counter(_Family):
    """A monotonic count per label-value tuple."""

    type = "counter"

    def _new_child(self, key):
        text = label_text(self.labelnames, key)
        return _ValueChild("{" + text + "}" if text else "")

    def inc(self, key=(), amount=1):
        """Add C{amount} to the child of the label-value tuple C{key}."""
        child = self._children.get(key)
        if child is None:
            child = self.labels(*key)
        child.value += amount

    def value(self, *values):
        child = self._children.get(tuple(values))
        return 0 if child is None else child.value

    def expose(self, out):
        self.header(out)
        name = self.name
        for child in list(self._children.values()):
            out.append(f"{name}{child.labels} {format_value(child.value)}\n")


class Gauge(Counter):
    """A value that goes up and down, per label-value tuple."""

    type = "gauge"

    def set(self, key, value):
        child = self._children.get(key)
        if child is None:
            child = self.labels(*key)
        child.value = value

    def dec(self, key=(), amount=1):
        self.inc(key, -amount)


class _Buckets:
    """What a histogram child's readers share: its total count and cumulative buckets."""

    __slots__ = ()

    @property
    def count(self):
        return sum(self.counts)

    def cumulative(self):
        """C{[(upper bound, observations at or below it)]}, C{+Inf} last."""
        total, result = 0, []
        for bound, count in zip(self.bounds + (inf,), self.counts):
            total += count
            result.append((bound, total))
        return result


class _HistogramChild(_Buckets):
    __slots__ = ("labels", "bounds", "counts", "sum")

    def __init__(self, labels, bounds):
        self.labels = labels
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value):
        bounds = self.bounds
        # Most observations (a request's or a store read's latency) fall in
        # the first bucket: one comparison rather than a search of them all.
        self.counts[0 if value <= bounds[0] else bisect_left(bounds, value)] += 1
        self.sum += value


class _GatheringChild(_Buckets):
    """
    A histogram child that gathers its observations in a list, counted into
    its buckets when it is read or folded (L{fold}): C{observe} is the
    list's own C{append}, so observing makes no Python call, and counting
    runs in a loop of many. Only the reactor's thread observes and reads it.
    """

    __slots__ = ("labels", "bounds", "_counts", "_sum", "_gathered", "observe")

    def __init__(self, labels, bounds):
        self.labels = labels
        self.bounds = bounds
        self._counts = [0] * (len(bounds) + 1)
        self._sum = 0.0
        self._gathered = []
        self.observe = self._gathered.append

    def fold(self):
        """Count what has gathered."""
        gathered = self._gathered
        if not gathered:
            return
        counts, bounds = self._counts, self.bounds
        first, total = bounds[0], self._sum
        for value in gathered:
            counts[0 if value <= first else bisect_left(bounds, value)] += 1
            total += value
        self._sum = total
        # Cleared in place: observe is bound to this list.
        gathered.clear()

    @property
    def counts(self):
        self.fold()
        return self._counts

    @property
    def sum(self):
        self.fold()
        return self._sum


class Histogram(_Family):
    """
    Observations counted into fixed buckets (upper bounds, C{le}), per label-value tuple.

    An observation equal to a bound counts in that bound's bucket, as Prometheus'.
    A family of the request path may C{gather}: its children count their
    observations when read, or when L{Registry.fold} folds them
    (L{_GatheringChild}).
    """

    type = "histogram"

    def __init__(self, name, help, labels=(), buckets=(), stability=ALPHA, gather=False):
        super().__init__(name, help, labels, stability)
        if "le" in self.labelnames:
            raise ValueError("a histogram cannot have a label named le")
        bounds = tuple(sorted(float(b) for b in buckets))
        if not bounds:
            raise ValueError(f"{name} needs buckets")
        self.bounds = bounds
        self.gather = gather
        self._child_type = _GatheringChild if gather else _HistogramChild
        self._les = [f'le="{format_value(b)}"' for b in bounds] + ['le="+Inf"']

    def _new_child(self, key):
        return self._child_type(label_text(self.labelnames, key), self.bounds)

    def observe(self, key, value):
        """Count C{value} for the label-value tuple C{key}."""
        child = self._children.get(key)
        if child is None:
            child = self.labels(*key)
        child.observe(value)

    def fold(self):
        """Count what each gathering child has gathered."""
        if self.gather:
            for child in list(self._children.values()):
                child.fold()

    def child(self, *values):
        return self._children.get(tuple(values))

    def expose(self, out):
        self.header(out)
        name, les = self.name, self._les
        for child in list(self._children.values()):
            labels = child.labels
            prefix = f"{name}_bucket{{{labels}," if labels else f"{name}_bucket{{"
            total = 0
            for le, count in zip(les, child.counts):
                total += count
                out.append(f"{prefix}{le}}} {total}\n")
            tail = f"{{{labels}}}" if labels else ""
            out.append(f"{name}_sum{tail} {format_value(child.sum)}\n"
                       f"{name}_count{tail} {total}\n")


class CallbackFamily(_Family):
    """
    A gauge or counter whose samples C{collect()} yields at scrape time, as
    C{(label-value tuple, value)} pairs: for figures kept elsewhere anyway.
    """

    def __init__(self, name, help, labels, collect, type="gauge", stability=ALPHA):
        super().__init__(name, help, labels, stability)
        self.type = type
        self._collect = collect

    def expose(self, out):
        self.header(out)
        name, names = self.name, self.labelnames
        for key, value in self._collect():
            text = label_text(names, key)
            labels = "{" + text + "}" if text else ""
            out.append(f"{name}{labels} {format_value(value)}\n")


class Registry:
    """
    The families one endpoint exposes, in registration order.

    A component (the API server, the scheduler, the controller manager) has
    its own registry, so each port serves its own families.
    """

    def __init__(self):
        self._families = {}
        self._included = []

    def include(self, other):
        """Expose C{other}'s families too, after this registry's own (shared families)."""
        self._included.append(other)

    def register(self, family):
        """Add C{family}; a second family of the same name is refused."""
        if family.name in self._families:
            raise ValueError(f"metric {family.name} is already registered")
        self._families[family.name] = family
        return family

    def get(self, name):
        return self._families.get(name)

    def counter(self, name, help, labels=(), stability=ALPHA):
        return self.register(Counter(name, help, labels, stability))

    def gauge(self, name, help, labels=(), stability=ALPHA):
        return self.register(Gauge(name, help, labels, stability))

    def histogram(self, name, help, labels=(), buckets=(), stability=ALPHA, gather=False):
        return self.register(Histogram(name, help, labels, buckets, stability, gather))

    def fold(self):
        """
        Count what the gathering histograms' children have gathered (every
        L{FOLD_INTERVAL}: L{orchd.server.requestmetrics.APIServerMetrics.folding}).
        """
        for family in self._families.values():
            if type(family) is Histogram:
                family.fold()

    def callback(self, name, help, labels, collect, type="gauge", stability=ALPHA):
        return self.register(CallbackFamily(name, help, labels, collect, type, stability))

    def expose(self, names=None):
        """
        The exposition text of every family (or of those named in C{names}), as bytes.

        A family whose callback fails is left out rather than failing the scrape.
        """
        out = []
        families = list(self._families.values())
        for other in self._included:
            families.extend(f for f in other._families.values() if f.name not in self._families)
        for family in families:
            if names is not None and family.name not in names:
                continue
            mark = len(out)
            try:
                family.expose(out)
            except Exception:
                del out[mark:]
        return "".join(out).encode("utf-8")
