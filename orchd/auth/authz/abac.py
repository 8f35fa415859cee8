# -*- test-case-name: tests.auth.test_abac -*-
"""
ABAC mode: a fixed policy file, one JSON policy object per line.

One object per line lets files be concatenated, commented and reported by
line number. A line is either versioned
(C{{"apiVersion": "abac.authorization.orch.io/v1beta1", "kind": "Policy",
"spec": {...}}}) or the older flat form without C{apiVersion}, which is
converted on load with its looser defaults (empty namespace or resource
means all, and every API group).
"""


import attr
from twisted.logger import Logger
from zope.interface import implementer

from orchd.api.bounded import parse_json
from orchd.auth.interfaces import Decision, IAuthorizer
from orchd.auth.user import AUTHENTICATED

GROUP = "abac.authorization.orch.io"
V1BETA1 = f"{GROUP}/v1beta1"
V0 = f"{GROUP}/v0"

NO_MATCH = "No policy matched."
_READ_ONLY_VERBS = ("get", "list", "watch")
_STRING_FIELDS = {"user": "user", "group": "group", "apiGroup": "api_group",
                  "resource": "resource", "namespace": "namespace",
                  "nonResourcePath": "non_resource_path"}
_V0_FIELDS = ("user", "group", "resource", "namespace")


@attr.s(frozen=True, slots=True)
class Policy:
    """
    One rule in its converted form; C{*} in a field matches everything.

    A rule names a subject (user and/or group) and either resources
    (namespace, API group and resource must all match) or a non-resource
    path; C{readonly} limits it to get, list and watch.
    """

    user = attr.ib(default="")
    group = attr.ib(default="")
    readonly = attr.ib(default=False)
    api_group = attr.ib(default="")
    resource = attr.ib(default="")
    namespace = attr.ib(default="")
    non_resource_path = attr.ib(default="")

    def subject_matches(self, user):
        """Each of user and group that is set must match; at least one must be set."""
        matched = False
        if self.user:
            if self.user != "*" and self.user != user.name:
                return False
            matched = True
        if self.group:
            if self.group != "*" and self.group not in user.groups:
                return False
            matched = True
        return matched

    def verb_matches(self, verb):
        return not self.readonly or verb in _READ_ONLY_VERBS

    def resource_matches(self, attributes):
        """Subresources are not looked at: a rule for C{pods} covers C{pods/log}."""
        return (attributes.is_resource_request
                and self.namespace in ("*", attributes.namespace)
                and self.resource in ("*", attributes.resource)
                and self.api_group in ("*", attributes.api_group))

    def non_resource_matches(self, attributes):
        if attributes.is_resource_request:
            return False
        pattern, path = self.non_resource_path, attributes.path
        if pattern == "*" or pattern == path:
            return True
        return pattern.endswith("*") and path.startswith(pattern.rstrip("*"))

    def matches(self, attributes):
        return (self.subject_matches(attributes.user)
                and self.verb_matches(attributes.verb)
                and (self.resource_matches(attributes) or self.non_resource_matches(attributes)))

    def verbs(self):
        return list(_READ_ONLY_VERBS) if self.readonly else ["*"]


def _fields(data, names, where):
    """The string fields C{names} of C{data} (missing or null: ""), and C{readonly}."""
    values = {}
    for name in names:
        value = data.get(name)
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise ValueError(f"{where}{name} must be a string")
        values[name] = value
    readonly = data.get("readonly")
    if readonly is None:
        readonly = False
    if not isinstance(readonly, bool):
        raise ValueError(f"{where}readonly must be true or false")
    return values, readonly


def _from_v1beta1(spec):
    """A versioned rule: C{*} as user or group means every authenticated user."""
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise ValueError("spec must be an object")
    values, readonly = _fields(spec, _STRING_FIELDS, "spec.")
    fields = {_STRING_FIELDS[name]: value for name, value in values.items()}
    if values["user"] == "*" or values["group"] == "*":
        fields.update(user="", group=AUTHENTICATED)
    return Policy(readonly=readonly, **fields)


