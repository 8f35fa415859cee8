# -*- test-case-name: tests.auth.test_rbac_rules -*-
"""
What a node agent may do: the rules of ClusterRole C{system:node}.

The Node authorizer grants them to C{system:node:<name>} users (and narrows
reads of secrets, config maps and volumes to what the node's pods use);
the bootstrap policy publishes them as the C{system:node} role.
"""

from orchd.api.kinds import AUTHENTICATION, AUTHORIZATION, CERTIFICATES, COORDINATION, NODE, STORAGE
from orchd.auth.rbac.rules import rule

READ = ("get", "list", "watch")

NODE_RULES = (
    # Checking API access (non-mutating creates).
    rule(["create"], [AUTHENTICATION], ["tokenreviews"]),
    rule(["create"], [AUTHORIZATION], ["subjectaccessreviews", "localsubjectaccessreviews"]),
    # Service environment variables of pods.
    rule(READ, [""], ["services"]),
    # Registering the node and reporting its status.
    rule(["create", "get", "list", "watch"], [""], ["nodes"]),
    rule(["update", "patch"], [""], ["nodes/status"]),
    rule(["update", "patch"], [""], ["nodes"]),
    rule(["create", "update", "patch"], [""], ["events"]),
    # Pods: reading those bound to it, mirror pods, status and evictions.
    rule(READ, [""], ["pods"]),
    rule(["create", "delete"], [""], ["pods"]),
    rule(["update", "patch"], [""], ["pods/status"]),
    rule(["create"], [""], ["pods/eviction"]),
    # Volumes and environment of its pods (the Node authorizer narrows these).
    rule(READ, [""], ["secrets", "configmaps"]),
    rule(["get"], [""], ["persistentvolumeclaims", "persistentvolumes"]),
    rule(["get"], [""], ["endpoints"]),
    rule(["get", "update", "patch"], [""], ["persistentvolumeclaims/status"]),
    rule(["create"], [""], ["serviceaccounts/token"]),
    # Rotating its own client certificate.
    rule(["create", "get", "list", "watch"], [CERTIFICATES], ["certificatesigningrequests"]),
    # Heartbeats.
    rule(["get", "create", "update", "patch", "delete"], [COORDINATION], ["leases"]),
    # Storage drivers and runtime classes.
    rule(["get"], [STORAGE], ["volumeattachments"]),
    rule(["get", "watch", "list"], [STORAGE], ["csidrivers"]),
    rule(["get", "create", "update", "patch", "delete"], [STORAGE], ["csinodes"]),
    rule(READ, [NODE], ["runtimeclasses"]),
)
