# -*- test-case-name: tests.auth.test_authz -*-
"""
What anonymous users may reach before policy exists to say so.

Until role-based policy is stored through the API, anonymous requests may
only read the health endpoints, C{/version} and the signed C{cluster-info}
config map; everything else is denied for them, whatever later modes say.
"""

from zope.interface import implementer

from orchd.auth.interfaces import Decision, IAuthorizer
from orchd.auth.user import ANONYMOUS

PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version")


def is_public_path(path):
    return any(path == p or path.startswith(p + "/") for p in PUBLIC_PATHS)


@implementer(IAuthorizer)
class AnonymousPublicInfo:
    """Allows anonymous users the public endpoints and denies them everything else."""

    def authorize(self, attributes):
        if attributes.user.name != ANONYMOUS:
            return Decision.NO_OPINION, ""
        if attributes.is_resource_request:
            if (attributes.verb == "get" and attributes.resource == "configmaps"
                    and attributes.namespace == "orch-public" and attributes.name == "cluster-info"
                    and not attributes.subresource and attributes.api_group == ""):
                return Decision.ALLOW, ""
        elif attributes.verb in ("get", "head") and is_public_path(attributes.path):
            return Decision.ALLOW, ""
        return Decision.DENY, ""

    def rules_for(self, user, namespace):
        if user.name != ANONYMOUS:
            return [], [], False
        non_resource = [{"verbs": ["get"], "nonResourceURLs": [p for p in PUBLIC_PATHS]
                         + [p + "/*" for p in PUBLIC_PATHS]}]
        resource = []
        if namespace == "orch-public":
            resource = [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"],
                         "resourceNames": ["cluster-info"]}]
        return resource, non_resource, False
