# -*- test-case-name: tests.auth.test_rbac -*-
"""
The RBAC policy in memory: roles by name, bindings by subject.

Authorization reads it on every request, so it is indexed for that
question: which bindings name this user or one of its groups (cluster-wide,
or in the request's namespace), and which compiled rules their roles hold.
Informers over the four kinds keep it current; nothing reads the store
on the request path.
"""

from orchd.api.kinds import RBAC, key_prefix_of
from orchd.auth.rbac.rules import compile_rules
from orchd.storage.informer import Informer, start_all, stop_all
from orchd.storage.interfaces import DELETED

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


def service_account_user(namespace, name):
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


class Role:
    """A role's rules, as stored and compiled."""

    __slots__ = ("rules", "compiled")

    def __init__(self, rules):
        self.rules = [r for r in rules if isinstance(r, dict)] if isinstance(rules, list) else []
        self.compiled = compile_rules(self.rules)


class Grant:
    """One subject of one binding: the role it gives, and how to describe it."""

    __slots__ = ("binding", "namespace", "role_kind", "role_name", "subject", "reason")

    def __init__(self, binding, namespace, role_kind, role_name, subject):
        self.binding = binding
        self.namespace = namespace
        self.role_kind = role_kind
        self.role_name = role_name
        self.subject = subject
        #: The reason of the requests it allows, worded once.
        self.reason = "RBAC: allowed by " + self.describe()

    def describe(self):
        """Upstream's wording of the grant, for the reason of an allow."""
        kind, name, namespace = self.subject
        who = f'{kind} "{namespace}/{name}"' if kind == "ServiceAccount" else f'{kind} "{name}"'
        if self.namespace:
            # Upstream prints a RoleBinding as name/namespace.
            return (f'RoleBinding "{self.binding}/{self.namespace}" of {self.role_kind} '
                    f'"{self.role_name}" to {who}')
        return f'ClusterRoleBinding "{self.binding}" of ClusterRole "{self.role_name}" to {who}'


def _subject_key(subject, binding_namespace):
    """
    The index key a subject matches users by, or None with an error text.

    Service accounts are matched by their user name, as upstream does.
    """
    if not isinstance(subject, dict):
        return None, "subject is not an object"
    kind, name = subject.get("kind"), subject.get("name") or ""
    namespace = subject.get("namespace") or ""
    if kind == "ServiceAccount":
        namespace = namespace or binding_namespace
        if not namespace:
            return None, f'service account "{name}" has no namespace'
        return ("user", service_account_user(namespace, name)), None
    if kind not in ("User", "Group"):
        return None, f'unknown subject kind "{kind}"'
    if namespace:
        return None, f'{kind} subject "{name}" must not have a namespace'
    return ("user" if kind == "User" else "group", name), None


class PolicyIndex:
    """
    @param store: where to list and watch the policy from (an IStore, or
        L{orchd.storage.cachedreads.CachedReads}).
    """

    def __init__(self, store):
        self.roles = {}                 # (namespace, name) -> Role
        self.cluster_roles = {}         # name -> Role
        self.cluster_grants = {}        # subject key -> {binding name: Grant}
        self.namespace_grants = {}      # (namespace, subject key) -> {binding name: Grant}
        self.binding_errors = {}        # (namespace, binding name) -> [error text]
        self._bound = {}                # (namespace, binding name) -> [index keys]
        #: Counts changes, so that answers derived from the index know when
        #: they are stale.
        self.generation = 0
        changed = {"roles": self._role_changed, "clusterroles": self._role_changed,
                   "rolebindings": self._binding_changed,
                   "clusterrolebindings": self._binding_changed}
        self._informers = [Informer(store, key_prefix_of(RBAC, resource), handler, keep=_identity)
                           for resource, handler in changed.items()]
        self.synced = False

    def start(self):
        """Fires once every kind has been listed."""
        d = start_all(self._informers)
        d.addCallback(lambda _: setattr(self, "synced", True))
        return d

    def stop(self):
        stop_all(self._informers)

    # -- following the store ------------------------------------------------------

    def _role_changed(self, type, obj, old):
        self.generation += 1
        namespace, name = old if type == DELETED and old else _identity(obj)
        table, key = (self.roles, (namespace, name)) if namespace else (self.cluster_roles, name)
        if type == DELETED:
            table.pop(key, None)
        else:
            table[key] = Role(obj.get("rules"))

    def _binding_changed(self, type, obj, old):
        self.generation += 1
        namespace, name = old if type == DELETED and old else _identity(obj)
        self._unbind(namespace, name)
        if type != DELETED:
            self._bind(namespace, name, obj)

    def _bind(self, namespace, name, obj):
        ref = obj.get("roleRef") if isinstance(obj.get("roleRef"), dict) else {}
        role_kind, role_name = ref.get("kind") or "", ref.get("name") or ""
        subjects = obj.get("subjects") if isinstance(obj.get("subjects"), list) else []
        keys, errors = [], []
        for subject in subjects:
            key, error = _subject_key(subject, namespace)
            if error:
                errors.append(error)
                continue
            grant = Grant(name, namespace, role_kind, role_name,
                          (subject["kind"], subject.get("name") or "",
                           subject.get("namespace") or namespace))
            index_key = (namespace, key) if namespace else key
            table = self.namespace_grants if namespace else self.cluster_grants
            table.setdefault(index_key, {})[name] = grant
            keys.append(index_key)
        self._bound[(namespace, name)] = keys
        if errors:
            self.binding_errors[(namespace, name)] = errors

    def _unbind(self, namespace, name):
        table = self.namespace_grants if namespace else self.cluster_grants
        for index_key in self._bound.pop((namespace, name), ()):
            grants = table.get(index_key)
            if grants is not None:
                grants.pop(name, None)
                if not grants:
                    del table[index_key]
        self.binding_errors.pop((namespace, name), None)

    # -- reading --------------------------------------------------------------------

    def grants_for(self, user, namespace):
        """Every grant that applies to C{user}: cluster-wide, then in C{namespace}."""
        keys = [("user", user.name)]
        keys.extend(("group", group) for group in user.groups)
        for key in keys:
            found = self.cluster_grants.get(key)
            if found:
                yield from found.values()
        if namespace:
            for key in keys:
                found = self.namespace_grants.get((namespace, key))
                if found:
                    yield from found.values()

    def role_of(self, grant):
        """The L{Role} a grant names, or None when it does not exist (an error)."""
        if grant.role_kind == "ClusterRole":
            return self.cluster_roles.get(grant.role_name)
        if grant.role_kind == "Role" and grant.namespace:
            return self.roles.get((grant.namespace, grant.role_name))
        return None

    def rules_for(self, user, namespace):
        """C{(rules, errors)}: the rule dicts C{user} holds in C{namespace} (or cluster-wide)."""
        rules, errors = [], []
        for grant in self.grants_for(user, namespace):
            role = self.role_of(grant)
            if role is None:
                errors.append(missing_role(grant))
            else:
                rules.extend(role.rules)
        return rules, errors


def missing_role(grant):
    """Upstream's NotFound text for a binding whose role is missing."""
    kind = "clusterrole" if grant.role_kind == "ClusterRole" else "role"
    return f'{kind}.{RBAC} "{grant.role_name}" not found'


def _identity(obj):
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""
