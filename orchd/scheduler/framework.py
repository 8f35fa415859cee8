# -*- test-case-name: tests.scheduler.test_framework -*-
"""
One scheduling decision: filter the nodes, score the ones that fit, pick
the best; or say, in upstream's words, why no node fits.

Follows upstream's C{schedule_one.go} and C{framework/types.go}:

  - PreFilter plugins may narrow the nodes tried; the nodes left out are
    counted as C{node(s) didn't satisfy plugin(s) [<plugins>]};
  - each node goes through the filters in order, and the first that
    rejects it gives its reasons;
  - with 100 nodes or more, the search stops once enough feasible nodes
    are found (C{numFeasibleNodesToFind}), and the next search starts
    where this one stopped;
  - scores are each plugin's 0-100 score times its weight, summed; ties are
    broken at random, each best node as likely (as C{selectHost});
  - a pod that fits nowhere gets C{FitError}'s message: C{0/N nodes are
    available: } and the sorted histogram of reasons, then, since upstream
    always runs preemption after a failure, C{ preemption: } and the
    histogram of what preemption would have found, ending C{..} as
    upstream's does (its inner message ends in a period, and the outer
    format adds one). Preemption itself is not done: every node rejected
    only for resources or ports counts as having no victims.
"""

import random as _random
from collections import Counter

MAX_NODE_SCORE = 100
#: Upstream's status codes: the node might fit after preemption, or never.
UNSCHEDULABLE = "Unschedulable"
UNRESOLVABLE = "UnschedulableAndUnresolvable"
NO_NODES_AVAILABLE = "no nodes available to schedule pods"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
PREEMPT_NEVER = "not eligible due to preemptionPolicy=Never."
#: Events carry at most this many characters of a message.
MAX_EVENT_MESSAGE = 1024
#: Below this many nodes every node is tried; above, a share of them.
MIN_FEASIBLE_NODES = 100
MIN_FEASIBLE_PERCENTAGE = 5


class NodeStatus:
    """Why a filter rejected a node: an upstream status code and its reasons."""

    __slots__ = ("code", "reasons")

    def __init__(self, code, *reasons):
        self.code = code
        self.reasons = reasons

    def __eq__(self, other):
        return isinstance(other, NodeStatus) and (self.code, self.reasons) == (
            other.code, other.reasons)

    def __repr__(self):
        return f"<NodeStatus {self.code} {self.reasons}>"


class PreFilterRejected(Exception):
    """A PreFilter plugin found that no node can take the pod."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class NoNodesAvailable(Exception):
    """The cluster has no node at all."""

    def __init__(self):
        super().__init__(NO_NODES_AVAILABLE)
        self.message = NO_NODES_AVAILABLE


class FitError(Exception):
    """
    No node fits a pod.

    @ivar num_all: how many nodes there are.
    @ivar statuses: C{{node name: NodeStatus}} of the nodes tried.
    @ivar absent: the reason of the nodes not tried (left out by a
        PreFilter), or None.
    @ivar prefilter: the PreFilterRejected that stopped the search, or None.
    """

    def __init__(self, pod, num_all, statuses, absent=None, prefilter=None):
        self.pod = pod
        self.num_all = num_all
        self.statuses = statuses
        self.absent = absent
        self.prefilter = prefilter
        super().__init__(self.message)

    @property
    def message(self):
        message = f"0/{self.num_all} nodes are available:"
        if self.prefilter is not None:
            message += f" {self.prefilter.message}."
        else:
            reasons = Counter()
            for status in self.statuses.values():
                reasons.update(status.reasons)
            missing = self.num_all - len(self.statuses)
            if self.absent is not None and missing > 0:
                reasons[self.absent] += missing
            if reasons:
                message += " " + _histogram(reasons) + "."
        return f"{message} preemption: {self._preemption()}."

    def _preemption(self):
        """What upstream's default preemption says of this failure."""
        if self.pod.preempt_never:
            return PREEMPT_NEVER
        victims = 0
        if self.prefilter is None:
            victims = sum(1 for s in self.statuses.values() if s.code == UNSCHEDULABLE)
        reasons = Counter()
        if victims:
            reasons[NO_VICTIMS] = victims
        if self.num_all - victims:
            reasons[NOT_HELPFUL] = self.num_all - victims
        return f"0/{self.num_all} nodes are available: {_histogram(reasons)}."


def _histogram(reasons):
    """C{<count> <reason>} entries sorted as strings (as Go's sort.Strings), comma-joined."""
    return ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items()))


def truncate(message, limit=MAX_EVENT_MESSAGE):
    """An event's message: at most C{limit} characters, ending C{ ...} when cut."""
    if len(message) <= limit:
        return message
    return message[:limit - 4] + " ..."


