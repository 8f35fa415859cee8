# -*- test-case-name: tests.registry.test_resourcemetrics -*-
"""
The resource metrics API (C{metrics.orch.io/v1beta1}): NodeMetrics
(C{nodes}) and PodMetrics (C{pods}), get and list, stored nowhere.

Upstream serves them from metrics-server, a separate component that scrapes
every kubelet's C{/metrics/resource}; here the control plane scrapes its
node agents itself (L{orchd.app.metricsscraper}) and hands each node's
answer to a L{MetricsCache}, which keeps the last two points of every
counter and answers usage as metrics-server computes it: the CPU counter's
rate between the two points (C{window} is their distance, C{timestamp} the
newer one), the newest working set for memory. A container seen once has
its start time as the older point (its counter was 0 then), so a new pod
has figures after one scrape. A counter that went back (a restart) has no
rate until the next point.

Objects carry the labels of their node or pod, read from the served nodes
and pods at each request (so a label selector filters by them, as
upstream's), and a creation timestamp of now.
"""

from orchd.api.errors import StatusError
from orchd.api.kinds import METRICS
from orchd.api.meta import rfc3339
from orchd.api.promtext import parse_samples
from orchd.api.quantity import BINARY_SI, Quantity
from orchd.registry.options import ListOptions

METRICS_GROUP = METRICS

_NODE_CPU = "node_cpu_usage_seconds_total"
_NODE_MEMORY = "node_memory_working_set_bytes"
_CONTAINER_CPU = "container_cpu_usage_seconds_total"
_CONTAINER_MEMORY = "container_memory_working_set_bytes"
_CONTAINER_START = "container_start_time_seconds"


#: The fields of a point (L{point}).
CPU, MEMORY, TIME, STARTED = range(4)


def point(cpu, memory, time, started=None):
    """
    One reading: cumulative CPU seconds and working set bytes at C{time}
    (seconds), and a container's start time. A plain tuple of numbers, which
    the garbage collector stops tracking at its first pass: the cache keeps
    two per node and container for 15-30 s, thousands at a time, long enough
    for objects to be walked in the collector's old generation.
    """
    return (cpu, memory, time, started)


def parse_node_metrics(text, now):
    """
    C{(node point or None, {(namespace, pod): {container: point}})} from a
    C{/metrics/resource} answer; samples without a timestamp take C{now}.

    @raise ParseError: when C{text} is not the text format.
    """
    node = {}
    containers = {}
    for sample in parse_samples(text):
        name = sample.name
        stamp = now if sample.timestamp is None else sample.timestamp / 1000.0
        if name in (_NODE_CPU, _NODE_MEMORY):
            node[name] = (sample.value, stamp)
        elif name in (_CONTAINER_CPU, _CONTAINER_MEMORY, _CONTAINER_START):
            labels = sample.labels
            key = (labels.get("namespace", ""), labels.get("pod", ""))
            if not all(key) or not labels.get("container"):
                continue
            containers.setdefault(key, {}).setdefault(labels["container"], {})[name] = \
                (sample.value, stamp)
    node_point = None
    if _NODE_CPU in node and _NODE_MEMORY in node:
        node_point = point(node[_NODE_CPU][0], node[_NODE_MEMORY][0], node[_NODE_CPU][1])
    pods = {}
    for key, by_container in containers.items():
        points = {}
        for container, values in by_container.items():
            if _CONTAINER_CPU not in values or _CONTAINER_MEMORY not in values:
                continue
            started = values.get(_CONTAINER_START, (None, None))[0]
            points[container] = point(values[_CONTAINER_CPU][0], values[_CONTAINER_MEMORY][0],
                                      values[_CONTAINER_CPU][1], started)
        if points:
            pods[key] = points
    return node_point, pods


class Usage:
    """What a node or container used: C{cores} (float), C{memory} (bytes), C{time}, C{window}."""

    __slots__ = ("cores", "memory", "time", "window")

    def __init__(self, cores, memory, time, window):
        self.cores = cores
        self.memory = memory
        self.time = time
        self.window = window


