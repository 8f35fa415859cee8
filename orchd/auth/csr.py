# -*- test-case-name: tests.auth.test_csr -*-
"""
CertificateSigningRequests as signers, approvers and admission read them.

The signer, the approver and the admission plugins must agree on what a
request says (its decoded C{spec.request}), which state it is in (its
conditions) and what a node's client and serving certificate requests
look like: the shapes approved without a person, so they are checked in
one place. A node agent builds its requests with L{node_client_request}
and L{node_serving_request}, and so do tests.
"""

import base64
import binascii

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID

from orchd.api.meta import rfc3339
from orchd.auth.authz.node import NODE_USER_PREFIX, NODES_GROUP
from orchd.tls.certs import subject_alternative_names
from orchd.auth.bootstrappolicy.clusterroles import (
    SIGNER_KUBE_APISERVER_CLIENT,
    SIGNER_KUBE_APISERVER_CLIENT_ORCHLET,
    SIGNER_ORCHLET_SERVING,
)

__all__ = ["SIGNER_KUBE_APISERVER_CLIENT", "SIGNER_KUBE_APISERVER_CLIENT_ORCHLET",
           "SIGNER_ORCHLET_SERVING", "node_serving_error", "node_serving_request",
           "CSRError", "parse_request", "condition", "has_true", "is_approved", "usages_of",
           "new_condition", "node_client_error", "api_client_error", "node_client_request",
           "subject_organizations", "subject_common_name", "alternative_names"]

APPROVED, DENIED, FAILED = "Approved", "Denied", "Failed"
DIGITAL_SIGNATURE, KEY_ENCIPHERMENT, CLIENT_AUTH, SERVER_AUTH = (
    "digital signature", "key encipherment", "client auth", "server auth")

#: Usages a node client certificate request must have, exactly: with or without
#: key encipherment (which only RSA keys use).
_NODE_CLIENT_USAGES = ({DIGITAL_SIGNATURE, KEY_ENCIPHERMENT, CLIENT_AUTH},
                       {DIGITAL_SIGNATURE, CLIENT_AUTH})
_API_CLIENT_OPTIONAL = {DIGITAL_SIGNATURE, KEY_ENCIPHERMENT}
#: Usages a node serving certificate request may have; C{server auth} is required.
_NODE_SERVING_USAGES = {DIGITAL_SIGNATURE, KEY_ENCIPHERMENT, SERVER_AUTH}


class CSRError(ValueError):
    """C{spec.request} is not a well-signed PEM certificate request."""


def parse_request(csr, check_signature=True):
    """
    The X.509 request of CertificateSigningRequest C{csr}.

    @param check_signature: also require the request's signature to be valid.
    @raise CSRError: when it cannot be decoded or its signature is wrong.
    """
    encoded = ((csr or {}).get("spec") or {}).get("request") or ""
    try:
        request = x509.load_pem_x509_csr(base64.b64decode(encoded, validate=True))
    except (binascii.Error, ValueError, TypeError):
        raise CSRError("PEM block type must be CERTIFICATE REQUEST") from None
    if not check_signature:
        return request
    try:
        valid = request.is_signature_valid
    except (ValueError, TypeError):
        valid = False
    if not valid:
        raise CSRError("the certificate request's signature is invalid")
    return request


def condition(csr, kind):
    """The condition of type C{kind} (Approved, Denied, Failed), or None."""
    for entry in ((csr or {}).get("status") or {}).get("conditions") or []:
        if entry.get("type") == kind:
            return entry
    return None


def has_true(csr, kind):
    return (condition(csr, kind) or {}).get("status") == "True"


def is_approved(csr):
    """Approved and not Denied, as upstream's IsCertificateRequestApproved."""
    return has_true(csr, APPROVED) and not has_true(csr, DENIED)


def usages_of(csr):
    return set(((csr or {}).get("spec") or {}).get("usages") or [])


def new_condition(kind, reason, message, now):
    """A condition, stamped with C{now} (seconds since the epoch)."""
    stamp = rfc3339(now)
    return {"type": kind, "status": "True", "reason": reason, "message": message,
            "lastUpdateTime": stamp, "lastTransitionTime": stamp}


def subject_organizations(request):
    return [a.value for a in request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]


