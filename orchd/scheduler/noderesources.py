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

from orchd.scheduler.framework import MAX_NODE_SCORE, UNSCHEDULABLE, NodeStatus
from orchd.scheduler.interfaces import IFilterPlugin, IScorePlugin
from orchd.scheduler.resources import CPU, MEMORY, PODS

NAME = "NodeResourcesFit"
TOO_MANY_PODS = "Too many pods"


@implementer(IFilterPlugin, IScorePlugin)
class NodeResourcesFit:
    name = NAME
    weight = 1

    def filter(self, pod, node):
        allocatable = node.node.allocatable
        reasons = None
        if node.pod_count + 1 > allocatable.get(PODS, 0):
            reasons = [TOO_MANY_PODS]
        requested = node.requested
        for name, value in pod.requests.items():
            if value <= 0 or name == PODS:
                continue
            if value > allocatable.get(name, 0) - requested.get(name, 0):
                reasons = reasons or []
                reasons.append(f"Insufficient {name}")
        if reasons is None:
            return None
        return NodeStatus(UNSCHEDULABLE, *reasons)

    def score(self, pod, node):
        allocatable = node.node.allocatable
        total = counted = 0
        for capacity, used in ((allocatable.get(CPU, 0),
                                node.non_zero_cpu + pod.non_zero.get(CPU, 0)),
                               (allocatable.get(MEMORY, 0),
                                node.non_zero_memory + pod.non_zero.get(MEMORY, 0))):
            if capacity > 0:
                counted += 1
                if used <= capacity:
                    total += (capacity - used) * MAX_NODE_SCORE // capacity
        return total // counted if counted else 0

    def normalize(self, pod, scores):
        pass
