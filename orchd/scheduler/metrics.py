# -*- test-case-name: tests.scheduler.test_scheduler -*-
"""
The scheduler's metrics, named as upstream's (the scheduler's port serves
them): C{scheduler_schedule_attempts_total{result,profile}} and
C{scheduler_scheduling_attempt_duration_seconds{result,profile}}, where
C{result} is C{scheduled}, C{unschedulable} (no node fits) or C{error}, and
an attempt lasts from the decision's start to the end of its binding.

A scheduler is made anew at each leadership, so the families live in one
registry per process, which the scheduler's port serves.
"""

from orchd.api.metrics import STABLE, Registry, exponential_buckets

SCHEDULED = "scheduled"
UNSCHEDULABLE = "unschedulable"
ERROR = "error"

#: Upstream's attempt latency buckets: 1 ms doubling, 15 of them.
ATTEMPT_BUCKETS = exponential_buckets(0.001, 2, 15)


class SchedulerMetrics:
    def __init__(self, registry=None):
        self.registry = registry = registry if registry is not None else Registry()
        self.attempts = registry.counter(
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod "
            "could not be scheduled, while 'error' means an internal scheduler problem.",
            ("result", "profile"), STABLE)
        self.duration = registry.histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ("result", "profile"), ATTEMPT_BUCKETS, STABLE)

    def attempt(self, result, profile, seconds):
        key = (result, profile)
        self.attempts.inc(key)
        self.duration.observe(key, seconds)


#: The process's scheduler metrics.
SCHEDULER = SchedulerMetrics()