def subject_common_name(request):
    names = request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return names[0].value if names else ""


def alternative_names(request):
    """
    The request's SubjectAlternativeName extension value, or None.

    @raise CSRError: when its extensions cannot be read.
    """
    try:
        return request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None
    except ValueError as e:
        raise CSRError(f"the certificate request's extensions are invalid: {e}") from None


def node_client_error(request, usages):
    """
    Why C{request} is not a node client certificate request (upstream's
    ValidateKubeletClientCSR), or None when it is one: O exactly
    C{system:nodes}, CN C{system:node:<name>}, no alternative names, and
    the usages of a client certificate.
    """
    if subject_organizations(request) != [NODES_GROUP]:
        return f"subject organization is not {NODES_GROUP}"
    names = alternative_names(request)
    if names is not None:
        for kind, what in ((x509.DNSName, "DNS"), (x509.RFC822Name, "Email"),
                           (x509.IPAddress, "IP"),
                           (x509.UniformResourceIdentifier, "URI")):
            if names.get_values_for_type(kind):
                return f"{what} subjectAltNames are not allowed"
    if not subject_common_name(request).startswith(NODE_USER_PREFIX):
        return f"subject common name does not begin with {NODE_USER_PREFIX}"
    if set(usages) not in _NODE_CLIENT_USAGES:
        return (f"usages did not match "
                f"[{', '.join(sorted(_NODE_CLIENT_USAGES[0]))}]")
    return None


def api_client_error(usages):
    """Why C{usages} do not fit a client certificate, or None."""
    for usage in sorted(usages):
        if usage != CLIENT_AUTH and usage not in _API_CLIENT_OPTIONAL:
            return f"invalid usage for client certificate: {usage}"
    if CLIENT_AUTH not in usages:
        return f"missing required usage for client certificate: {CLIENT_AUTH}"
    return None


def node_client_request(node, key):
    """
    A PEM certificate request for node C{node}'s client certificate.

    @param key: the node's private key (the certificate will be for its public half).
    """
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, NODES_GROUP),
                         x509.NameAttribute(NameOID.COMMON_NAME, NODE_USER_PREFIX + node)])
    request = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(
        key, hashes.SHA256())
    return request.public_bytes(serialization.Encoding.PEM)


def node_serving_error(request, usages):
    """
    Why C{request} is not a node serving certificate request (upstream's
    ValidateKubeletServingCSR), or None when it is one: O exactly
    C{system:nodes}, CN C{system:node:<name>}, alternative names that are
    DNS names and IP addresses only (at least one), C{server auth} among
    the usages and nothing beyond digital signature and key encipherment.
    """
    if subject_organizations(request) != [NODES_GROUP]:
        return f"subject organization is not {NODES_GROUP}"
    names = alternative_names(request)
    if names is None or not (names.get_values_for_type(x509.DNSName)
                             or names.get_values_for_type(x509.IPAddress)):
        return "DNS or IP subjectAltName is required"
    for name in names:
        if not isinstance(name, (x509.DNSName, x509.IPAddress)):
            what = {x509.RFC822Name: "Email", x509.UniformResourceIdentifier: "URI"}.get(
                type(name), type(name).__name__)
            return f"{what} subjectAltNames are not allowed"
    if SERVER_AUTH not in usages or not set(usages) <= _NODE_SERVING_USAGES:
        return f"usages did not match [{', '.join(sorted(_NODE_SERVING_USAGES))}]"
    common_name = subject_common_name(request)
    if not common_name.startswith(NODE_USER_PREFIX) or common_name == NODE_USER_PREFIX:
        return f"subject common name does not begin with {NODE_USER_PREFIX}"
    return None


def node_serving_request(node, key, names):
    """
    A PEM certificate request for node C{node}'s serving certificate.

    @param names: host names and IP addresses it is to be valid for.
    """
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, NODES_GROUP),
                         x509.NameAttribute(NameOID.COMMON_NAME, NODE_USER_PREFIX + node)])
    request = (x509.CertificateSigningRequestBuilder().subject_name(subject)
               .add_extension(x509.SubjectAlternativeName(subject_alternative_names(names)),
                              critical=False)
               .sign(key, hashes.SHA256()))
    return request.public_bytes(serialization.Encoding.PEM)