def _usage(previous, last):
    """The usage between two points of one counter, or None when there is no rate."""
    if previous is None or last[CPU] < previous[CPU] or last[TIME] <= previous[TIME]:
        return None
    window = last[TIME] - previous[TIME]
    return Usage((last[CPU] - previous[CPU]) / window, last[MEMORY], last[TIME], window)


class MetricsCache:
    """
    The last two points of every node and container the scraper saw.

    A scrape replaces a node's entry whole: pods and containers that are
    gone from its answer are gone from the cache; a node that could not be
    scraped (L{node_failed}) or that no longer exists (L{keep_nodes}) is
    dropped, as metrics-server drops what its last scrape did not see.
    """

    def __init__(self):
        self._nodes = {}        # node -> (previous point or None, last point)
        self._pods = {}         # node -> {(namespace, pod): {container: (previous, last)}}
        self._pod_nodes = {}    # (namespace, pod) -> node

    def store(self, node, node_point, pods):
        """Keep one node's scrape (the values of L{parse_node_metrics})."""
        if node_point is not None:
            old = self._nodes.get(node)
            previous = old[1] if old is not None else None
            if previous is not None and previous[TIME] >= node_point[TIME]:
                previous = old[0]     # the same reading again: keep the older point
            self._nodes[node] = (previous, node_point)
        else:
            self._nodes.pop(node, None)
        before = self._pods.get(node, {})
        after = {}
        for key, containers in pods.items():
            kept = before.get(key, {})
            entry = {}
            for name, last in containers.items():
                old = kept.get(name)
                previous = old[1] if old is not None else None
                if previous is not None and previous[TIME] >= last[TIME]:
                    previous = old[0]
                if previous is None or last[CPU] < previous[CPU]:
                    # New or restarted: its start time is the older point.
                    started = last[STARTED]
                    previous = (point(0.0, last[MEMORY], started)
                                if started is not None and started < last[TIME] else None)
                entry[name] = (previous, last)
            after[key] = entry
        for key in before:
            if key not in after and self._pod_nodes.get(key) == node:
                del self._pod_nodes[key]
        for key in after:
            self._pod_nodes[key] = node
        self._pods[node] = after

    def node_failed(self, node):
        """Forget C{node}: its scrape failed, so what it said last is no longer current."""
        self._nodes.pop(node, None)
        for key in self._pods.pop(node, {}):
            if self._pod_nodes.get(key) == node:
                del self._pod_nodes[key]

    def keep_nodes(self, names):
        """Forget every node not in C{names}."""
        for node in set(self._nodes) | set(self._pods):
            if node not in names:
                self.node_failed(node)

    def node_usage(self, node):
        """The L{Usage} of C{node}, or None."""
        entry = self._nodes.get(node)
        return None if entry is None else _usage(*entry)

    def pod_usage(self, namespace, name):
        """C{{container: Usage}} of a pod, or None unless every container it reports has one."""
        node = self._pod_nodes.get((namespace, name))
        if node is None:
            return None
        containers = self._pods.get(node, {}).get((namespace, name))
        if not containers:
            return None
        usages = {container: _usage(*points) for container, points in containers.items()}
        if any(usage is None for usage in usages.values()):
            return None
        return usages


def go_duration(seconds):
    """C{seconds} as Go's C{time.Duration.String} writes it (C{15s}, C{14.998s}, C{1m0s})."""
    millis = max(int(round(seconds * 1000)), 0)
    if millis == 0:
        return "0s"
    minutes, millis = divmod(millis, 60_000)
    hours, minutes = divmod(minutes, 60)
    whole, fraction = divmod(millis, 1000)
    text = f"{whole}.{fraction:03d}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    if minutes:
        return f"{minutes}m{text}"
    if whole == 0:
        return f"{fraction}ms"
    return text


