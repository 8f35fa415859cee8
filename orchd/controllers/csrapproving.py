# -*- test-case-name: tests.controllers.test_csrapproving -*-
"""
Approving node certificate requests without a person: client certificates
as upstream's SubjectAccessReview approver does, serving certificates of a
node for itself.

A node joining the cluster (as a bootstrap token's user, in
C{system:bootstrappers}) asks for its first client certificate, and a node
renews its own; nobody should have to approve either by hand. A request is
approved here only when it is exactly a node client certificate request
(signer C{orch.io/kube-apiserver-client-orchlet}, CN C{system:node:<name>},
O C{system:nodes}, client usages, no alternative names) and the user who
made it may C{create} C{certificatesigningrequests/selfnodeclient} (when
the CN is its own name) or C{certificatesigningrequests/nodeclient}: the
authorizer is asked about that user, as a SubjectAccessReview would, and
bootstrap policy grants those rights to bootstrappers and nodes.

Upstream never approves C{kubernetes.io/kubelet-serving} requests in the
controller manager, so a kubelet serving its API with a cluster-signed
certificate needs a person or an add-on approver. Here a node agent that
joined from another machine needs one for the API server to reach it, so
an C{orch.io/orchlet-serving} request is approved when all of these hold:
it is exactly a node serving request (L{node_serving_error}); whoever made
it I{is} that node (C{spec.username} equals the CN C{system:node:<name>}
and C{spec.groups} hold C{system:nodes}: only the node's own client
certificate gives that, never a bootstrap token); and every DNS name is
one the node may plausibly answer to: its name, C{localhost}, or a host
name its Node object already publishes (a C{Hostname}, C{InternalDNS} or
C{ExternalDNS} address, or the C{orch.io/hostname} label). Any other DNS
name, say the API server's or a Service's, would let a node impersonate
them to clients trusting the cluster CA, so such a request waits. IP
addresses are not checked (a node's addresses are whatever it reports
anyway, and the Node may not exist yet when it first asks). Anything else,
including every request this approver leaves alone, waits for an approver
with the C{approve} verb (C{kubectl certificate approve}).
"""

from cryptography import x509

from orchd.api.kinds import CERTIFICATES
from orchd.auth.attributes import Attributes
from orchd.auth.authz.ask import ask
from orchd.auth.authz.node import NODE_USER_PREFIX, NODES_GROUP
from orchd.auth.csr import (
    APPROVED, DENIED, SIGNER_KUBE_APISERVER_CLIENT_ORCHLET, SIGNER_ORCHLET_SERVING, CSRError,
    alternative_names, condition, new_condition, node_client_error, node_serving_error,
    parse_request, subject_common_name, usages_of,
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
SERVING_MESSAGE = "Auto approving self orchlet serving certificate for the node's own names."
#: Node address types whose values a node's serving certificate may name.
_DNS_ADDRESS_TYPES = ("Hostname", "InternalDNS", "ExternalDNS")
HOSTNAME_LABEL = "orch.io/hostname"


def published_names(node):
    """The DNS names Node object C{node} (or None) publishes for itself, lowered."""
    if not node:
        return set()
    names = {entry.get("address") for entry in (node.get("status") or {}).get("addresses") or ()
             if isinstance(entry, dict) and entry.get("type") in _DNS_ADDRESS_TYPES}
    names.add(((node.get("metadata") or {}).get("labels") or {}).get(HOSTNAME_LABEL))
    return {name.lower() for name in names if isinstance(name, str) and name}


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
        return (spec.get("signerName") in (SIGNER_KUBE_APISERVER_CLIENT_ORCHLET,
                                           SIGNER_ORCHLET_SERVING)
                and not status.get("certificate")
                and condition(csr, APPROVED) is None and condition(csr, DENIED) is None)

    async def handle(self, csr):
        try:
            request = parse_request(csr)
            alternative_names(request)      # readable, as the checks below need
        except CSRError:
            return      # the signer never signs it either; nothing to approve
        if csr["spec"]["signerName"] == SIGNER_ORCHLET_SERVING:
            if await self._self_serving(csr, request):
                await self._approve(csr, request, SERVING_MESSAGE)
            return
        if node_client_error(request, usages_of(csr)) is not None:
            return
        user = requester(csr)
        for subresource, self_only, message in RECOGNIZERS:
            if self_only and subject_common_name(request) != user.name:
                continue
            if await self._may_create(user, subresource):
                await self._approve(csr, request, message)
                return

    async def _approve(self, csr, request, message):
        csr.setdefault("status", {}).setdefault("conditions", []).append(
            new_condition(APPROVED, REASON, message, self.now()))
        if await self.write(csr, "approval"):
            self.log.info("Approved request {name} of {user} for {subject}",
                          name=csr["metadata"]["name"], user=requester(csr).name,
                          subject=subject_common_name(request))

    async def _self_serving(self, csr, request):
        """Whether C{csr} is a node's request for a serving certificate of its own names."""
        if node_serving_error(request, usages_of(csr)) is not None:
            return False
        user, common_name = requester(csr), subject_common_name(request)
        if user.name != common_name or NODES_GROUP not in user.groups:
            return False
        node_name = common_name[len(NODE_USER_PREFIX):]
        requested = {name.lower() for name in
                     alternative_names(request).get_values_for_type(x509.DNSName)}
        allowed = {node_name.lower(), "localhost"}
        if requested <= allowed:
            return True
        nodes = self._catalog.resource("", "nodes")
        node = await nodes.find(self._catalog.system_context(), node_name)
        return requested <= allowed | published_names(node)

    async def _may_create(self, user, subresource):
        asked = Attributes(user, "create", api_group=CERTIFICATES, api_version="*",
                           resource=CSRS, subresource=subresource)
        return (await ask(self._authorizer, asked))[0] is Decision.ALLOW
