# -*- test-case-name: tests.auth.test_authz_node -*-
"""
The Node mode: what a node agent may do, decided from the pods bound to it.

Only users named C{system:node:<node>} in group C{system:nodes} are judged;
everyone else is left to later modes. A node may read the secrets, config
maps, claims, volumes and attachments its pods use and request tokens for
their service accounts (L{orchd.auth.nodegraph}); it may write its own Node,
Lease and CSINode and the pods bound to it, and it has the static node rules
(L{orchd.auth.rbac.noderules}) for everything the graph does not narrow.

Writes to another node's Node, Lease, CSINode or pods are denied, not left
to later modes: a node may change its own objects and no others whatever
other policy grants (upstream gets the same from its NodeRestriction
admission), and nothing downstream checks it again. Reads the graph cannot
tie to the node get no opinion, as upstream, so RBAC may still grant them.
"""

from zope.interface import implementer

from orchd.api.kinds import COORDINATION, CORE, STORAGE, key_prefix_of
from orchd.auth import nodegraph
from orchd.auth.interfaces import Decision, IAuthorizer
from orchd.auth.rbac.noderules import NODE_RULES
from orchd.auth.rbac.rules import compile_rules

NODE_USER_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
NODE_LEASE_NAMESPACE = "orch-node-lease"

ALLOW = (Decision.ALLOW, "")
NO_OPINION = (Decision.NO_OPINION, "")

_WRITES = ("update", "patch", "delete")


PODS_PREFIX = key_prefix_of(CORE, "pods")
VOLUMES_PREFIX = key_prefix_of(CORE, "persistentvolumes")
ATTACHMENTS_PREFIX = key_prefix_of(STORAGE, "volumeattachments")


def node_name(user):
    """
    The node a user acts for: C{None} when the user is not a node, C{""}
    when it is one but names no node.
    """
    if NODES_GROUP not in user.groups or not user.name.startswith(NODE_USER_PREFIX):
        return None
    return user.name[len(NODE_USER_PREFIX):]


def _no_opinion(reason):
    return Decision.NO_OPINION, reason


