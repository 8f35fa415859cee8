# -*- test-case-name: tests.controllers.test_hpacalc -*-
"""
The HorizontalPodAutoscaler's arithmetic, as upstream's
(C{pkg/controller/podautoscaler/replica_calculator.go} and
C{horizontal.go}), free of I/O so each rule is tested alone.

A resource metric proposes a replica count from the pods' usage, in
milli-units as upstream counts (CPU in millicores, memory in
thousandths of a byte): with a C{Utilization} target, the pods' usage as a
percentage of their requests; with an C{AverageValue} target, the average
usage. The ratio of current to target within L{TOLERANCE} of 1 keeps the
count; otherwise C{ceil(ratio * ready pods)}. Pods that are pending or, for
CPU, not ready yet are left out, and when some are, or some have no metrics,
the count is computed again assuming the worst for the direction of change
(missing pods use the target on a scale-down, nothing on a scale-up;
unready pods nothing on a scale-up), and kept if the direction flips.

The proposal is then stabilized and limited: without C{behavior}, the
highest recommendation of the last 5 minutes and at most twice the
replicas (at least 4) per step; with it, the stabilization windows and the
Pods and Percent policies of C{scaleUp} and C{scaleDown}, over the changes
made in each policy's period.
"""

import math

from orchd.api.quantity import parse_quantity
from orchd.controllers.podstate import parse_time, ready_condition

#: A ratio within this of 1 keeps the replica count (C{--horizontal-pod-autoscaler-tolerance}).
TOLERANCE = 0.1
#: Seconds after a pod's start during which its CPU readiness is judged strictly.
CPU_INITIALIZATION_PERIOD = 300.0
#: Seconds after a pod's start within which a first readiness change counts as initial.
INITIAL_READINESS_DELAY = 30.0
#: Seconds of recommendations a scale-down is stabilized over, without behavior.
DOWNSCALE_STABILIZATION = 300.0

UTILIZATION = "Utilization"
AVERAGE_VALUE = "AverageValue"


class MetricError(Exception):
    """A metric from which no replica count can be computed; the message is upstream's."""


class PodMetric:
    """One pod's usage: C{value} (milli-units), C{timestamp} and C{window} (seconds)."""

    __slots__ = ("value", "timestamp", "window")

    def __init__(self, value, timestamp, window):
        self.value = value
        self.timestamp = timestamp
        self.window = window


def milli(text):
    """A quantity in thousandths, rounded up as upstream's C{MilliValue}."""
    return math.ceil(parse_quantity(text) * 1000)


def group_pods(pods, metrics, resource, now):
    """
    Upstream's C{groupPods}: C{(ready count, unready, missing, ignored)}
    (names), from the pods and their metrics (C{{name: PodMetric}}).
    """
    ready, unready, missing, ignored = 0, set(), set(), set()
    for pod in pods:
        meta, status = pod["metadata"], pod.get("status") or {}
        name = meta["name"]
        if meta.get("deletionTimestamp") or status.get("phase") == "Failed":
            ignored.add(name)
            continue
        if status.get("phase") == "Pending":
            unready.add(name)
            continue
        metric = metrics.get(name)
        if metric is None:
            missing.add(name)
            continue
        if resource == "cpu":
            condition = ready_condition(pod)
            started = parse_time(status.get("startTime"))
            changed = parse_time((condition or {}).get("lastTransitionTime"))
            if condition is None or started is None:
                not_ready = True
            elif started + CPU_INITIALIZATION_PERIOD > now:
                not_ready = (condition.get("status") == "False"
                             or changed is None
                             or metric.timestamp < changed + metric.window)
            else:
                not_ready = (condition.get("status") == "False" and changed is not None
                             and started + INITIAL_READINESS_DELAY > changed)
            if not_ready:
                unready.add(name)
                continue
        ready += 1
    return ready, unready, missing, ignored


def pod_requests(pods, resource, only=None):
    """
    C{{pod name: request}} (milli-units), the sum of its containers' (or
    of the container named C{only}).

    @raise MetricError: when a container has no request for C{resource}.
    """
    requests = {}
    for pod in pods:
        total = 0
        for container in (pod.get("spec") or {}).get("containers") or ():
            if only is not None and container.get("name") != only:
                continue
            request = ((container.get("resources") or {}).get("requests") or {}).get(resource)
            try:
                total += milli(request)
            except ValueError:
                raise MetricError(f"missing request for {resource} in container "
                                  f"{container.get('name', '')} of Pod "
                                  f"{pod['metadata']['name']}") from None
        requests[pod["metadata"]["name"]] = total
    return requests


def utilization_ratio(metrics, requests, target):
    """
    Upstream's C{GetResourceUtilizationRatio}: C{(ratio, utilization %,
    average usage)} of the pods in C{metrics}.
    """
    used = requested = 0
    for name, metric in metrics.items():
        if name in requests:
            used += metric.value
            requested += requests[name]
    if requested == 0:
        raise MetricError("no metrics returned matched known pods")
    utilization = used * 100 // requested
    return utilization / target, utilization, used // len(metrics)


