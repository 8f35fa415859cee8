# -*- test-case-name: tests.controllers.test_queue -*-
"""
The work queues' metrics, named as upstream's client-go C{workqueue} metrics
(label C{name}: the controller), which the controller manager's port serves:

  - C{workqueue_adds_total}, C{workqueue_retries_total} (counters);
  - C{workqueue_depth} (keys waiting);
  - C{workqueue_queue_duration_seconds} (added to picked up) and
    C{workqueue_work_duration_seconds} (picked up to done), histograms with
    upstream's buckets, 10 ns to 10 s by tens;
  - C{workqueue_unfinished_work_seconds} and
    C{workqueue_longest_running_processor_seconds}, read at scrape from the
    work in progress.

Queues are made by the controllers, anew at each leadership, so their
families live in one registry per process (upstream's global workqueue
provider); the controller manager's registry includes it.
"""

from orchd.api.metrics import Registry, exponential_buckets

#: Upstream's workqueue latency buckets: 1e-8 s up to 1e1 s.
DURATION_BUCKETS = exponential_buckets(10e-9, 10, 10)


class WorkQueueMetrics:
    """The families of every work queue; L{for_queue} gives one queue's recorder."""

    def __init__(self, registry=None):
        self.registry = registry = registry if registry is not None else Registry()
        self._queues = {}
        self.depth = registry.gauge("workqueue_depth", "Current depth of workqueue", ("name",))
        self.adds = registry.counter("workqueue_adds_total",
                                     "Total number of adds handled by workqueue", ("name",))
        self.latency = registry.histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            ("name",), DURATION_BUCKETS)
        self.work = registry.histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.", ("name",),
            DURATION_BUCKETS)
        self.retries = registry.counter("workqueue_retries_total",
                                        "Total number of retries handled by workqueue",
                                        ("name",))
        registry.callback(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has done that is in progress and hasn't been observed "
            "by work_duration. Large values indicate stuck threads. One can deduce the number "
            "of stuck threads by observing the rate at which this increases.",
            ("name",), self._unfinished)
        registry.callback(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            ("name",), self._longest)

    def for_queue(self, name, clock):
        """The recorder of the queue C{name}; a queue of the same name replaces it."""
        recorder = QueueRecorder(self, name, clock)
        self._queues[name] = recorder
        return recorder

    def _unfinished(self):
        return [((name, ), q.unfinished()) for name, q in list(self._queues.items())]

    def _longest(self):
        return [((name, ), q.longest()) for name, q in list(self._queues.items())]


class QueueRecorder:
    """One queue's children, resolved once; times come from C{clock.seconds()}."""

    __slots__ = ("_depth", "_adds", "_latency", "_work", "_retries", "_clock", "_added",
                 "_started")

    def __init__(self, metrics, name, clock):
        self._depth = metrics.depth.labels(name)
        self._depth.set(0)
        self._adds = metrics.adds.labels(name)
        self._latency = metrics.latency.labels(name)
        self._work = metrics.work.labels(name)
        self._retries = metrics.retries.labels(name)
        self._clock = clock
        self._added = {}
        self._started = {}

    def added(self, key):
        """C{key} was added (it waits, or will once its work in progress ends)."""
        self._adds.value += 1
        self._depth.value += 1
        self._added.setdefault(key, self._clock.seconds())

    def picked(self, key):
        """A worker took C{key}."""
        now = self._clock.seconds()
        self._depth.value -= 1
        added = self._added.pop(key, None)
        if added is not None:
            self._latency.observe(now - added)
        self._started[key] = now

    def done(self, key):
        started = self._started.pop(key, None)
        if started is not None:
            self._work.observe(self._clock.seconds() - started)

    def retried(self):
        self._retries.value += 1

    def stopped(self):
        """The queue dropped what waited."""
        self._depth.value = 0
        self._added.clear()

    def unfinished(self):
        now = self._clock.seconds()
        return sum(now - started for started in self._started.values())

    def longest(self):
        now = self._clock.seconds()
        return max((now - started for started in self._started.values()), default=0.0)


#: The process's work queues, as upstream's global workqueue metrics provider.
WORKQUEUES = WorkQueueMetrics()
