# -*- test-case-name: tests.admission.test_rbacescalation -*-
"""
Escalation prevention: nobody grants, through RBAC, more than they hold.

Writing a Role or ClusterRole needs every permission it grants (in its
namespace, or cluster-wide), or the C{escalate} verb on it; writing a
binding needs the permissions of the role it names, or the C{bind} verb on
that role. Members of C{system:masters} skip both checks.
"""

from zope.interface import implementer

from orchd.admission.interfaces import CREATE, UPDATE, IAdmissionPlugin
from orchd.api.errors import StatusError
from orchd.api.kinds import RBAC
from orchd.auth.attributes import Attributes
from orchd.auth.authz.ask import ask
from orchd.auth.interfaces import Decision
from orchd.auth.rbac.rules import describe, rule, uncovered
from orchd.auth.user import MASTERS

_ROLES = ("roles", "clusterroles")
_BINDINGS = ("rolebindings", "clusterrolebindings")
#: What a ClusterRole with an aggregationRule may end up holding.
_FULL_AUTHORITY = (rule(["*"], ["*"], ["*"]), rule(["*"], urls=["*"]))
#: Metadata the garbage collector changes; such updates are never escalations.
_GC_FIELDS = ("ownerReferences", "finalizers", "resourceVersion", "managedFields",
              "generation")


@implementer(IAdmissionPlugin)
class RBACEscalation:
    """
    @param index: the L{orchd.auth.rbac.index.PolicyIndex} (the RBAC rules a user holds).
    @param authorizer: the server's authorizer, asked about C{escalate} and C{bind}.
    """

    resources = frozenset((RBAC, resource) for resource in _ROLES + _BINDINGS)
    mutates = False

    def __init__(self, index, authorizer):
        self._index = index
        self._authorizer = authorizer

    def admit(self, attributes):
        pass

    def validate(self, attributes):
        info = attributes.info
        if info.group != RBAC or attributes.subresource or \
                attributes.operation not in (CREATE, UPDATE):
            return None
        if info.resource not in _ROLES + _BINDINGS:
            return None
        if MASTERS in attributes.user.groups:
            return None
        if attributes.operation == UPDATE and _only_gc_fields(attributes.obj, attributes.old):
            return None
        if info.resource in _ROLES:
            return self._check_role(attributes)
        return self._check_binding(attributes)

    async def _check_role(self, attributes):
        name = attributes.name if attributes.operation == UPDATE else ""
        if await self._allowed(attributes, "escalate", attributes.info.resource, name):
            return
        obj = attributes.obj
        wanted = obj.get("rules") if isinstance(obj.get("rules"), list) else []
        if obj.get("aggregationRule"):
            wanted = list(_FULL_AUTHORITY)
        self._confirm(attributes, wanted)

    async def _check_binding(self, attributes):
        ref = attributes.obj.get("roleRef") or {}
        kind, role_name = ref.get("kind"), ref.get("name") or ""
        resource = {"Role": "roles", "ClusterRole": "clusterroles"}.get(kind)
        if resource is None:
            return      # validation has refused it already
        if await self._allowed(attributes, "bind", resource, role_name):
            return
        if kind == "ClusterRole":
            role = self._index.cluster_roles.get(role_name)
        else:
            role = self._index.roles.get((attributes.namespace, role_name))
        if role is None:
            raise StatusError.not_found(resource, RBAC, role_name)
        self._confirm(attributes, role.rules)

    async def _allowed(self, attributes, verb, resource, name):
        asked = Attributes(attributes.user, verb, api_group=RBAC, api_version="*",
                           resource=resource, namespace=attributes.namespace, name=name)
        return (await ask(self._authorizer, asked))[0] is Decision.ALLOW

    def _confirm(self, attributes, wanted):
        """Refuse with upstream's 403 when the user lacks some of C{wanted}."""
        user = attributes.user
        held, errors = self._index.rules_for(user, attributes.namespace)
        missing = uncovered(held, wanted)
        if not missing:
            return
        groups = " ".join(f'"{g}"' for g in user.groups)
        lines = sorted({describe(piece) for piece in _compact(missing)})
        why = (f'user "{user.name}" (groups=[{groups}]) is attempting to grant RBAC '
               f"permissions not currently held:\n" + "\n".join(lines))
        if errors:
            why += f"; resolution errors: [{', '.join(errors)}]"
        raise StatusError.forbidden(attributes.info.resource, RBAC, attributes.name, why)


def _compact(pieces):
    """
    Join resource pieces that differ only in their verb, as upstream's
    CompactRules does; pieces with names or URLs stay as they are.
    """
    merged, compacted = {}, []
    for piece in pieces:
        if piece.get("resourceNames") or piece.get("nonResourceURLs"):
            compacted.append(piece)
            continue
        key = (piece["apiGroups"][0], piece["resources"][0])
        if key not in merged:
            merged[key] = {"apiGroups": [key[0]], "resources": [key[1]], "verbs": []}
            compacted.append(merged[key])
        verbs = merged[key]["verbs"]
        verbs.extend(v for v in piece["verbs"] if v not in verbs)
    return compacted


def _only_gc_fields(obj, old):
    """Whether an update changes nothing but what garbage collection changes."""
    if old is None:
        return False

    def stripped(o):
        meta = {k: v for k, v in (o.get("metadata") or {}).items() if k not in _GC_FIELDS}
        return dict(o, metadata=meta)

    return stripped(obj) == stripped(old)
