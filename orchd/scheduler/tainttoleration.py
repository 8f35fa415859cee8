# -*- test-case-name: tests.scheduler.test_filters,tests.scheduler.test_scores -*-
"""
TaintToleration: taints keep pods off nodes, as upstream's plugin.

The filter rejects a node with a NoSchedule or NoExecute taint the pod
does not tolerate, naming the first such taint (C{node(s) had untolerated
taint {key: value}}, the value empty when there is none). The score
counts the PreferNoSchedule taints the pod does not tolerate (with its
tolerations of that effect, or of no effect): fewest is best.
"""

from zope.interface import implementer

from orchd.api.taints import PREFER_NO_SCHEDULE, tolerates
from orchd.scheduler.framework import (
    UNRESOLVABLE, FilterPlugin, NodeStatus, ScorePlugin, default_normalize,
)
from orchd.scheduler.interfaces import IFilterPlugin, IScorePlugin

NAME = "TaintToleration"


def untolerated_taint(taints, tolerations):
    """The first of C{taints} none of C{tolerations} tolerates, or None."""
    for taint in taints:
        if not any(tolerates(toleration, taint) for toleration in tolerations):
            return taint
    return None


@implementer(IFilterPlugin, IScorePlugin)
class TaintToleration(FilterPlugin, ScorePlugin):
    name = NAME
    weight = 3

    def filter_nodes(self, pod, nodes, statuses):
        """
        Each distinct set of hard taints is judged once per pod: nodes
        mostly share theirs (none, or a taint put on many nodes at once).
        """
        if not any(node.node.hard_taints for node in nodes):
            return nodes
        kept, verdicts = [], {}
        for node in nodes:
            spec = node.node
            if not spec.hard_taints:
                kept.append(node)
                continue
            key = spec.hard_taints_key
            if key in verdicts:
                status = verdicts[key]
            else:
                status = verdicts[key] = self.filter(pod, node)
            if status is None:
                kept.append(node)
            else:
                statuses[node.name] = status
        return kept

    def score_nodes(self, pod, nodes):
        return [self.score(pod, node) if node.node.soft_taints else 0 for node in nodes]

    def filter(self, pod, node):
        taints = node.node.hard_taints
        if not taints:
            return None
        taint = untolerated_taint(taints, pod.tolerations)
        if taint is None:
            return None
        return NodeStatus(UNRESOLVABLE, f"node(s) had untolerated taint "
                                        f"{{{taint.get('key') or ''}: {taint.get('value') or ''}}}")

    def score(self, pod, node):
        taints = node.node.soft_taints
        if not taints:
            return 0
        tolerations = [t for t in pod.tolerations
                       if (t.get("effect") or PREFER_NO_SCHEDULE) == PREFER_NO_SCHEDULE]
        return sum(1 for taint in taints
                   if not any(tolerates(toleration, taint) for toleration in tolerations))

    def normalize(self, pod, scores):
        default_normalize(scores, reverse=True)