@implementer(IAuthorizer)
class NodeAuthorizer:
    """
    Requests are answered from memory; L{start} fills the graph first.

    @param store: where to list and watch the objects from (an IStore or CachedReads).
    @param pods_prefix: the key prefix of pods.
    @param volumes_prefix: the key prefix of persistent volumes; None to not
        follow them, so that no node may get a volume or a volume's secrets.
    @param attachments_prefix: the key prefix of volume attachments; None to
        not follow them, so that no node may get one.
    """

    def __init__(self, store, pods_prefix=PODS_PREFIX, volumes_prefix=VOLUMES_PREFIX,
                 attachments_prefix=ATTACHMENTS_PREFIX):
        self.graph = nodegraph.NodeGraph(store, pods_prefix, volumes_prefix, attachments_prefix)
        self._rules = compile_rules(NODE_RULES)
        self._handlers = {
            (CORE, "secrets"): self._read_used,
            (CORE, "configmaps"): self._read_used,
            (CORE, "persistentvolumeclaims"): self._claim,
            (CORE, "persistentvolumes"): self._get_used,
            (STORAGE, "volumeattachments"): self._get_used,
            (CORE, "serviceaccounts"): self._token,
            (COORDINATION, "leases"): self._lease,
            (STORAGE, "csinodes"): self._csinode,
            (CORE, "nodes"): self._node,
            (CORE, "pods"): self._pod,
        }

    def start(self):
        """
        @return: a Deferred firing once pods (and volumes, attachments) are
            listed; until then nothing is related to any node.
        """
        return self.graph.start()

    def stop(self):
        self.graph.stop()

    # -- IAuthorizer ------------------------------------------------------------------

    def authorize(self, attributes):
        node = node_name(attributes.user)
        if node is None:
            return NO_OPINION
        if not node:
            return _no_opinion(f'unknown node for user "{attributes.user.name}"')
        if attributes.is_resource_request:
            handler = self._handlers.get((attributes.api_group, attributes.resource))
            if handler is not None:
                decided = handler(node, attributes)
                if decided is not None:
                    return decided
        if any(rule.allows(attributes) for rule in self._rules):
            return ALLOW
        return NO_OPINION

    def rules_for(self, user, namespace):
        # What a node may read depends on its pods: it cannot be listed as rules.
        return [], [], node_name(user) is not None

    # -- objects the node's pods use ------------------------------------------------------

    def _related(self, node, kind, attributes):
        if not attributes.name:
            return _no_opinion("No Object name found")
        if self.graph.related(kind, attributes.namespace, attributes.name, node):
            return ALLOW
        reason = f"no relationship found between node '{node}' and this object"
        if not self.graph.synced:
            reason += " (the node authorizer has not listed pods yet)"
        return _no_opinion(reason)

    def _read_used(self, node, attributes):
        """Secrets and config maps: one object at a time (a single-name list or watch too)."""
        if attributes.verb not in ("get", "list", "watch"):
            return _no_opinion("can only read resources of this type")
        if attributes.subresource:
            return _no_opinion("cannot read subresource")
        if not attributes.namespace:
            return _no_opinion("can only read namespaced object of this type")
        return self._related(node, attributes.resource, attributes)

    def _get_used(self, node, attributes):
        if attributes.verb != "get":
            return _no_opinion("can only get individual resources of this type")
        if attributes.subresource:
            return _no_opinion("cannot get subresource")
        return self._related(node, attributes.resource, attributes)

    def _claim(self, node, attributes):
        if attributes.subresource != "status":
            return self._get_used(node, attributes)
        if attributes.verb not in ("update", "patch"):
            return _no_opinion("can only get/update/patch this type")
        return self._related(node, nodegraph.CLAIM, attributes)

    def _token(self, node, attributes):
        if attributes.verb != "create" or not attributes.name:
            return _no_opinion("can only create tokens for individual service accounts")
        if attributes.subresource != "token":
            return _no_opinion("can only create token subresource of serviceaccount")
        return self._related(node, nodegraph.SERVICE_ACCOUNT, attributes)

    # -- objects of the node itself -------------------------------------------------------

    def _lease(self, node, attributes):
        verb = attributes.verb
        if verb not in ("get", "create", "update", "patch", "delete"):
            return _no_opinion("can only get, create, update, patch, or delete a node lease")
        if attributes.namespace != NODE_LEASE_NAMESPACE:
            return _no_opinion(
                f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace')
        # A create names its lease only in the body, which this mode does not see.
        if verb == "create" or attributes.name == node:
            return ALLOW
        if verb in _WRITES:
            return Decision.DENY, f'node "{node}" can only modify its own node lease'
        return _no_opinion("can only access node lease with the same name as the requesting node")

    def _csinode(self, node, attributes):
        verb = attributes.verb
        if verb not in ("get", "create", "update", "patch", "delete"):
            return _no_opinion("can only get, create, update, patch, or delete a CSINode")
        if attributes.subresource:
            return _no_opinion("cannot authorize CSINode subresources")
        if verb == "create" or attributes.name == node:
            return ALLOW
        if verb in _WRITES:
            return Decision.DENY, f'node "{node}" can only modify its own CSINode'
        return _no_opinion("can only access CSINode with the same name as the requesting node")

    def _node(self, node, attributes):
        """Writes to Node objects: its own only. Reads and create: the static rules."""
        if attributes.verb not in ("update", "patch"):
            return None
        if attributes.subresource not in ("", "status"):
            return None
        if attributes.name == node:
            return ALLOW
        return Decision.DENY, f'node "{node}" is not allowed to modify node "{attributes.name}"'

    def _pod(self, node, attributes):
        """Writes to pods: those bound to it. Reads and mirror pod creation: the static rules."""
        verb, subresource = attributes.verb, attributes.subresource
        if subresource == "" and verb == "delete":
            action = "delete pods"
        elif subresource == "status" and verb in ("update", "patch"):
            action = "update pod status for pods"
        elif subresource == "eviction" and verb == "create":
            action = "evict pods"
        else:
            return None
        if self.graph.related(nodegraph.POD, attributes.namespace, attributes.name, node):
            return ALLOW
        return Decision.DENY, f'node "{node}" can only {action} with spec.nodeName set to itself'
