# -*- test-case-name: tests.server.test_requestmetrics -*-
"""
The API server's request metrics, with upstream's names, labels and buckets.

The labels are those of C{apiserver/pkg/endpoints/metrics/metrics.go},
because the kube-apiserver dashboards and the mixin's recording rules match
on the strings: C{verb} from the HTTP method (C{LIST} for a collection,
C{WATCH}, C{APPLY} for an apply patch, C{CONNECT} for streamed subresources,
C{other} for anything else), C{scope} (C{resource}, C{namespace},
C{cluster}, empty for non-resource paths), C{component} C{apiserver},
C{dry_run} (C{All}, C{invalid} or empty) and C{code}.

The server calls L{APIServerMetrics.classify} once a request's info is
parsed and L{APIServerMetrics.record} when its handler is done (a watch or
a stream, as upstream's, when it ends): one label tuple per request, then a
counter and two histogram observations, each a dict lookup. The request
path's histograms (the two latencies, the store's and the certificates')
gather their observations and count them in a batch (C{gather}, folded
every L{orchd.api.metrics.FOLD_INTERVAL} and at scrape). Label values
come only from the catalog's kinds (an unknown resource counts with empty
group, version and resource), so no client can mint new series.
"""

import time

from twisted.application.internet import TimerService
from twisted.logger import Logger

from orchd.api.metrics import FOLD_INTERVAL, STABLE, Registry, exponential_buckets
from orchd.server.filters.limits import LONG_RUNNING_SUBRESOURCES
from orchd.server.healthmetrics import HealthMetrics
from orchd.server.processmetrics import register_process_metrics

COMPONENT = "apiserver"

#: Upstream's C{requestLatencies} buckets.
REQUEST_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 1.25, 1.5, 2, 3, 4, 5, 6,
                   8, 10, 15, 20, 30, 45, 60)
#: Upstream's C{requestSliLatencies} buckets (the mixin selects le 1, 5 and 30).
SLI_BUCKETS = (0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30,
               45, 60)
#: Writes per LevelDB group commit: 1 to 4096.
BATCH_SIZE_BUCKETS = exponential_buckets(1, 2, 13)
#: Upstream's C{clientCertificateExpirationHistogram} buckets (seconds).
CERT_EXPIRY_BUCKETS = (0, 1800, 3600, 7200, 21600, 43200, 86400, 172800, 345600, 604800,
                       2592000, 7776000, 15552000, 31104000)

REQUEST_LABELS = ("verb", "dry_run", "group", "version", "resource", "subresource", "scope",
                  "component")
SLI_LABELS = ("verb", "group", "version", "resource", "subresource", "scope", "component")

_METHOD_VERBS = {b"GET": "GET", b"HEAD": "GET", b"POST": "POST", b"PUT": "PUT", b"PATCH": "PATCH",
                 b"DELETE": "DELETE"}
_APPLY_TYPE = b"application/apply-patch+yaml"
#: Verbs counted when they end (upstream's long-running requests).
_LONG_RUNNING_VERBS = frozenset(("WATCH", "CONNECT"))
#: Request shapes whose series are kept (their kinds too: a kind replaced, by a
#: custom resource's new version, say, is let go when the table is cleared).
_SHAPES = 4096
_CODES = {}


def _code(code):
    text = _CODES.get(code)
    if text is None:
        text = _CODES[code] = str(code)
    return text


def dry_run_label(args):
    """Upstream's C{cleanDryRun}: the distinct C{dryRun} values joined, C{invalid} if not All."""
    values = args.get(b"dryRun") if args else None
    if not values:
        return ""
    if any(v != b"All" for v in values):
        return "invalid"
    return "All"


def verb_label(request, info, scope):
    """The reported verb: upstream's C{canonicalVerb} then C{CleanVerb}."""
    verb = _METHOD_VERBS.get(request.method, "other")
    if not info.is_resource_request:
        return verb
    if verb == "GET" and scope in ("namespace", "cluster"):
        verb = "LIST"
    if info.verb == "watch":
        verb = "WATCH"
    elif verb == "PATCH" and request.requestHeaders.getRawHeaders(b"content-type", [b""])[0] \
            .split(b";")[0].strip() == _APPLY_TYPE:
        verb = "APPLY"
    if info.subresource in LONG_RUNNING_SUBRESOURCES:
        verb = "CONNECT"
    return verb


def scope_label(info):
    """Upstream's C{CleanScope}."""
    if not info.is_resource_request:
        return ""
    if info.name or info.verb == "create":
        return "resource"
    if info.namespace:
        return "namespace"
    return "cluster"


def resource_label(info):
    """A resource as C{apiserver_storage_objects} writes it: C{pods}, C{deployments.apps}."""
    return f"{info.resource}.{info.group}" if info.group else info.resource