def usage_list(cores, memory):
    """A ResourceList as metrics-server writes one: CPU in nanocores, memory in BinarySI."""
    return {"cpu": f"{int(round(cores * 1e9))}n", "memory": str(Quantity(int(memory), BINARY_SI))}


def resource_metrics_providers(cache, catalog_of, clock):
    """
    The Catalog's C{virtual} entries for NodeMetrics and PodMetrics.

    @param catalog_of: C{catalog_of()} -> the catalog nodes and pods are read
        from (made after these entries, so asked for at request time).
    """
    return {
        (METRICS_GROUP, "nodes"): lambda info: NodeMetricsProvider(info, cache, catalog_of,
                                                                   clock),
        (METRICS_GROUP, "pods"): lambda info: PodMetricsProvider(info, cache, catalog_of, clock),
    }


class _Provider:
    """What both kinds share: reading the objects they describe, and the envelope."""

    source = None   # the core resource whose objects are described

    def __init__(self, info, cache, catalog_of, clock):
        self.info = info
        self.cache = cache
        self._catalog_of = catalog_of
        self.clock = clock

    def selectable_fields(self):
        return ("metadata.name",) + (("metadata.namespace",) if self.info.namespaced else ())

    async def _sources(self, ctx, options):
        label = options.label_selector if options is not None else None
        source = self._catalog_of().resource("", self.source)
        listed = await source.list(ctx, ListOptions(label_selector=label, resource_version="0"))
        return listed.get("items") or []

    async def get(self, ctx, name):
        try:
            obj = await self._catalog_of().resource("", self.source).get(ctx, name)
        except StatusError as e:
            if e.code == 404:
                raise self._not_found(name) from None
            raise
        item = self._item(obj)
        if item is None:
            raise self._not_found(name)
        return item

    def _not_found(self, name):
        return StatusError.not_found(self.info.resource, self.info.group, name)

    async def list(self, ctx, options):
        fields = options.field_selector
        items = []
        for obj in await self._sources(ctx, options):
            item = self._item(obj)
            if item is None:
                continue
            meta = item["metadata"]
            if fields is not None and not fields.empty and not fields.matches(
                    {"metadata.name": meta["name"],
                     "metadata.namespace": meta.get("namespace", "")}):
                continue
            items.append(item)
        return {"kind": self.info.kind + "List",
                "apiVersion": f"{self.info.group}/{self.info.version}",
                "metadata": {}, "items": items}

    def _metadata(self, obj):
        source = obj.get("metadata") or {}
        meta = {"name": source.get("name", "")}
        if self.info.namespaced:
            meta["namespace"] = source.get("namespace", "")
        meta["creationTimestamp"] = rfc3339(self.clock.seconds())
        if source.get("labels"):
            meta["labels"] = dict(source["labels"])
        return meta

    def _envelope(self, obj, usage):
        return {"kind": self.info.kind, "apiVersion": f"{self.info.group}/{self.info.version}",
                "metadata": self._metadata(obj), "timestamp": rfc3339(usage.time),
                "window": go_duration(usage.window)}


class NodeMetricsProvider(_Provider):
    """C{nodes}: a node's usage, for each node with two points."""

    source = "nodes"

    def _item(self, node):
        usage = self.cache.node_usage((node.get("metadata") or {}).get("name", ""))
        if usage is None:
            return None
        return dict(self._envelope(node, usage), usage=usage_list(usage.cores, usage.memory))


class PodMetricsProvider(_Provider):
    """C{pods}: each container's usage, for each pod whose containers all have one."""

    source = "pods"

    def _item(self, pod):
        meta = pod.get("metadata") or {}
        usages = self.cache.pod_usage(meta.get("namespace", ""), meta.get("name", ""))
        if usages is None:
            return None
        first = min(usages.values(), key=lambda usage: usage.time)
        envelope = self._envelope(pod, first)
        envelope["containers"] = [
            {"name": name, "usage": usage_list(usage.cores, usage.memory)}
            for name, usage in sorted(usages.items())]
        return envelope
