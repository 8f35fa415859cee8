# -*- test-case-name: tests.auth.test_rbac_rules -*-
"""
PolicyRules: whether one allows a request, and whether rules cover others.

Rules are the API's dicts (C{verbs}, C{apiGroups}, C{resources},
C{resourceNames}, C{nonResourceURLs}). Authorizers match many requests
against few rules, so they L{compile} them once; escalation checks ask
whether a user's rules L{covers} the rules they try to grant.
"""

ALL = "*"


def rule(verbs, groups=(), resources=(), names=(), urls=()):
    """A PolicyRule dict, leaving out empty fields (for tables of rules)."""
    built = {"verbs": list(verbs)}
    if urls:
        built["nonResourceURLs"] = list(urls)
    else:
        built["apiGroups"] = list(groups)
        built["resources"] = list(resources)
    if names:
        built["resourceNames"] = list(names)
    return built


def _strings(rule, field):
    values = rule.get(field)
    return tuple(v for v in values if isinstance(v, str)) if isinstance(values, list) else ()


class CompiledRule:
    """
    One PolicyRule as sets, for matching requests quickly.

    C{None} in a set's place means "everything" (the rule listed C{*}).
    """

    __slots__ = ("verbs", "groups", "resources", "any_subresource", "names", "urls",
                 "url_prefixes", "source")

    def __init__(self, rule):
        self.source = rule
        self.verbs = _set_or_all(_strings(rule, "verbs"))
        self.groups = _set_or_all(_strings(rule, "apiGroups"))
        resources = _strings(rule, "resources")
        self.resources = _set_or_all(resources)
        #: Subresources granted on every resource by C{*/<subresource>}.
        self.any_subresource = frozenset(r[2:] for r in resources if r.startswith("*/"))
        self.names = frozenset(_strings(rule, "resourceNames"))
        urls = _strings(rule, "nonResourceURLs")
        self.urls = _set_or_all(tuple(u for u in urls if not u.endswith("*") or u == ALL))
        self.url_prefixes = tuple(u[:-1] for u in urls if u.endswith("*") and u != ALL)

    def allows(self, attributes):
        """Whether this rule allows the request described by C{attributes}."""
        if self.verbs is not None and attributes.verb not in self.verbs:
            return False
        if not attributes.is_resource_request:
            path = attributes.path
            if self.urls is None or path in self.urls:
                return True
            return any(path.startswith(prefix) for prefix in self.url_prefixes)
        if self.groups is not None and attributes.api_group not in self.groups:
            return False
        if self.resources is not None:
            subresource = attributes.subresource
            wanted = f"{attributes.resource}/{subresource}" if subresource else attributes.resource
            if wanted not in self.resources and subresource not in self.any_subresource:
                return False
        return not self.names or attributes.name in self.names


def _set_or_all(values):
    return None if ALL in values else frozenset(values)


def compile_rules(rules):
    """The L{CompiledRule}s of a list of rule dicts (anything else is skipped)."""
    return [CompiledRule(r) for r in rules if isinstance(r, dict)]


# -- covering (escalation checks) ------------------------------------------------


def breakdown(rule):
    """
    A rule as single-verb, single-resource rules (and one per name), as
    upstream's BreakdownRule does, so that coverage can be checked per piece.
    """
    verbs = _strings(rule, "verbs")
    pieces = []
    for group in _strings(rule, "apiGroups"):
        for resource in _strings(rule, "resources"):
            for verb in verbs:
                names = _strings(rule, "resourceNames")
                if names:
                    pieces.extend({"apiGroups": [group], "resources": [resource],
                                   "verbs": [verb], "resourceNames": [name]}
                                  for name in names)
                else:
                    pieces.append({"apiGroups": [group], "resources": [resource],
                                   "verbs": [verb]})
    for url in _strings(rule, "nonResourceURLs"):
        pieces.extend({"nonResourceURLs": [url], "verbs": [verb]} for verb in verbs)
    return pieces


def _has_all(owned, wanted):
    return ALL in owned or all(w in owned for w in wanted)


def _resources_covered(owned, wanted):
    if ALL in owned:
        return True
    for resource in wanted:
        if resource in owned:
            continue
        _, slash, subresource = resource.partition("/")
        if slash and f"*/{subresource}" in owned:
            continue
        return False
    return True


def _urls_covered(owned, wanted):
    return all(any(o == w or (o.endswith("*") and w.startswith(o[:-1])) for o in owned)
               for w in wanted)


def rule_covers(owner, piece):
    """Whether rule C{owner} grants everything the rule C{piece} grants."""
    names = _strings(piece, "resourceNames")
    owner_names = _strings(owner, "resourceNames")
    return (_has_all(_strings(owner, "verbs"), _strings(piece, "verbs"))
            and _has_all(_strings(owner, "apiGroups"), _strings(piece, "apiGroups"))
            and _resources_covered(_strings(owner, "resources"), _strings(piece, "resources"))
            and _urls_covered(_strings(owner, "nonResourceURLs"),
                              _strings(piece, "nonResourceURLs"))
            and (not owner_names or (bool(names) and all(n in owner_names for n in names))))


def uncovered(owner_rules, servant_rules):
    """The pieces of C{servant_rules} that no rule of C{owner_rules} covers."""
    missing = []
    for servant in servant_rules:
        if not isinstance(servant, dict):
            continue
        for piece in breakdown(servant):
            if not any(rule_covers(owner, piece) for owner in owner_rules):
                missing.append(piece)
    return missing


def describe(rule):
    """Upstream's compact form of a rule: C{{APIGroups:[""], Resources:["pods"], Verbs:["get"]}}."""
    parts = []
    for label, field in (("APIGroups", "apiGroups"), ("Resources", "resources"),
                         ("NonResourceURLs", "nonResourceURLs"),
                         ("ResourceNames", "resourceNames"), ("Verbs", "verbs")):
        values = _strings(rule, field)
        if values:
            parts.append(f"{label}:[" + " ".join(_quote(v) for v in values) + "]")
    return "{" + ", ".join(parts) + "}"


def _quote(text):
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