def usage_ratio(metrics, target):
    """Upstream's C{GetMetricUsageRatio}: C{(ratio, average usage)}."""
    average = sum(metric.value for metric in metrics.values()) // len(metrics)
    return average / target, average


def _within(ratio):
    return abs(1.0 - ratio) <= TOLERANCE + 1e-9


def replicas_for(current, pods, metrics, resource, target_type, target, now, container=None):
    """
    The replica count one resource metric proposes: C{(replicas, utilization
    or None, average usage, timestamp)}.

    @param pods: the pods the target's selector picks (full objects).
    @param metrics: C{{pod name: PodMetric}} (milli-units).
    @param target: the target utilization (percent) or average value (milli-units).
    @param container: for a C{ContainerResource} metric, the container whose
        requests count; None for the whole pod's.
    @raise MetricError: with upstream's messages.
    """
    if not pods:
        raise MetricError("no pods returned by selector while calculating replica count")
    metrics = dict(metrics)
    ready, unready, missing, ignored = group_pods(pods, metrics, resource, now)
    for name in ignored | unready:
        metrics.pop(name, None)
    if target_type == UTILIZATION:
        requests = pod_requests(pods, resource, container)
    if not metrics:
        raise MetricError("did not receive metrics for targeted pods (pods might be unready)")

    def ratio_of(values):
        if target_type == UTILIZATION:
            return utilization_ratio(values, requests, target)
        ratio, average = usage_ratio(values, target)
        return ratio, None, average

    ratio, utilization, average = ratio_of(metrics)
    timestamp = min(metric.timestamp for metric in metrics.values())
    scale_up_with_unready = bool(unready) and ratio > 1.0
    if not scale_up_with_unready and not missing:
        if _within(ratio):
            return current, utilization, average, timestamp
        return math.ceil(ratio * ready), utilization, average, timestamp
    if missing:
        for name in missing:
            if ratio < 1.0:
                fallback = (requests[name] * max(100, target) // 100
                            if target_type == UTILIZATION else target)
            else:
                fallback = 0
            metrics[name] = PodMetric(fallback, timestamp, 0)
    if scale_up_with_unready:
        for name in unready:
            metrics[name] = PodMetric(0, timestamp, 0)
    new_ratio, _, _ = ratio_of(metrics)
    if _within(new_ratio) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current, utilization, average, timestamp
    replicas = math.ceil(new_ratio * len(metrics))
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        return current, utilization, average, timestamp
    return replicas, utilization, average, timestamp


# -- behavior --------------------------------------------------------------------------


def default_rules(rules, up):
    """
    A C{scaleUp} or C{scaleDown} rule with upstream's defaults filled in
    (C{GenerateHPAScaleUpRules}, C{GenerateHPAScaleDownRules}).
    """
    rules = dict(rules) if isinstance(rules, dict) else {}
    if up:
        rules.setdefault("stabilizationWindowSeconds", 0)
        rules.setdefault("policies", [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                      {"type": "Percent", "value": 100, "periodSeconds": 15}])
    else:
        rules.setdefault("stabilizationWindowSeconds", None)   # the controller's 300 s
        rules.setdefault("policies", [{"type": "Percent", "value": 100, "periodSeconds": 15}])
    rules.setdefault("selectPolicy", "Max")
    return rules


class Recommendations:
    """
    What the controller remembers of one autoscaler between syncs: its
    recent recommendations and the scale changes it made.
    """

    def __init__(self):
        self.recommendations = []     # [(replicas, time)]
        self.scale_ups = []           # [(change, time)]
        self.scale_downs = []

    def record_initial(self, replicas, now):
        if not self.recommendations:
            self.recommendations.append((replicas, now))

    def record_change(self, before, after, now, longest_period):
        """A rescale from C{before} to C{after}; events older than every period go."""
        events = self.scale_ups if after > before else self.scale_downs
        events[:] = [(change, when) for change, when in events if when > now - longest_period]
        events.append((abs(after - before), now))


def _changes_in(period, events, now):
    return sum(change for change, when in events if when > now - period)


def stabilize_default(memory, desired, now, window=DOWNSCALE_STABILIZATION):
    """
    Without behavior (upstream's C{stabilizeRecommendation}): the highest
    recommendation within C{window} seconds, C{desired} recorded.
    """
    highest = desired
    for replicas, when in memory.recommendations:
        if when > now - window:
            highest = max(highest, replicas)
    memory.recommendations = [(r, w) for r, w in memory.recommendations if w > now - window]
    memory.recommendations.append((desired, now))
    return highest


