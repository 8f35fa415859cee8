# -*- test-case-name: tests.controllers.test_events -*-
"""
Recording events about objects, for controllers (client-go's event recorder).

C{record} returns at once; the event is written in the background through
the registry, one at a time by default, or C{concurrency} at a time for a
recorder that records many events at once (the scheduler's: one per bound
pod; each write waits for its durable commit, and writes in flight together
share one). Events are correlated in the order they were recorded, and a
write of an event already being written (a repeat raising its count) waits
for the earlier write to end. Before it is written an event goes through
the same correlation as upstream (C{tools/record/events_cache.go}):

 - a spam filter: a token bucket per source and object (a burst of 25, then
   one event every 5 minutes); events past it are dropped;
 - aggregation: once 10 events that differ only in their message have been
   seen within 10 minutes, further ones become one event whose message starts
   with C{(combined from similar events): };
 - deduplication: an event equal to one already written (same involved
   object, type, reason, message and source) raises that event's C{count}
   and C{lastTimestamp} instead of creating another.

The caches are bounded LRUs. Events are best-effort: failures are logged,
never raised to the caller.
"""

from collections import OrderedDict, deque

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from orchd.api.errors import StatusError
from orchd.api.meta import rfc3339
from orchd.storage.interfaces import StoreUnavailableError

NORMAL = "Normal"
WARNING = "Warning"

#: Entries in each correlation cache (upstream C{maxLruCacheEntries}).
CACHE_SIZE = 4096
#: Distinct messages of similar events before they are combined.
AGGREGATE_MAX_EVENTS = 10
#: Seconds after which similar events start a new aggregation.
AGGREGATE_INTERVAL = 600
#: Events a source may send about one object at once, and the refill rate.
SPAM_BURST = 25
SPAM_QPS = 1.0 / 300
#: Seconds since the last occurrence within which a repeat raises the count.
#: Upstream has no window of its own but events expire after the API
#: server's event TTL (1 hour), so a repeat after that starts afresh.
DEDUP_WINDOW = 3600
#: Events waiting to be written before new ones are dropped.
MAX_BACKLOG = 1000

_AGGREGATE_PREFIX = "(combined from similar events): "


class LRUCache:
    """A mapping that forgets its least recently used entry past C{size}."""

    def __init__(self, size):
        self._size = size
        self._items = OrderedDict()

    def get(self, key, default=None):
        try:
            self._items.move_to_end(key)
        except KeyError:
            return default
        return self._items[key]

    def put(self, key, value):
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)

    def __contains__(self, key):
        return self.get(key, self) is not self

    def __len__(self):
        return len(self._items)


class _Seen:
    """What was last written for one deduplication key."""

    __slots__ = ("name", "count", "first", "last_seen")

    def __init__(self, name, count, first, last_seen):
        self.name = name
        self.count = count
        self.first = first
        self.last_seen = last_seen


class _Similar:
    """The distinct messages seen for one aggregation key, and when last."""

    __slots__ = ("messages", "last_seen")

    def __init__(self, last_seen):
        self.messages = set()
        self.last_seen = last_seen


def object_reference(obj):
    """The C{involvedObject} of an event about C{obj} (empty fields left out)."""
    meta = obj.get("metadata") or {}
    fields = (("kind", obj.get("kind")), ("namespace", meta.get("namespace")),
              ("name", meta.get("name")), ("uid", meta.get("uid")),
              ("apiVersion", obj.get("apiVersion")),
              ("resourceVersion", meta.get("resourceVersion")))
    return {key: value for key, value in fields if value}


def _object_key(event):
    ref = event["involvedObject"]
    source = event["source"]
    return (source.get("component", ""), source.get("host", ""), ref.get("kind", ""),
            ref.get("namespace", ""), ref.get("name", ""), ref.get("uid", ""),
            ref.get("apiVersion", ""))


def _event_key(event):
    """Upstream C{getEventKey}: everything that makes two events the same."""
    return _object_key(event) + (event["involvedObject"].get("fieldPath", ""), event["type"],
                                 event["reason"], event["message"])


