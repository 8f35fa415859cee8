# -*- test-case-name: tests.server.audit.test_policy -*-
"""
The audit policy: ordered rules, the first that matches a request decides
its level and the stages left out, as upstream's C{policy/checker.go}.

Policy files are written in C{audit.k8s.io/v1}, as every published one is,
or in C{audit.orch.io/v1}; both are read the same. A request no rule
matches is not audited (level C{None}).
"""

from orchd.api import yamldecode
from orchd.api.groups import canonical_group

NONE, METADATA, REQUEST, REQUEST_RESPONSE = "None", "Metadata", "Request", "RequestResponse"
#: Levels in order, so that C{LEVEL_RANK[a] >= LEVEL_RANK[b]} reads "a logs at least b".
LEVEL_RANK = {NONE: 0, METADATA: 1, REQUEST: 2, REQUEST_RESPONSE: 3}
RECEIVED, STARTED, COMPLETE, PANIC = ("RequestReceived", "ResponseStarted", "ResponseComplete",
                                      "Panic")
STAGES = (RECEIVED, STARTED, COMPLETE, PANIC)
#: [COMPAT] published policies say audit.k8s.io/v1; the renamed group is accepted too.
API_VERSIONS = ("audit.orch.io/v1", "audit.k8s.io/v1")
_POLICY_KEYS = frozenset(("apiVersion", "kind", "metadata", "rules", "omitStages",
                          "omitManagedFields"))
_RULE_KEYS = frozenset(("level", "users", "userGroups", "verbs", "resources", "namespaces",
                        "nonResourceURLs", "omitStages", "omitManagedFields"))
_RESOURCE_KEYS = frozenset(("group", "resources", "resourceNames"))


class AuditPolicyError(ValueError):
    """The policy file is unusable; the message names the field, fit to show the user."""


class Decision:
    """
    What the policy says of one request: its level, stages left out, managed fields.

    @ivar bodies: whether the level logs bodies (C{Request} and above).
    """

    __slots__ = ("level", "omit_stages", "omit_managed_fields", "bodies")

    def __init__(self, level, omit_stages=frozenset(), omit_managed_fields=False):
        self.level = level
        self.omit_stages = omit_stages
        self.omit_managed_fields = omit_managed_fields
        self.bodies = LEVEL_RANK[level] >= LEVEL_RANK[REQUEST]

    def __repr__(self):
        return f"<Decision {self.level} omit={sorted(self.omit_stages)}>"


#: Nothing is audited: the answer when no rule matches.
NOT_AUDITED = Decision(NONE)


class Rule:
    """One policy rule; an empty criterion matches everything."""

    __slots__ = ("decision", "users", "groups", "verbs", "resources", "namespaces",
                 "urls", "_resource_rule")

    def __init__(self, decision, users=(), groups=(), verbs=(), resources=(), namespaces=None,
                 urls=()):
        self.decision = decision
        self.users = frozenset(users)
        self.groups = frozenset(groups)
        self.verbs = frozenset(verbs)
        #: ((group, frozenset of resource specs, frozenset of names), ...)
        self.resources = tuple(resources)
        self.namespaces = None if namespaces is None else frozenset(namespaces)
        self.urls = tuple(urls)
        self._resource_rule = bool(self.resources) or self.namespaces is not None

    @property
    def matches_everything(self):
        """Whether the rule has no criterion at all."""
        return not (self.users or self.groups or self.verbs or self._resource_rule or self.urls)

    def matches(self, user, info):
        """
        Whether the rule covers a request.

        @param user: the authenticated L{orchd.auth.user.UserInfo} (not the
            impersonated one, as upstream), or None before authentication.
        @param info: the request's L{orchd.server.requestinfo.RequestInfo}.
        """
        if self.users and (user is None or user.name not in self.users):
            return False
        if self.groups and (user is None or self.groups.isdisjoint(user.groups)):
            return False
        if self.verbs and info.verb not in self.verbs:
            return False
        if self._resource_rule:
            return info.is_resource_request and self._matches_resource(info)
        if self.urls:
            return not info.is_resource_request and any(_path_matches(info.path, spec)
                                                         for spec in self.urls)
        return True

    def _matches_resource(self, info):
        if self.namespaces is not None and info.namespace not in self.namespaces:
            return False
        if not self.resources:
            return True
        resource, subresource = info.resource, info.subresource
        combined = f"{resource}/{subresource}" if subresource else resource
        for group, specs, names in self.resources:
            if group != info.api_group:
                continue
            if not specs:
                return True
            if names and info.name not in names:
                continue
            for spec in specs:
                if spec == combined or spec == "*":
                    return True
                if subresource and spec.startswith("*/") and spec[2:] == subresource:
                    return True
                if spec.endswith("/*") and spec[:-2] == resource:
                    return True
        return False


def _path_matches(path, spec):
    if spec == "*" or spec == path:
        return True
    return spec.endswith("*") and path.startswith(spec.rstrip("*"))