def _cached_resources(catalog):
    """C{[(resource label, WatchCache)]}: each stored resource's cache, once."""
    seen, result = set(), []
    for info in catalog.served_kinds:
        if not info.stored:
            continue
        prefix = info.key_prefix()
        cache = catalog.caches.get(prefix)
        if cache is None or prefix in seen:
            continue
        seen.add(prefix)
        result.append((resource_label(info), cache))
    return result


def _labels(request, info, kind):
    """The label values of C{apiserver_request_total} but C{code}, as a tuple."""
    scope = scope_label(info)
    verb = verb_label(request, info, scope)
    dry_run = dry_run_label(request.args)
    if kind is None:
        return (verb, dry_run, "", "", "", "", scope, COMPONENT)
    subresource = info.subresource if info.subresource in kind.subresources else ""
    return (verb, dry_run, kind.group, kind.version, kind.resource, subresource, scope,
            COMPONENT)


class RequestTiming:
    """
    One request's timing as the metrics read it.

    Every request makes one (L{APIServerMetrics.begin}), so only C{start} is
    set at first, without an C{__init__} to call; the rest starts as the
    class's default. The server hands it to the registry in the request's
    context (L{orchd.registry.context.RequestContext.timing}), where
    admission webhooks add the time they took to C{excluded}.

    @ivar start: the timer's reading when the request arrived.
    @ivar excluded: seconds spent in admission webhooks, left out of the SLI
        (upstream's latency tracker), so that a slow webhook does not burn
        the API server's SLO.
    @ivar series: the L{_Series} of the request's metric labels, once known.
    @ivar longrunning: whether it is counted when it ends (a watch, a stream).
    """

    start = excluded = 0.0
    series = None
    longrunning = False


class _Series:
    """
    The children one label set counts into: C{apiserver_request_total} per
    code, and the two latency histograms. Found once per request, at
    L{APIServerMetrics.classify}, so that counting it is a few additions.

    @ivar longrunning: whether its requests are counted when they end.
    """

    __slots__ = ("key", "codes", "latency", "sli", "longrunning")

    def __init__(self, metrics, key):
        self.key = key
        self.longrunning = key[0] in _LONG_RUNNING_VERBS
        #: {HTTP code: counter child}
        self.codes = {}
        self.latency = metrics.latency.labels(*key)
        self.sli = metrics.sli.labels(*key[:1], *key[2:])


