# -*- test-case-name: tests.scheduler.test_filters -*-
"""
NodePorts: a host port can be bound by one pod per node, as upstream's
plugin: a pod's C{(hostIP, protocol, hostPort)} clashes with the same
protocol and port bound on the same address, or on 0.0.0.0, which in turn
clashes with every address.
"""

from zope.interface import implementer

from orchd.scheduler.framework import UNSCHEDULABLE, FilterPlugin, NodeStatus
from orchd.scheduler.interfaces import IFilterPlugin

NAME = "NodePorts"
REASON = "node(s) didn't have free ports for the requested pod ports"


@implementer(IFilterPlugin)
class NodePorts(FilterPlugin):
    name = NAME

    def skip_filter(self, pod):
        return not pod.host_ports

    def filter(self, pod, node):
        if not node.ports:
            return None
        for ip, protocol, port in pod.host_ports:
            if node.port_in_use(ip, protocol, port):
                return NodeStatus(UNSCHEDULABLE, REASON)
        return None