class Policy:
    """The ordered rules of a policy file."""

    def __init__(self, rules):
        self.rules = tuple(rules)
        #: The decision of a first rule that matches every request (a
        #: common policy's last and only rule), else None: the server reads
        #: it before calling L{decide}, so that no rule is walked.
        self.always = None
        if self.rules and self.rules[0].matches_everything:
            self.always = self.rules[0].decision

    def decide(self, user, info):
        """The L{Decision} of the first rule matching the request, else L{NOT_AUDITED}."""
        if self.always is not None:
            return self.always
        for rule in self.rules:
            if rule.matches(user, info):
                return rule.decision
        return NOT_AUDITED

    @classmethod
    def load(cls, path):
        """
        Read a policy file (YAML or JSON, with the project's bounded decoder).

        @raise AuditPolicyError: for a file that cannot be read or is not a valid policy.
        """
        try:
            document = yamldecode.load_file(path)
        except OSError as error:
            raise AuditPolicyError(f"cannot read {path}: {error.strerror}") from None
        except yamldecode.YAMLDecodeError as error:
            raise AuditPolicyError(f"invalid YAML in {path}: {error}") from None
        return cls.from_document(document)

    @classmethod
    def from_document(cls, document):
        """The policy of a decoded document; L{AuditPolicyError} names the first bad field."""
        if not isinstance(document, dict):
            raise AuditPolicyError("the policy must be a mapping")
        _known_keys(document, _POLICY_KEYS, "")
        if document.get("apiVersion") not in API_VERSIONS:
            raise AuditPolicyError(f"apiVersion: must be one of {', '.join(API_VERSIONS)}, "
                                   f"not {document.get('apiVersion')!r}")
        if document.get("kind") != "Policy":
            raise AuditPolicyError(f"kind: must be Policy, not {document.get('kind')!r}")
        rules = document.get("rules")
        if not isinstance(rules, list) or not rules:
            raise AuditPolicyError("rules: Required value: at least one rule")
        omit = _stages(document.get("omitStages"), "omitStages")
        omit_managed = _bool(document.get("omitManagedFields"), "omitManagedFields", False)
        return cls(_rule(rule, f"rules[{i}]", omit, omit_managed)
                   for i, rule in enumerate(rules))


def _known_keys(mapping, known, where):
    for key in mapping:
        if key not in known:
            raise AuditPolicyError(f"{where}{'.' if where else ''}{key}: unknown field")


def _strings(value, where):
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise AuditPolicyError(f"{where}: must be a list of strings")
    return value


def _bool(value, where, default):
    if value is None:
        return default
    if not isinstance(value, bool):
        raise AuditPolicyError(f"{where}: must be true or false")
    return value


def _stages(value, where):
    stages = _strings(value, where)
    for i, stage in enumerate(stages):
        if stage not in STAGES:
            raise AuditPolicyError(f"{where}[{i}]: Unsupported value: {stage!r}: supported "
                                   f"values: {', '.join(STAGES)}")
    return frozenset(stages)


def _rule(rule, where, top_omit, top_omit_managed):
    if not isinstance(rule, dict):
        raise AuditPolicyError(f"{where}: must be a mapping")
    _known_keys(rule, _RULE_KEYS, where)
    level = rule.get("level")
    if level not in LEVEL_RANK:
        raise AuditPolicyError(f"{where}.level: Unsupported value: {level!r}: supported "
                               f"values: {', '.join(LEVEL_RANK)}")
    omit = _stages(rule.get("omitStages"), f"{where}.omitStages") | top_omit
    decision = Decision(level, omit, _bool(rule.get("omitManagedFields"),
                                           f"{where}.omitManagedFields", top_omit_managed))
    urls = _strings(rule.get("nonResourceURLs"), f"{where}.nonResourceURLs")
    namespaces = rule.get("namespaces")
    resources = rule.get("resources")
    if urls and (resources or namespaces):
        raise AuditPolicyError(f"{where}: rules cannot apply to both regular resources and "
                               f"non-resource URLs")
    for i, url in enumerate(urls):
        if url != "*" and (not url.startswith("/") or "*" in url.rstrip("*")
                           or url.count("*") > 1):
            raise AuditPolicyError(f"{where}.nonResourceURLs[{i}]: {url!r}: must start with "
                                   f"'/' and may only end with one '*'")
    return Rule(
        decision,
        users=_strings(rule.get("users"), f"{where}.users"),
        groups=_strings(rule.get("userGroups"), f"{where}.userGroups"),
        verbs=_strings(rule.get("verbs"), f"{where}.verbs"),
        resources=[_resource(entry, f"{where}.resources[{i}]")
                   for i, entry in enumerate(_list(resources, f"{where}.resources"))],
        namespaces=None if not namespaces else _strings(namespaces, f"{where}.namespaces"),
        urls=urls)


def _list(value, where):
    if value is None:
        return []
    if not isinstance(value, list):
        raise AuditPolicyError(f"{where}: must be a list")
    return value


def _resource(entry, where):
    if not isinstance(entry, dict):
        raise AuditPolicyError(f"{where}: must be a mapping")
    _known_keys(entry, _RESOURCE_KEYS, where)
    group = entry.get("group", "")
    if group is None:
        group = ""
    if not isinstance(group, str):
        raise AuditPolicyError(f"{where}.group: must be a string")
    specs = _strings(entry.get("resources"), f"{where}.resources")
    names = _strings(entry.get("resourceNames"), f"{where}.resourceNames")
    for i, spec in enumerate(specs):
        head, _, tail = spec.partition("/")
        if not spec or "/" in tail or (head == "*" and tail == "*") or (
                "*" in head and head != "*") or ("*" in tail and tail != "*"):
            raise AuditPolicyError(f"{where}.resources[{i}]: {spec!r}: must be a resource, "
                                   f"'*', '<resource>/<subresource>', '<resource>/*' or "
                                   f"'*/<subresource>'")
    # [COMPAT] a policy names groups as upstream does; requests carry the served name.
    return canonical_group(group), frozenset(specs), frozenset(names)