class APIServerMetrics:
    """
    The API server's registry and the request families in it.

    @param registry: the L{Registry} the families go into (a new one if None).
    @param timer: seconds, for latencies (C{time.perf_counter}).
    @ivar registry: what C{/metrics} exposes.
    """

    log = Logger()

    def __init__(self, registry=None, timer=time.perf_counter):
        self.registry = registry = registry if registry is not None else Registry()
        self.timer = timer
        self.requests = registry.counter(
            "apiserver_request_total",
            "Counter of apiserver requests broken out for each verb, dry run value, group, "
            "version, resource, scope, component, and HTTP response code.",
            REQUEST_LABELS + ("code",), STABLE)
        self.latency = registry.histogram(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, "
            "version, resource, subresource, scope and component.",
            REQUEST_LABELS, REQUEST_BUCKETS, STABLE, gather=True)
        self.sli = registry.histogram(
            "apiserver_request_sli_duration_seconds",
            "Response latency distribution (not counting webhook duration and priority & "
            "fairness queue wait times) in seconds for each verb, group, version, resource, "
            "subresource, scope and component.",
            SLI_LABELS, SLI_BUCKETS, gather=True)
        self.longrunning = registry.gauge(
            "apiserver_longrunning_requests",
            "Gauge of all active long-running apiserver requests broken out by verb, group, "
            "version, resource, scope and component. Not all requests are tracked this way.",
            SLI_LABELS, STABLE)
        self.terminations = registry.counter(
            "apiserver_request_terminations_total",
            "Number of requests which apiserver terminated in self-defense.",
            SLI_LABELS + ("code",))
        self.watch_events = registry.counter(
            "apiserver_watch_events_total", "Number of events sent in watch clients",
            ("group", "version", "kind"))
        self.cert_expiry = registry.histogram(
            "apiserver_client_certificate_expiration_seconds",
            "Distribution of the remaining lifetime on the certificate used to authenticate "
            "a request.", (), CERT_EXPIRY_BUCKETS, gather=True)
        #: C{observe_certificate_lifetime(seconds)}: a request was authenticated
        #: by a client certificate with C{seconds} of its lifetime left.
        self.observe_certificate_lifetime = self.cert_expiry.labels().observe
        self.storage_latency = registry.histogram(
            "etcd_request_duration_seconds",
            "Etcd request latency in seconds for each operation and object type.",
            ("operation", "type"), REQUEST_BUCKETS, gather=True)
        self.batch_sizes = registry.histogram(
            "orchd_storage_group_commit_batch_size",
            "Writes made durable together by one synced LevelDB batch (group commit).",
            (), BATCH_SIZE_BUCKETS)
        register_process_metrics(registry)
        #: {label tuple: L{_Series}}; as bounded as the label values (see the module).
        self._series = {}
        #: {request shape: L{_Series}} (see L{classify}), at most L{_SHAPES}.
        self._shapes = {}
        #: C{/metrics/slis}: the health checks' results.
        self.health = HealthMetrics()
        self.slis = self.health.registry

    def follow_server(self, catalog, limiter, health):
        """
        Report what the server's parts hold, read at scrape: the stored
        objects and watchers of each watch cache, and the in-flight peaks of
        C{limiter} (an L{orchd.server.filters.limits.InflightLimiter}); count
        C{health}'s check results.
        """
        registry = self.registry
        if health is not None:
            health.metrics = self.health

        def storage_objects():
            return [((name,), len(cache.state)) for name, cache in _cached_resources(catalog)]

        def watchers():
            return [((name,), len(cache.watchers)) for name, cache in _cached_resources(catalog)]

        def history():
            return [((name,), len(cache.history)) for name, cache in _cached_resources(catalog)]

        def inflight():
            return [(("readOnly",), limiter.peak("read")), (("mutating",), limiter.peak("write"))]

        registry.callback(
            "apiserver_current_inflight_requests",
            "Maximal number of currently used inflight request limit of this apiserver per "
            "request kind in last second.", ("request_kind",), inflight, stability=STABLE)
        registry.callback(
            "apiserver_storage_objects",
            "Number of stored objects at the time of last check split by kind. In case of a "
            "fetching error, the value will be -1.", ("resource",), storage_objects,
            stability=STABLE)
        registry.callback(
            "orchd_watch_cache_watchers", "Watches served from each resource's watch cache.",
            ("resource",), watchers)
        registry.callback(
            "orchd_watch_cache_history_events",
            "Recent changes each resource's watch cache keeps to resume watches from.",
            ("resource",), history)

    def folding(self, clock):
        """
        The service that folds the gathering histograms every
        L{FOLD_INTERVAL}, so that each holds at most that long's
        observations whether or not anyone scrapes.
        """
        service = TimerService(FOLD_INTERVAL, self.registry.fold)
        service.clock = clock
        return service

    # -- the per-request hook -------------------------------------------------

    def begin(self):
        """A request arrived: its L{RequestTiming}."""
        timing = RequestTiming()
        timing.start = self.timer()
        return timing

    def classify(self, timing, request, info, kind):
        """
        Fix the request's labels, once its info is parsed.

        @param kind: the L{orchd.api.kinds.KindInfo} the request addresses,
            or None (a non-resource path, or a resource not served).
        """
        args = request.args
        if request.method == b"PATCH" or (args and b"dryRun" in args):
            series = self._series_of(_labels(request, info, kind))
        else:
            # Nearly every request (no dry run, not a patch) has labels that
            # follow from its shape alone: those of a shape seen before are kept.
            shape = (request.method, info.is_resource_request, info.verb, kind,
                     info.subresource, info.name == "", info.namespace == "")
            series = self._shapes.get(shape)
            if series is None:
                if len(self._shapes) >= _SHAPES:
                    self._shapes.clear()
                series = self._shapes[shape] = self._series_of(_labels(request, info, kind))
        timing.series = series
        if series.longrunning and kind is not None:
            key = series.key
            short = key[:1] + key[2:]
            timing.longrunning = True
            self.longrunning.inc(short)
            request.notifyFinish().addBoth(self._longrunning_ended, request, timing, short)

    def _series_of(self, key):
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _Series(self, key)
        return series

    def _longrunning_ended(self, _, request, timing, short):
        # As upstream's, a watch or a stream is counted, and timed, when it ends.
        self.longrunning.dec(short)
        self.record(request, timing)

    def terminated(self, timing, code):
        """The server refused the request in self-defence (the in-flight limit's 429)."""
        series = timing.series
        if series is not None:
            key = series.key
            self.terminations.inc(key[:1] + key[2:] + (_code(code),))

    def record(self, request, timing):
        """
        Count the answered request. The server calls it when the handler is
        done, unless C{timing.longrunning}: those are counted when they end.
        """
        try:
            elapsed = self.timer() - timing.start
            series = timing.series
            if series is None:
                # Refused before its info was read (a malformed query, say).
                key = (_METHOD_VERBS.get(request.method, "other"), "", "", "", "", "", "",
                       COMPONENT)
                series = self._series_of(key)
            code = request.code
            counter = series.codes.get(code)
            if counter is None:
                counter = series.codes[code] = self.requests.labels(*series.key, str(code))
            counter.value += 1
            series.latency.observe(elapsed)
            excluded = timing.excluded
            series.sli.observe(max(elapsed - excluded, 0.0) if excluded else elapsed)
        except Exception:
            self.log.failure("Counting a request failed")

    # -- other hooks ----------------------------------------------------------

    def watch_counter(self, kind):
        """The C{apiserver_watch_events_total} child of C{kind}, to count a watch's frames."""
        return self.watch_events.labels(kind.group, kind.version, kind.kind)