def _from_v0(data):
    """
    A flat rule: no subject, or C{*}, means every authenticated user; no
    namespace or resource means all of them; every API group matches; and
    neither namespace nor resource also allows every non-resource path.
    """
    values, readonly = _fields(data, _V0_FIELDS, "")
    user, group = values["user"], values["group"]
    namespace, resource = values["namespace"], values["resource"]
    if (not user and not group) or user == "*" or group == "*":
        user, group = "", AUTHENTICATED
    return Policy(user=user, group=group, readonly=readonly, api_group="*",
                  namespace=namespace or "*", resource=resource or "*",
                  non_resource_path="*" if not namespace and not resource else "")


def parse_policy(text):
    """
    One policy line as a L{Policy}.

    @return: C{(policy, versioned)}.
    @raise ValueError: for a line that is not a policy object.
    """
    try:
        data = parse_json(text)
    except ValueError as error:
        raise ValueError(f"not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if not api_version:
        if "spec" in data:
            # Reading it as a flat rule would grant everyone everything.
            raise ValueError(f"a policy with a spec needs apiVersion {V1BETA1}")
        return _from_v0(data), False
    if kind and kind != "Policy":
        raise ValueError(f"unrecognized kind {kind!r} (expected Policy)")
    if api_version == V1BETA1:
        return _from_v1beta1(data.get("spec")), True
    if api_version == V0:
        return _from_v0(data), True
    raise ValueError(f"unrecognized apiVersion {api_version!r} (expected {V1BETA1})")


def parse_policies(lines, source="<policy>"):
    """
    The policies of a file's lines, skipping blank lines and C{#} comments.

    @return: C{(policies, unversioned)}: the list and how many lines used
        the flat form.
    @raise ValueError: naming C{source} and the line number of a bad line.
    """
    policies, unversioned = [], 0
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            policy, versioned = parse_policy(text)
        except ValueError as error:
            raise ValueError(f"error reading policy file {source}, line {number}: {error}") \
                from None
        policies.append(policy)
        if not versioned:
            unversioned += 1
    return policies, unversioned


@implementer(IAuthorizer)
class ABACAuthorizer:
    """Allows a request when some policy matches it; otherwise has no opinion."""

    log = Logger()

    def __init__(self, policies):
        self._policies = tuple(policies)

    @classmethod
    def from_file(cls, path):
        """
        Load the policy file at C{path} (read once, at start).

        @raise ValueError: one line naming the file (and the line) when it
            cannot be read or a line is not a policy.
        """
        try:
            with open(path, encoding="utf-8") as stream:
                lines = list(stream)
        except OSError as error:
            raise ValueError(f"error reading policy file {path}: {error.strerror}") from None
        except UnicodeDecodeError:
            raise ValueError(f"error reading policy file {path}: not UTF-8 text") from None
        policies, unversioned = parse_policies(lines, path)
        if unversioned:
            cls.log.warn("Policy file {path} contains {count} unversioned rules; "
                         "write them as {api_version} Policy objects",
                         path=path, count=unversioned, api_version=V1BETA1)
        return cls(policies)

    def authorize(self, attributes):
        for policy in self._policies:
            if policy.matches(attributes):
                return Decision.ALLOW, ""
        return Decision.NO_OPINION, NO_MATCH

    def rules_for(self, user, namespace):
        """The rules of the policies for C{user} that apply in C{namespace}."""
        resource_rules, non_resource_rules = [], []
        for policy in self._policies:
            if not policy.subject_matches(user) or policy.namespace not in ("*", namespace):
                continue
            if policy.resource:
                resource_rules.append({"verbs": policy.verbs(), "apiGroups": [policy.api_group],
                                       "resources": [policy.resource]})
            if policy.non_resource_path:
                non_resource_rules.append({"verbs": policy.verbs(),
                                           "nonResourceURLs": [policy.non_resource_path]})
        return resource_rules, non_resource_rules, False