def default_normalize(scores, max_score=MAX_NODE_SCORE, reverse=False):
    """
    Upstream's C{DefaultNormalizeScore}: scale C{scores} (in place) so the
    highest is C{max_score}; C{reverse} turns the scale round (fewest best).
    """
    highest = max(scores) if scores else 0
    if highest == 0:
        if reverse:
            scores[:] = [max_score] * len(scores)
        return
    for index, score in enumerate(scores):
        score = max_score * score // highest
        scores[index] = max_score - score if reverse else score


def feasible_nodes_to_find(count):
    """How many feasible nodes to look for among C{count} (upstream's adaptive share)."""
    if count < MIN_FEASIBLE_NODES:
        return count
    percentage = max(50 - count // 125, MIN_FEASIBLE_PERCENTAGE)
    return max(count * percentage // 100, MIN_FEASIBLE_NODES)


class FilterPlugin:
    """A filter plugin's default C{filter_nodes}: its C{filter}, node by node."""

    def skip_filter(self, pod):
        return False

    def filter_nodes(self, pod, nodes, statuses):
        kept = []
        for node in nodes:
            status = self.filter(pod, node)
            if status is None:
                kept.append(node)
            else:
                statuses[node.name] = status
        return kept


class ScorePlugin:
    """A score plugin's default C{score_nodes}: its C{score}, node by node."""

    def skip_score(self, pod):
        return False

    def score_nodes(self, pod, nodes):
        return [self.score(pod, node) for node in nodes]


class Framework:
    """
    The plugins of one scheduler, run for one pod at a time.

    @param prefilters: L{IPreFilterPlugin}s.
    @param filters: L{IFilterPlugin}s, in the order they are tried.
    @param scores: L{IScorePlugin}s.
    @param random: a C{random.Random} for ties (seeded in tests).
    """

    def __init__(self, prefilters, filters, scores, random=None):
        self.prefilters = tuple(prefilters)
        self.filters = tuple(filters)
        self.scores = tuple(scores)
        self.random = random or _random.Random()
        self._next_start = 0

    def schedule(self, pod, cache):
        """
        The L{NodeInfo} C{pod} goes to.

        @param cache: the L{orchd.scheduler.cache.SchedulerCache}.
        @raise NoNodesAvailable: when there are no nodes.
        @raise FitError: when none fits.
        """
        nodes = cache.node_list()
        count = len(nodes)
        if count == 0:
            raise NoNodesAvailable()
        names, narrowing = None, []
        for plugin in self.prefilters:
            try:
                allowed = plugin.prefilter(pod)
            except PreFilterRejected as rejected:
                raise FitError(pod, count, {}, prefilter=rejected) from None
            if allowed is not None:
                narrowing.append(plugin.name)
                names = set(allowed) if names is None else names & allowed
        absent = None
        if names is not None:
            candidates = [node for node in map(cache.node_info, sorted(names))
                          if node is not None and node.node is not None]
            absent = f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(narrowing))}]"
            wanted, start = len(candidates), None
        else:
            start = self._next_start % count
            candidates = nodes[start:] + nodes[:start] if start else nodes
            wanted = feasible_nodes_to_find(count)
        feasible, statuses = self._filter(pod, candidates, wanted)
        if start is not None:
            self._next_start = (start + len(feasible) + len(statuses)) % count
        if not feasible:
            raise FitError(pod, count, statuses, absent)
        if len(feasible) == 1:
            return feasible[0]
        return self._select(feasible, self._score(pod, feasible))

    def _filter(self, pod, candidates, wanted):
        """
        The feasible nodes among C{candidates}, at most C{wanted} of them, and
        the statuses of those found not to fit. Nodes go through the filters
        in slices of as many as are still wanted, each filter over the nodes
        the ones before it kept, so the first filter to reject a node decides
        its status, and the search stops where the last wanted node was found.
        """
        filters = [plugin for plugin in self.filters if not plugin.skip_filter(pod)]
        feasible, statuses = [], {}
        position, total = 0, len(candidates)
        while position < total and len(feasible) < wanted:
            batch = candidates[position:position + wanted - len(feasible)]
            position += len(batch)
            for plugin in filters:
                batch = plugin.filter_nodes(pod, batch, statuses)
                if not batch:
                    break
            feasible.extend(batch)
        return feasible, statuses

    def _score(self, pod, nodes):
        totals = [0] * len(nodes)
        for plugin in self.scores:
            if plugin.skip_score(pod):
                continue
            scores = plugin.score_nodes(pod, nodes)
            plugin.normalize(pod, scores)
            weight = plugin.weight
            for index, score in enumerate(scores):
                totals[index] += score * weight
        return totals

    def _select(self, nodes, totals):
        """One of the best-scored nodes, each as likely (one draw, not one per tie)."""
        best = max(totals)
        ties = [node for node, total in zip(nodes, totals) if total == best]
        return ties[0] if len(ties) == 1 else self.random.choice(ties)
