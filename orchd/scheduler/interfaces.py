# -*- test-case-name: tests.scheduler.test_framework -*-
"""
The scheduler's plugin seams, as upstream's framework names its extension
points: PreFilter, Filter and Score.

Plugins are called for one pod (a L{orchd.scheduler.podinfo.PodInfo}) and
one node at a time (a L{orchd.scheduler.cache.NodeInfo}, which also counts
what the pods already on the node use); they keep no state between calls.
"""

from zope.interface import Attribute, Interface


class IPreFilterPlugin(Interface):
    """Narrows the nodes a pod is tried on, before any node is."""

    name = Attribute("The plugin's name, as upstream names it (messages quote it).")

    def prefilter(pod):
        """
        @return: None (every node), or the set of node names the pod may go to.
        @raise orchd.scheduler.framework.PreFilterRejected: when no node can take it.
        """


class IFilterPlugin(Interface):
    """Says whether one node can take a pod."""

    name = Attribute("The plugin's name.")

    def skip_filter(pod):
        """
        True when the filter cannot reject any node for C{pod} (upstream's
        PreFilter C{Skip}): it is then not called for each node.
        """

    def filter(pod, node):
        """
        @return: None when C{node} fits, else an
            L{orchd.scheduler.framework.NodeStatus} with the reasons why not.
        """

    def filter_nodes(pod, nodes, statuses):
        """
        L{filter} over C{nodes} at once (what the framework calls): the
        nodes that fit, in order; the status of each other one is put in
        C{statuses} by node name. (L{orchd.scheduler.framework.FilterPlugin}
        does it one node at a time; a plugin may do it faster.)
        """


class IScorePlugin(Interface):
    """Ranks the nodes that can take a pod."""

    name = Attribute("The plugin's name.")
    weight = Attribute("What its 0-100 scores are multiplied by in the total.")

    def skip_score(pod):
        """True when the plugin has nothing to say of C{pod} (upstream's PreScore C{Skip})."""

    def score(pod, node):
        """@return: the raw score of C{node} for C{pod} (an int)."""

    def score_nodes(pod, nodes):
        """L{score} of each of C{nodes}, as a list (what the framework calls)."""

    def normalize(pod, scores):
        """Bring the raw scores of every feasible node (a list, in place) to 0-100."""