def _aggregate_key(event):
    """Upstream C{EventAggregatorByReasonFunc}: similar events differ only in message."""
    return _object_key(event) + (event["type"], event["reason"],
                                 event.get("reportingComponent", ""),
                                 event.get("reportingInstance", ""))


class EventRecorder:
    """
    Records core/v1 Events about objects, as one reporting component.

    @param catalog: the L{orchd.registry.catalog.Catalog}; events are written
        through its C{("", "events")} registry.
    @param clock: an C{IReactorTime}, for timestamps and the caches.
    @param component: the reporting component (C{source.component}).
    @param host: the reporting instance (C{source.host}), often a node name.
    """

    log = Logger()

    def __init__(self, catalog, clock, component, host="", window=DEDUP_WINDOW,
                 cache_size=CACHE_SIZE, concurrency=1):
        self._catalog = catalog
        self._concurrency = max(int(concurrency), 1)
        self._clock = clock
        self._component = component
        self._host = host
        self._window = window
        self._seen = LRUCache(cache_size)
        self._similar = LRUCache(cache_size)
        self._spam = LRUCache(cache_size)
        self._backlog = deque()
        self._writers = 0
        #: Event name -> the Deferred of its write under way.
        self._names = {}
        self._last_nanos = 0

    def record(self, obj, type, reason, message, field_path=None):
        """
        Record an event about C{obj} (a JSON object with metadata).

        @param type: C{Normal} or C{Warning}.
        @param field_path: the part of C{obj} it is about (C{involvedObject.fieldPath},
            e.g. C{spec.containers{web}}), or None.
        @return: a Deferred that fires with None once the event has been
            handled, whatever the outcome; callers need not wait on it.
        """
        done = Deferred()
        if type not in (NORMAL, WARNING):
            self.log.error("Unsupported event type: {type!r}", type=type)
            done.callback(None)
            return done
        if len(self._backlog) >= MAX_BACKLOG:
            self.log.warn("Event backlog full; dropping event {reason} about {name}",
                          reason=reason, name=(obj.get("metadata") or {}).get("name"))
            done.callback(None)
            return done
        self._backlog.append((self._make_event(obj, type, reason, message, field_path), done))
        if self._writers < self._concurrency:
            self._writers += 1
            Deferred.fromCoroutine(self._write_backlog()).addErrback(
                lambda f: self.log.failure("Event recorder stopped", f))
        return done

    def _make_event(self, obj, type, reason, message, field_path=None):
        ref = object_reference(obj)
        if field_path:
            ref["fieldPath"] = field_path
        stamp = rfc3339(self._clock.seconds())
        source = {"component": self._component}
        if self._host:
            source["host"] = self._host
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": self._event_name(ref.get("name", "")),
                         "namespace": ref.get("namespace") or "default"},
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "source": source,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "type": type,
            "reportingComponent": self._component,
            "reportingInstance": self._host,
        }

    def _event_name(self, involved):
        """C{<involved name>.<nanoseconds in hex>}, never repeated by this recorder."""
        nanos = max(int(self._clock.seconds() * 1_000_000) * 1000, self._last_nanos + 1)
        self._last_nanos = nanos
        return f"{involved}.{nanos:016x}"

    async def _write_backlog(self):
        """One writer: events from the backlog until it is empty."""
        try:
            while self._backlog:
                event, done = self._backlog.popleft()
                try:
                    await self._write(event)
                except StoreUnavailableError as e:
                    # The store is down or closing (shutdown): events are best effort.
                    self.log.warn("Event {reason} about {name} dropped: {error}",
                                  reason=event["reason"],
                                  name=event["involvedObject"].get("name"), error=e)
                except Exception:
                    self.log.failure("Writing event {reason} about {name} failed",
                                     reason=event["reason"],
                                     name=event["involvedObject"].get("name"))
                done.callback(None)
        finally:
            self._writers -= 1

    # -- correlation ------------------------------------------------------------

    def _spam_filtered(self, event):
        """True when the source has used up its events about this object."""
        now = self._clock.seconds()
        key = _object_key(event)
        bucket = self._spam.get(key)
        if bucket is None:
            tokens = float(SPAM_BURST)
        else:
            tokens = min(float(SPAM_BURST), bucket[0] + (now - bucket[1]) * SPAM_QPS)
        filtered = tokens < 1
        if not filtered:
            tokens -= 1
        self._spam.put(key, (tokens, now))
        return filtered

    def _aggregate(self, event):
        """The event to write and its deduplication key (combined past the limit)."""
        now = self._clock.seconds()
        key = _aggregate_key(event)
        similar = self._similar.get(key)
        if similar is None or now - similar.last_seen > AGGREGATE_INTERVAL:
            similar = _Similar(now)
        similar.messages.add(event["message"])
        similar.last_seen = now
        self._similar.put(key, similar)
        if len(similar.messages) < AGGREGATE_MAX_EVENTS:
            return event, _event_key(event)
        similar.messages.pop()
        stamp = rfc3339(now)
        combined = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": self._event_name(event["involvedObject"].get("name", "")),
                         "namespace": event["metadata"]["namespace"]},
            "involvedObject": event["involvedObject"],
            "reason": event["reason"],
            "message": _AGGREGATE_PREFIX + event["message"],
            "source": event["source"],
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "type": event["type"],
            "reportingComponent": "",
            "reportingInstance": "",
        }
        return combined, key

    def _observe(self, event, key):
        """Fold C{event} into an earlier one with the same key; True if it did."""
        now = self._clock.seconds()
        seen = self._seen.get(key)
        repeat = seen is not None and now - seen.last_seen <= self._window
        if repeat:
            event["metadata"]["name"] = seen.name
            event["firstTimestamp"] = seen.first
            event["count"] = seen.count + 1
        self._seen.put(key, _Seen(event["metadata"]["name"], event["count"],
                                  event["firstTimestamp"], now))
        return repeat

    # -- writing ----------------------------------------------------------------

    async def _write(self, event):
        if self._spam_filtered(event):
            self.log.debug("Event {reason} about {name} dropped: too many from {component}",
                           reason=event["reason"], name=event["involvedObject"].get("name"),
                           component=self._component)
            return
        event, key = self._aggregate(event)
        repeat = self._observe(event, key)
        name = event["metadata"]["name"]
        earlier = self._names.get(name)
        written = self._names[name] = Deferred()
        try:
            if earlier is not None:
                # The same event is being written (created, or its count
                # raised): this write follows it, or it would find no event
                # to raise the count of, or a name already taken.
                await earlier
            await self._send(event, repeat)
        finally:
            if self._names.get(name) is written:
                del self._names[name]
            written.callback(None)

    async def _send(self, event, repeat):
        """
        Write C{event}: a new Event, or (C{repeat}) the count and time of
        the one of the same name. Failures are logged here.
        """
        events = self._catalog.resource("", "events")
        if events is None:
            self.log.debug("Events are not served; event {reason} dropped", reason=event["reason"])
            return
        meta = event["metadata"]
        ctx = self._catalog.system_context(meta["namespace"])
        if repeat:
            try:
                await events.patch(ctx, meta["name"], lambda current: _repeat(current, event))
                return
            except StatusError as e:
                if e.code != 404:
                    self._rejected(event, e)
                    return
            # Expired or deleted meanwhile: write it again, count included (as upstream).
        try:
            await events.create(ctx, event)
        except StatusError as e:
            self._rejected(event, e)

    def _rejected(self, event, error):
        ref = event["involvedObject"]
        if error.code in (403, 409):
            # A namespace being terminated, or a name already taken: expected, not worth a warning.
            self.log.debug("Server rejected event {reason} about {kind} {name}: {error}",
                           reason=event["reason"], kind=ref.get("kind"), name=ref.get("name"),
                           error=error.message)
            return
        self.log.warn("Server rejected event {reason} about {kind} {name}: {error}",
                      reason=event["reason"], kind=ref.get("kind"), name=ref.get("name"),
                      error=error.message)


def _repeat(current, event):
    """The stored event with the repeat's count, last time and message."""
    current["count"] = event["count"]
    current["lastTimestamp"] = event["lastTimestamp"]
    current["message"] = event["message"]
    current["metadata"].pop("resourceVersion", None)
    return current
