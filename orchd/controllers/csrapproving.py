# -*- test-case-name: tests.controllers.test_csrapproving -*-
"""
Approving node client certificate requests without a person, as upstream's
SubjectAccessReview approver does.

A node joining the cluster (as a bootstrap token's user, in
C{system:bootstrappers}) asks for its first client certificate, and a node
renews its own; nobody should have to approve either by hand. A request is
approved here only when it is exactly a node client certificate request
(signer C{orch.io/kube-apiserver-client-orchlet}, CN C{system:node:<name>},
O C{system:nodes}, client usages, no alternative names) and the user who
made it may C{create} C{certificatesigningrequests/selfnodeclient} (when
the CN is its own name) or C{certificatesigningrequests/nodeclient}: the
authorizer is asked about that user, as a SubjectAccessReview would, and
bootstrap policy grants those rights to bootstrappers and nodes. Anything
else waits for an approver with the C{approve} verb.
"""

from orchd.api.kinds import CERTIFICATES
from orchd.auth.attributes import Attributes
from orchd.auth.authz.ask import ask
from orchd.auth.csr import (
    APPROVED, DENIED, SIGNER_KUBE_APISERVER_CLIENT_ORCHLET, CSRError, condition,
    new_condition, node_client_error, parse_request, subject_common_name, usages_of,
)
from orchd.auth.interfaces import Decision
from orchd.auth.user import UserInfo
from orchd.controllers.csrbase import CSRS, CSRController

REASON = "AutoApproved"
#: (subresource the requester needs, whether the CN must be its name, message).
RECOGNIZERS = (
    ("selfnodeclient", True,
     "Auto approving self orchlet client certificate after SubjectAccessReview."),
    ("nodeclient", False,
     "Auto approving orchlet client certificate after SubjectAccessReview."),
)


def requester(csr):
    """The user who made C{csr}, as the server recorded it."""
    spec = csr.get("spec") or {}
    extra = {key: list(values) for key, values in (spec.get("extra") or {}).items()}
    return UserInfo(spec.get("username") or "", spec.get("groups") or (),
                    spec.get("uid") or "", extra)


class CSRApprovingController(CSRController):
    """
    @param authorizer: the server's authorizer, asked about the requesting user.
    """

    name = "csrapproving"

    def __init__(self, catalog, clock, authorizer):
        super().__init__(catalog, clock)
        self._authorizer = authorizer

    @classmethod
    def from_environment(cls, env):
        return cls(env.catalog, env.clock, getattr(env, "authorizer", None))

    def disabled(self):
        return "no authorizer to ask" if self._authorizer is None else None

    def wants(self, csr):
        spec, status = csr.get("spec") or {}, csr.get("status") or {}
        return (spec.get("signerName") == SIGNER_KUBE_APISERVER_CLIENT_ORCHLET
                and not status.get("certificate")
                and condition(csr, APPROVED) is None and condition(csr, DENIED) is None)

    async def handle(self, csr):
        try:
            request = parse_request(csr)
        except CSRError:
            return      # the signer never signs it either; nothing to approve
        if node_client_error(request, usages_of(csr)) is not None:
            return
        user = requester(csr)
        for subresource, self_only, message in RECOGNIZERS:
            if self_only and subject_common_name(request) != user.name:
                continue
            if not await self._may_create(user, subresource):
                continue
            csr.setdefault("status", {}).setdefault("conditions", []).append(
                new_condition(APPROVED, REASON, message, self.now()))
            if await self.write(csr, "approval"):
                self.log.info("Approved request {name} of {user} for {subject}",
                              name=csr["metadata"]["name"], user=user.name,
                              subject=subject_common_name(request))
            return

    async def _may_create(self, user, subresource):
        asked = Attributes(user, "create", api_group=CERTIFICATES, api_version="*",
                           resource=CSRS, subresource=subresource)
        return (await ask(self._authorizer, asked))[0] is Decision.ALLOW