def limit_default(current, desired, minimum, maximum):
    """Upstream's C{convertDesiredReplicasWithRules}: C{(replicas, reason, message)}."""
    scale_up_limit = max(2 * current, 4)
    if maximum > scale_up_limit:
        top, reason, message = (scale_up_limit, "ScaleUpLimit", "the desired replica count is "
                                "increasing faster than the maximum scale rate")
    else:
        top, reason, message = (maximum, "TooManyReplicas",
                                "the desired replica count is more than the maximum replica count")
    if desired < minimum:
        return minimum, "TooFewReplicas", ("the desired replica count is less than the minimum "
                                           "replica count")
    if desired > top:
        return top, reason, message
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


def stabilize_with_behavior(memory, current, desired, up, down, now):
    """
    Upstream's C{stabilizeRecommendationWithBehaviors}: C{(replicas, reason,
    message)}, bounded by the lowest recommendation of the scale-up window
    and the highest of the scale-down window; C{desired} is recorded.
    """
    up_cutoff = now - up["stabilizationWindowSeconds"]
    down_window = down["stabilizationWindowSeconds"]
    down_cutoff = now - (DOWNSCALE_STABILIZATION if down_window is None else down_window)
    up_recommendation = down_recommendation = desired
    old = None
    for index, (replicas, when) in enumerate(memory.recommendations):
        if when > up_cutoff:
            up_recommendation = min(replicas, up_recommendation)
        if when > down_cutoff:
            down_recommendation = max(replicas, down_recommendation)
        if when < up_cutoff and when < down_cutoff:
            old = index
    recommendation = max(current, up_recommendation)
    recommendation = min(recommendation, down_recommendation)
    if old is not None:
        memory.recommendations[old] = (desired, now)
    else:
        memory.recommendations.append((desired, now))
    if desired >= current:
        return recommendation, "ScaleUpStabilized", ("recent recommendations were lower than "
                                                     "current one, applying the lowest recent "
                                                     "recommendation")
    return recommendation, "ScaleDownStabilized", ("recent recommendations were higher than "
                                                   "current one, applying the highest recent "
                                                   "recommendation")


def _period_start(current, policy, memory, now):
    period = policy.get("periodSeconds", 0)
    return (current - _changes_in(period, memory.scale_ups, now)
            + _changes_in(period, memory.scale_downs, now))


def scale_up_limit(current, memory, rules, now):
    """Upstream's C{calculateScaleUpLimitWithScalingRules}."""
    select = rules.get("selectPolicy")
    if select == "Disabled":
        return current
    proposals = []
    for policy in rules.get("policies") or ():
        start = _period_start(current, policy, memory, now)
        if policy.get("type") == "Pods":
            proposals.append(start + policy.get("value", 0))
        elif policy.get("type") == "Percent":
            proposals.append(math.ceil(start * (1 + policy.get("value", 0) / 100)))
    if not proposals:
        return current
    return min(proposals) if select == "Min" else max(proposals)


def scale_down_limit(current, memory, rules, now):
    """Upstream's C{calculateScaleDownLimitWithBehaviors}."""
    select = rules.get("selectPolicy")
    if select == "Disabled":
        return current
    proposals = []
    for policy in rules.get("policies") or ():
        start = _period_start(current, policy, memory, now)
        if policy.get("type") == "Pods":
            proposals.append(start - policy.get("value", 0))
        elif policy.get("type") == "Percent":
            proposals.append(int(start * (1 - policy.get("value", 0) / 100)))
    if not proposals:
        return current
    return max(proposals) if select == "Min" else min(proposals)


def limit_with_behavior(memory, current, desired, minimum, maximum, up, down, now):
    """Upstream's C{convertDesiredReplicasWithBehaviorRate}: C{(replicas, reason, message)}."""
    if desired > current:
        limit = max(scale_up_limit(current, memory, up, now), current)
        if maximum > limit:
            top, reason, message = (limit, "ScaleUpLimit", "the desired replica count is "
                                    "increasing faster than the maximum scale rate")
        else:
            top, reason, message = (maximum, "TooManyReplicas", "the desired replica count is "
                                    "more than the maximum replica count")
        if desired > top:
            return top, reason, message
    elif desired < current:
        limit = min(scale_down_limit(current, memory, down, now), current)
        if minimum < limit:
            bottom, reason, message = (limit, "ScaleDownLimit", "the desired replica count is "
                                       "decreasing faster than the maximum scale rate")
        else:
            bottom, reason, message = (minimum, "TooFewReplicas", "the desired replica count is "
                                       "less than the minimum replica count")
        if desired < bottom:
            return bottom, reason, message
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


def longest_period(behavior):
    """The longest policy period of C{behavior} (seconds), for forgetting old scale events."""
    periods = [policy.get("periodSeconds", 0)
               for side in ("scaleUp", "scaleDown")
               for policy in ((behavior or {}).get(side) or {}).get("policies") or ()
               if isinstance(policy, dict)]
    return max(periods + [15])
