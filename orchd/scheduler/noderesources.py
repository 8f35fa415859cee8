# -*- test-case-name: tests.scheduler.test_filters,tests.scheduler.test_scores -*-
"""
NodeResourcesFit: what a pod requests must fit in what its node has left.

The filter is upstream's C{fitsRequest}: one more pod must fit in the
node's allocatable C{pods} (C{Too many pods}), and each resource the pod
requests (a zero request asks nothing) in the node's allocatable minus
what its pods request (C{Insufficient cpu}, C{Insufficient memory},
C{Insufficient <resource>}); every shortfall is a reason of its own. The
score is upstream's default, LeastAllocated: the share of cpu and memory
left once the pod is placed, counting unset requests as 100m and 200Mi,
averaged over those the node has.
"""

from zope.interface import implementer

from orchd.scheduler.framework import (
    MAX_NODE_SCORE, UNSCHEDULABLE, FilterPlugin, NodeStatus, ScorePlugin,
)
from orchd.scheduler.interfaces import IFilterPlugin, IScorePlugin

NAME = "NodeResourcesFit"
TOO_MANY_PODS = "Too many pods"


@implementer(IFilterPlugin, IScorePlugin)
class NodeResourcesFit(FilterPlugin, ScorePlugin):
    name = NAME
    weight = 1

    def filter(self, pod, node):
        spec = node.node
        reasons = None
        if node.pod_count >= spec.pods:
            reasons = [TOO_MANY_PODS]
        if pod.fit_requests:
            allocatable, requested = spec.allocatable, node.requested
            for name, value in pod.fit_requests:
                if value > allocatable.get(name, 0) - requested.get(name, 0):
                    if reasons is None:
                        reasons = []
                    reasons.append(f"Insufficient {name}")
        if reasons is None:
            return None
        return NodeStatus(UNSCHEDULABLE, *reasons)

    def filter_nodes(self, pod, nodes, statuses):
        kept = []
        requests = pod.fit_requests
        for node in nodes:
            spec = node.node
            if node.pod_count < spec.pods:
                allocatable, requested = spec.allocatable, node.requested
                for name, value in requests:
                    if value > allocatable.get(name, 0) - requested.get(name, 0):
                        break
                else:
                    kept.append(node)
                    continue
            statuses[node.name] = self.filter(pod, node)
        return kept

    def score(self, pod, node):
        spec = node.node
        total = counted = 0
        capacity = spec.cpu
        if capacity > 0:
            counted = 1
            used = node.non_zero_cpu + pod.non_zero_cpu
            if used <= capacity:
                total = (capacity - used) * MAX_NODE_SCORE // capacity
        capacity = spec.memory
        if capacity > 0:
            counted += 1
            used = node.non_zero_memory + pod.non_zero_memory
            if used <= capacity:
                total += (capacity - used) * MAX_NODE_SCORE // capacity
        return total // counted if counted else 0

    def score_nodes(self, pod, nodes):
        cpu, memory, score = pod.non_zero_cpu, pod.non_zero_memory, MAX_NODE_SCORE
        scores = []
        for node in nodes:
            spec = node.node
            total = counted = 0
            capacity = spec.cpu
            if capacity > 0:
                counted = 1
                used = node.non_zero_cpu + cpu
                if used <= capacity:
                    total = (capacity - used) * score // capacity
            capacity = spec.memory
            if capacity > 0:
                counted += 1
                used = node.non_zero_memory + memory
                if used <= capacity:
                    total += (capacity - used) * score // capacity
            scores.append(total // counted if counted else 0)
        return scores

    def normalize(self, pod, scores):
        pass
