# -*- test-case-name: tests.admission.webhook.test_matching -*-
"""
Which webhooks a write goes to (upstream's C{predicates/rules},
C{predicates/namespace}, C{predicates/object} and the equivalent-resource
rule of C{matchPolicy}).

A configuration is compiled into L{Webhook}s once, when the plugin hears
of it, so a write pays for plain comparisons only: the rules first (no
lookups), then the object's labels, then the namespace's labels (from a
cache), then the C{matchConditions}.
"""

import base64
import binascii

from orchd.admission.webhook.conditions import ConditionError, compile_condition
from orchd.api.groups import canonical_group
from orchd.api.selectors import selector_from_label_selector_object

ALL = "*"


class Rule:
    """One compiled C{rules[]} entry."""

    __slots__ = ("operations", "groups", "canonical_groups", "versions", "resources", "scope")

    def __init__(self, rule):
        self.operations = frozenset(rule.get("operations") or ())
        self.groups = frozenset(rule.get("apiGroups") or ())
        self.canonical_groups = frozenset(canonical_group(g) for g in self.groups)
        self.versions = frozenset(rule.get("apiVersions") or ())
        self.resources = tuple(rule.get("resources") or ())
        self.scope = rule.get("scope") or ALL

    def matches(self, operation, group, version, resource, subresource, namespaced,
                equivalent=False):
        """
        True when the rule covers the request.

        @param equivalent: compare groups in their served spelling, so
            C{apps.k8s.io} covers C{apps.orch.io} (matchPolicy Equivalent).
        """
        if ALL not in self.operations and operation not in self.operations:
            return False
        groups = self.canonical_groups if equivalent else self.groups
        if ALL not in groups and group not in groups:
            return False
        if ALL not in self.versions and version not in self.versions:
            return False
        if not resource_matches(self.resources, resource, subresource):
            return False
        if self.scope == "Cluster":
            return not namespaced
        if self.scope == "Namespaced":
            return namespaced
        return True


def resource_matches(patterns, resource, subresource):
    """Upstream's resource/subresource wildcards: C{*}, C{*/*}, C{x/*}, C{*/y}."""
    for pattern in patterns:
        if pattern == "*/*":
            return True
        if "/" in pattern:
            res, _, sub = pattern.partition("/")
            if subresource and res in (ALL, resource) and sub in (ALL, subresource):
                return True
        elif not subresource and (pattern == ALL or pattern == resource):
            return True
    return False


class Webhook:
    """
    One webhook of a configuration, compiled.

    @ivar key: C{(configuration name, index)}: the calling order.
    @ivar name: the webhook's name.
    @ivar uid: a name unique among all webhooks (upstream's
        C{<configuration>/<webhook>/<index>}), for reinvocation bookkeeping.
    @ivar conditions: C{[(name, Condition)]}; an expression that cannot be
        compiled leaves C{broken} set (validation refuses such
        configurations, but one stored before is called as failing).
    """

    def __init__(self, configuration, index, spec, mutating):
        self.configuration = configuration
        self.key = (configuration, index)
        self.name = spec.get("name", "")
        self.uid = f"{configuration}/{self.name}/{index}"
        self.mutating = mutating
        self.rules = [Rule(rule) for rule in spec.get("rules") or () if isinstance(rule, dict)]
        self.exact = spec.get("matchPolicy") == "Exact"
        self.failure_policy_ignore = spec.get("failurePolicy") == "Ignore"
        self.side_effects = spec.get("sideEffects") or "Unknown"
        self.timeout = float(spec.get("timeoutSeconds") or 10)
        self.review_versions = tuple(spec.get("admissionReviewVersions") or ())
        self.reinvoke = spec.get("reinvocationPolicy") == "IfNeeded"
        self.broken = None
        self.namespace_selector = self._selector(spec.get("namespaceSelector"))
        self.object_selector = self._selector(spec.get("objectSelector"))
        self.conditions = []
        for condition in spec.get("matchConditions") or ():
            try:
                self.conditions.append((condition.get("name", ""),
                                        compile_condition(condition.get("expression", ""))))
            except (ConditionError, AttributeError) as error:
                self.broken = f"matchConditions: {error}"
        config = spec.get("clientConfig") or {}
        self.url = config.get("url")
        self.service = config.get("service")
        self.ca_pem = _ca_pem(config.get("caBundle"))

    def _selector(self, selector):
        """The L{LabelSelector}; None for one that is empty (everything)."""
        if not selector:
            return None
        try:
            parsed = selector_from_label_selector_object(selector)
        except Exception as error:
            self.broken = f"invalid selector: {error}"
            return None
        return None if parsed.empty else parsed

    def matching_rule(self, attributes, equivalents):
        """
        The C{(group, version)} the rules match the write under, or None.

        The request's own version first; with matchPolicy Equivalent then
        the other served versions of the resource and the upstream
        spelling of its group (upstream sends the matched kind).

        @param equivalents: C{(group, resource) -> [version]}: the served versions.
        """
        info = attributes.info
        operation, subresource = attributes.operation, attributes.subresource
        for rule in self.rules:
            if rule.matches(operation, info.group, info.version, info.resource, subresource,
                            info.namespaced):
                return info.group, info.version
        if self.exact:
            return None
        versions = None
        for rule in self.rules:
            if rule.matches(operation, info.group, info.version, info.resource, subresource,
                            info.namespaced, equivalent=True):
                return info.group, info.version
            if versions is None:
                versions = [v for v in equivalents(info.group, info.resource)
                            if v != info.version]
            for version in versions:
                if rule.matches(operation, info.group, version, info.resource, subresource,
                                info.namespaced, equivalent=True):
                    return info.group, version
        return None

    def object_matches(self, attributes):
        """The object selector against the new or the old object's labels."""
        if self.object_selector is None:
            return True
        for obj in (attributes.obj, attributes.old):
            if isinstance(obj, dict) and self.object_selector.matches(_labels(obj)):
                return True
        return False


def _labels(obj):
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, dict) else {}


def namespace_labels_source(attributes):
    """
    What the namespace selector reads: C{(labels, None)} for a Namespace
    written (its own new labels), C{(None, namespace name)} to look up, or
    C{(None, None)} for a cluster-scoped object (never exempted).
    """
    info = attributes.info
    if info.resource == "namespaces" and info.group == "":
        if not attributes.subresource and isinstance(attributes.obj, dict):
            return _labels(attributes.obj), None
        if isinstance(attributes.old, dict):
            return _labels(attributes.old), None
        return None, attributes.name
    if not info.namespaced:
        return None, None
    return None, attributes.namespace


def _ca_pem(bundle):
    if not isinstance(bundle, str) or not bundle:
        return None
    try:
        return base64.b64decode(bundle, validate=True) or None
    except (binascii.Error, ValueError):
        return None


def compile_configuration(obj, mutating):
    """The L{Webhook}s of a configuration object, in its order."""
    name = (obj.get("metadata") or {}).get("name", "")
    hooks = obj.get("webhooks") or ()
    return [Webhook(name, index, spec, mutating)
            for index, spec in enumerate(hooks) if isinstance(spec, dict)]
