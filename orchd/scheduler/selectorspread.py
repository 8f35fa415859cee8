# -*- test-case-name: tests.scheduler.test_scores -*-
"""
SelectorSpread: pods of one owner are spread across nodes.

Upstream spreads the pods that the same Services and controllers select
(its SelectorSpread, later the default constraints of PodTopologySpread);
here a pod's peers are the pods with the same controlling owner
(a ReplicaSet, a StatefulSet, a Job...): a node's score falls with the
number of its peers there, from 100 with none to 0 on the node with the
most. Pods without a controller are not spread.
"""

from zope.interface import implementer

from orchd.scheduler.framework import MAX_NODE_SCORE, ScorePlugin
from orchd.scheduler.interfaces import IScorePlugin

NAME = "SelectorSpread"


@implementer(IScorePlugin)
class SelectorSpread(ScorePlugin):
    name = NAME
    weight = 2

    def skip_score(self, pod):
        return pod.owner is None

    def score(self, pod, node):
        if pod.owner is None:
            return 0
        return node.owners.get(pod.owner, 0)

    def score_nodes(self, pod, nodes):
        owner = pod.owner
        return [node.owners.get(owner, 0) for node in nodes]

    def normalize(self, pod, scores):
        if pod.owner is None:
            return
        most = max(scores) if scores else 0
        if most == 0:
            scores[:] = [MAX_NODE_SCORE] * len(scores)
            return
        for index, count in enumerate(scores):
            scores[index] = MAX_NODE_SCORE * (most - count) // most
