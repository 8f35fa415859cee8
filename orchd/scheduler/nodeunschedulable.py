# -*- test-case-name: tests.scheduler.test_filters -*-
"""
NodeUnschedulable: a cordoned node (C{spec.unschedulable}) takes only pods
that tolerate the C{node.orch.io/unschedulable:NoSchedule} taint, as
upstream's plugin of that name.
"""

from zope.interface import implementer

from orchd.api.taints import NO_SCHEDULE, UNSCHEDULABLE, tolerates
from orchd.scheduler.framework import UNRESOLVABLE, FilterPlugin, NodeStatus
from orchd.scheduler.interfaces import IFilterPlugin

NAME = "NodeUnschedulable"
REASON = "node(s) were unschedulable"
_TAINT = {"key": UNSCHEDULABLE, "effect": NO_SCHEDULE}


@implementer(IFilterPlugin)
class NodeUnschedulable(FilterPlugin):
    name = NAME

    def filter_nodes(self, pod, nodes, statuses):
        if not any(node.node.unschedulable for node in nodes):
            return nodes
        return super().filter_nodes(pod, nodes, statuses)

    def filter(self, pod, node):
        if not node.node.unschedulable:
            return None
        if any(tolerates(toleration, _TAINT) for toleration in pod.tolerations):
            return None
        return NodeStatus(UNRESOLVABLE, REASON)
