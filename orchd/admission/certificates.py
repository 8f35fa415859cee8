# -*- test-case-name: tests.admission.test_certificates -*-
"""
Who may approve, who may sign, and what no request may ask for.

Writing a CertificateSigningRequest's C{approval} needs the C{approve}
verb on the request's signer, and putting a certificate or condition into
its C{status} needs C{sign}: the rights follow the signer, not the request,
so an approver of one signer's requests cannot approve another's. Both are
asked of the authorizer as upstream does, on resource C{signers} of group
C{certificates.orch.io} named after the signer, or after its domain
(C{orch.io/*}) for whoever may act for every signer there. Finally no
request to the API server's client signer may name C{system:masters} among
its groups: such a certificate would be a superuser credential that RBAC
cannot take back.
"""

from zope.interface import implementer

from orchd.admission.interfaces import CREATE, UPDATE, IAdmissionPlugin
from orchd.api.errors import StatusError
from orchd.api.kinds import CERTIFICATES
from orchd.auth.attributes import Attributes
from orchd.auth.authz.ask import ask
from orchd.auth.csr import (
    SIGNER_KUBE_APISERVER_CLIENT, CSRError, parse_request, subject_organizations,
)
from orchd.auth.interfaces import Decision
from orchd.auth.user import MASTERS

CSRS = "certificatesigningrequests"


def _is_csr(attributes):
    info = attributes.info
    return (info.group, info.resource) == (CERTIFICATES, CSRS)


async def authorized_for_signer(authorizer, user, verb, signer_name):
    """Whether C{user} may C{verb} signer C{signer_name}, or every signer of its domain."""
    domain = (signer_name or "").split("/", 1)[0]
    for name in (signer_name, domain + "/*"):
        asked = Attributes(user, verb, api_group=CERTIFICATES, api_version="*",
                           resource="signers", name=name)
        if (await ask(authorizer, asked))[0] is Decision.ALLOW:
            return True
    return False


def _refuse(attributes, why):
    raise StatusError.forbidden(attributes.info.resource, attributes.info.group,
                                attributes.name, why)


def _signer_name(obj):
    return ((obj or {}).get("spec") or {}).get("signerName") or ""


class _SignerCheck:
    """A check of one verb on the signer, for writes through one subresource."""

    subresource = verb = None
    resources = frozenset({(CERTIFICATES, CSRS)})
    mutates = False

    def __init__(self, authorizer):
        self._authorizer = authorizer

    def admit(self, attributes):
        pass

    def validate(self, attributes):
        if not _is_csr(attributes) or attributes.operation != UPDATE \
                or attributes.subresource != self.subresource:
            return None
        if not self.changes(attributes.obj or {}, attributes.old or {}):
            return None
        return self._check_signer(attributes)

    async def _check_signer(self, attributes):
        signer = _signer_name(attributes.old)
        if not await authorized_for_signer(self._authorizer, attributes.user, self.verb, signer):
            _refuse(attributes, f'user not permitted to {self.verb} requests with '
                                f'signerName "{signer}"')

    def changes(self, obj, old):
        return True


@implementer(IAdmissionPlugin)
class CertificateApproval(_SignerCheck):
    """Approving or denying needs C{approve} on the signer."""

    subresource, verb = "approval", "approve"


@implementer(IAdmissionPlugin)
class CertificateSigning(_SignerCheck):
    """Issuing a certificate, or failing a request, needs C{sign} on the signer."""

    subresource, verb = "status", "sign"

    def changes(self, obj, old):
        new, before = obj.get("status") or {}, old.get("status") or {}
        return (new.get("certificate") != before.get("certificate")
                or (new.get("conditions") or []) != (before.get("conditions") or []))


@implementer(IAdmissionPlugin)
class CertificateSubjectRestriction:
    """No API server client certificate for group C{system:masters}."""

    resources = frozenset({(CERTIFICATES, CSRS)})
    mutates = False

    def admit(self, attributes):
        pass

    def validate(self, attributes):
        if not _is_csr(attributes) or attributes.operation != CREATE or attributes.subresource:
            return
        if _signer_name(attributes.obj) != SIGNER_KUBE_APISERVER_CLIENT:
            return
        try:
            request = parse_request(attributes.obj, check_signature=False)
        except CSRError as e:
            _refuse(attributes, f"failed to parse CSR: {e}")
        if MASTERS in subject_organizations(request):
            _refuse(attributes, f"use of {SIGNER_KUBE_APISERVER_CLIENT} signer with "
                                f"{MASTERS} group is not allowed")
