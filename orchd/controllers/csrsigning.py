# -*- test-case-name: tests.controllers.test_csrsigning -*-
"""
The built-in signer: approved requests for the API server's client signers
get a certificate from the cluster's client CA, node serving requests one
from the cluster CA.

Only C{orch.io/kube-apiserver-client},
C{orch.io/kube-apiserver-client-orchlet} and C{orch.io/orchlet-serving}
are signed here, because only certificates the API server itself trusts
are worth issuing: client certificates it verifies against its client CA,
and node agents' serving certificates against the cluster CA when it
proxies to them (C{nodes/proxy}, logs), so a node that joined from another
machine must have one from that CA, whose key it does not have. As
upstream's signer does, a request is signed only when it is Approved (not
Denied, not Failed) and has no certificate yet, and it is checked against
what its signer may issue first: a request that does not fit gets a
C{Failed} condition instead, so it is never retried. A signer whose CA key
is not here leaves its requests alone. The certificate lasts
C{spec.expirationSeconds} (at least ten minutes), at most a year, and
never beyond the CA.
"""

import base64
import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.x509.oid import ExtendedKeyUsageOID

from orchd.tls.certs import certificate_pem
from orchd.auth.csr import (
    CLIENT_AUTH, DIGITAL_SIGNATURE, FAILED, KEY_ENCIPHERMENT, SERVER_AUTH,
    SIGNER_KUBE_APISERVER_CLIENT, SIGNER_KUBE_APISERVER_CLIENT_ORCHLET, SIGNER_ORCHLET_SERVING,
    CSRError, alternative_names, api_client_error, has_true, is_approved, new_condition,
    node_client_error, node_serving_error, parse_request, usages_of,
)
from orchd.controllers.csrbase import CSRController

#: Signer name -> why a request does not fit it (None when it does).
CHECKS = {
    SIGNER_KUBE_APISERVER_CLIENT: lambda request, usages: api_client_error(usages),
    SIGNER_KUBE_APISERVER_CLIENT_ORCHLET: node_client_error,
    SIGNER_ORCHLET_SERVING: node_serving_error,
}


def _client_ca(pki):
    return pki.client_signer if pki.can_sign_clients else None


def _cluster_ca(pki):
    """The CA the API server verifies node agents' serving certificates with."""
    if getattr(pki, "ca_key", None) is None:
        return None
    return pki.ca_certificate, pki.ca_key


#: Signer name -> C{pki -> (CA certificate, CA key)}, or None when its key is missing.
CAS = {
    SIGNER_KUBE_APISERVER_CLIENT: _client_ca,
    SIGNER_KUBE_APISERVER_CLIENT_ORCHLET: _client_ca,
    SIGNER_ORCHLET_SERVING: _cluster_ca,
}
DEFAULT_DURATION = 365 * 24 * 3600
MIN_DURATION = 600
#: Certificates start a little in the past so a peer whose clock lags accepts them.
BACKDATE = 300


def duration(expiration_seconds, default=DEFAULT_DURATION):
    """How long a certificate lasts: what was asked, within C{[MIN_DURATION, default]}."""
    if not isinstance(expiration_seconds, int) or isinstance(expiration_seconds, bool):
        return default
    return max(MIN_DURATION, min(expiration_seconds, default))


def sign(request, usages, ca_certificate, ca_key, now, lifetime):
    """
    A certificate for C{request}'s subject, key and alternative names.

    @param usages: the request's usages (those the signer allowed).
    @param now: seconds since the epoch.
    @param lifetime: seconds from the backdated start.
    """
    start = datetime.datetime.fromtimestamp(now - BACKDATE, datetime.timezone.utc)
    end = min(start + datetime.timedelta(seconds=lifetime), ca_certificate.not_valid_after_utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(request.subject).issuer_name(ca_certificate.subject)
        .public_key(request.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
            ca_certificate.public_key()), critical=False)
    )
    if DIGITAL_SIGNATURE in usages or KEY_ENCIPHERMENT in usages:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=DIGITAL_SIGNATURE in usages, content_commitment=False,
            key_encipherment=KEY_ENCIPHERMENT in usages, data_encipherment=False,
            key_agreement=False, key_cert_sign=False, crl_sign=False, encipher_only=False,
            decipher_only=False), critical=True)
    extended = [oid for usage, oid in ((CLIENT_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH),
                                       (SERVER_AUTH, ExtendedKeyUsageOID.SERVER_AUTH))
                if usage in usages]
    if extended:
        builder = builder.add_extension(x509.ExtendedKeyUsage(extended), critical=False)
    names = alternative_names(request)
    if names is not None:
        builder = builder.add_extension(names, critical=False)
    return builder.sign(ca_key, hashes.SHA256())


class CSRSigningController(CSRController):
    """
    @param pki: the L{orchd.app.pki.PKI}; its C{client_signer} signs client
        certificates, its cluster CA serving certificates (see L{CAS}).
    """

    name = "csrsigning"

    def __init__(self, catalog, clock, pki):
        super().__init__(catalog, clock)
        self._pki = pki

    @classmethod
    def from_environment(cls, env):
        return cls(env.catalog, env.clock, env.pki)

    def disabled(self):
        if self._pki is None or not any(ca(self._pki) for ca in CAS.values()):
            return "no CA key is available"
        return None

    def wants(self, csr):
        spec, status = csr.get("spec") or {}, csr.get("status") or {}
        signer = spec.get("signerName")
        return (signer in CHECKS and self._pki is not None and CAS[signer](self._pki) is not None
                and is_approved(csr)
                and not has_true(csr, FAILED) and not status.get("certificate"))

    async def handle(self, csr):
        spec = csr["spec"]
        usages = usages_of(csr)
        try:
            request = parse_request(csr)
            alternative_names(request)      # readable, or the request fails
            why = CHECKS[spec["signerName"]](request, usages)
        except CSRError as e:
            why = str(e)
        status = csr.setdefault("status", {})
        if why:
            status.setdefault("conditions", []).append(
                new_condition(FAILED, "SignerValidationFailure", why, self.now()))
            if await self.write(csr, "status"):
                self.log.info("Request {name} failed validation: {why}",
                              name=csr["metadata"]["name"], why=why)
            return
        ca_certificate, ca_key = CAS[spec["signerName"]](self._pki)
        certificate = sign(request, usages, ca_certificate, ca_key, self.now(),
                           duration(spec.get("expirationSeconds")))
        status["certificate"] = base64.b64encode(certificate_pem(certificate)).decode()
        if await self.write(csr, "status"):
            self.log.info("Signed request {name} for {subject}",
                          name=csr["metadata"]["name"], subject=request.subject.rfc4514_string())
