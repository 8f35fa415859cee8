# -*- test-case-name: tests.scheduler.test_nodeaffinity -*-
"""
NodeAffinity: C{nodeSelector}, required and preferred node affinity.

As upstream's plugin (C{pkg/scheduler/framework/plugins/nodeaffinity},
C{component-helpers/scheduling/corev1/nodeaffinity}):

  - a node fits when it has every C{nodeSelector} label and matches one
    of the required terms (terms are ORed, a term's requirements ANDed);
  - C{matchExpressions} take In, NotIn, Exists, DoesNotExist, Gt and Lt
    on labels; C{matchFields} only C{metadata.name} with In or NotIn and
    one value; a term with nothing in it, or any requirement upstream
    would not parse, matches no node;
  - when every required term names nodes by C{metadata.name In}, only
    those nodes are tried (the others are counted as C{node(s) didn't
    satisfy plugin(s) [NodeAffinity]}); terms whose names cannot meet
    reject the pod before any node is tried;
  - the score is the sum of the weights of the preferred terms a node
    matches, scaled to 0-100 against the best node.
"""

import re

from zope.interface import implementer

from orchd.scheduler.framework import (
    MAX_NODE_SCORE, UNRESOLVABLE, FilterPlugin, NodeStatus, PreFilterRejected, ScorePlugin,
    default_normalize,
)
from orchd.scheduler.interfaces import IFilterPlugin, IPreFilterPlugin, IScorePlugin

NAME = "NodeAffinity"
REASON = "node(s) didn't match Pod's node affinity/selector"
CONFLICT = "pod affinity terms conflict"
NAME_FIELD = "metadata.name"
_INT64 = 2 ** 63
_INTEGER = re.compile(r"[+-]?[0-9]+")


class Term:
    """
    One compiled node selector term.

    @ivar labels: C{(key, operator, values)} requirements on labels
        (values a frozenset, or an int for Gt and Lt).
    @ivar names: C{(operator, name)} requirements on the node's name.
    @ivar name_set: the names its C{metadata.name In} requirements allow
        (their intersection), or None when it has none.
    """

    __slots__ = ("labels", "names", "name_set")

    def __init__(self, labels, names, name_set):
        self.labels = labels
        self.names = names
        self.name_set = name_set

    def matches(self, node_labels, node_name):
        for key, operator, values in self.labels:
            value = node_labels.get(key)
            if operator == "In":
                if value is None or value not in values:
                    return False
            elif operator == "NotIn":
                if value is not None and value in values:
                    return False
            elif operator == "Exists":
                if value is None:
                    return False
            elif operator == "DoesNotExist":
                if value is not None:
                    return False
            else:
                number = _int64(value)
                if number is None or (number <= values if operator == "Gt" else number >= values):
                    return False
        for operator, name in self.names:
            if (node_name == name) != (operator == "In"):
                return False
        return True


def _int64(text):
    """Go's C{strconv.ParseInt(text, 10, 64)}, or None."""
    if not isinstance(text, str) or _INTEGER.fullmatch(text) is None:
        return None
    number = int(text)
    return number if -_INT64 <= number < _INT64 else None


def compile_term(term):
    """A L{Term}, or None for a term that matches nothing (empty, or not parseable)."""
    if not isinstance(term, dict):
        return None
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not isinstance(expressions, list) or not isinstance(fields, list):
        return None
    if not expressions and not fields:
        return None
    labels, names, name_set = [], [], None
    for requirement in expressions:
        compiled = _label_requirement(requirement)
        if compiled is None:
            return None
        labels.append(compiled)
    for requirement in fields:
        if not isinstance(requirement, dict) or requirement.get("key") != NAME_FIELD:
            return None
        operator, values = requirement.get("operator"), requirement.get("values")
        if operator not in ("In", "NotIn") or not isinstance(values, list) or len(values) != 1 \
                or not isinstance(values[0], str):
            return None
        names.append((operator, values[0]))
        if operator == "In":
            name_set = {values[0]} if name_set is None else name_set & {values[0]}
    return Term(tuple(labels), tuple(names), name_set)


def _label_requirement(requirement):
    if not isinstance(requirement, dict) or not isinstance(requirement.get("key"), str):
        return None
    key, operator = requirement["key"], requirement.get("operator")
    values = requirement.get("values") or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return None
    if operator in ("In", "NotIn"):
        return (key, operator, frozenset(values)) if values else None
    if operator in ("Exists", "DoesNotExist"):
        return None if values else (key, operator, None)
    if operator in ("Gt", "Lt"):
        number = _int64(values[0]) if len(values) == 1 else None
        return None if number is None else (key, operator, number)
    return None


def compile_affinity(affinity):
    """
    C{(required, preferred)} of a pod's C{affinity}: required is None (no
    required terms) or a tuple of L{Term}s and Nones (terms that match
    nothing); preferred a tuple of C{(weight, Term)}.
    """
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    if not isinstance(node_affinity, dict):
        return None, ()
    required = None
    selector = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(selector, dict):
        terms = selector.get("nodeSelectorTerms")
        required = tuple(compile_term(t) for t in terms) if isinstance(terms, list) else ()
    preferred = []
    wanted = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
    for entry in wanted if isinstance(wanted, list) else ():
        if not isinstance(entry, dict):
            continue
        weight = entry.get("weight")
        term = compile_term(entry.get("preference"))
        if isinstance(weight, int) and not isinstance(weight, bool) and weight and term:
            preferred.append((weight, term))
    return required, tuple(preferred)


@implementer(IPreFilterPlugin, IFilterPlugin, IScorePlugin)
class NodeAffinity(FilterPlugin, ScorePlugin):
    name = NAME
    weight = 2

    def prefilter(self, pod):
        """The node names every required term limits the pod to, or None for all."""
        if not pod.required:
            return None
        names = set()
        for term in pod.required:
            if term is None or term.name_set is None:
                return None          # a term that names no node leaves every node open
            names |= term.name_set
        if not names:
            raise PreFilterRejected(UNRESOLVABLE, CONFLICT)
        return names

    def skip_filter(self, pod):
        return not pod.node_selector and pod.required is None

    def skip_score(self, pod):
        return not pod.preferred

    def filter(self, pod, node):
        labels = node.labels
        for key, value in pod.node_selector.items():
            if labels.get(key) != value:
                return NodeStatus(UNRESOLVABLE, REASON)
        required = pod.required
        if required is not None and not any(
                term is not None and term.matches(labels, node.name) for term in required):
            return NodeStatus(UNRESOLVABLE, REASON)
        return None

    def score(self, pod, node):
        total = 0
        for weight, term in pod.preferred:
            if term.matches(node.labels, node.name):
                total += weight
        return total

    def normalize(self, pod, scores):
        if pod.preferred:
            default_normalize(scores, MAX_NODE_SCORE, reverse=False)
