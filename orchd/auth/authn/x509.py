# -*- test-case-name: tests.auth.test_authn -*-
"""
Client certificates: user = subject CN, groups = subject O values.

The TLS layer already verified the certificate chain against the client CA
during the handshake (a certificate from another CA never gets this far),
so this authenticator only reads the subject. A connection keeps its
certificate for its whole life, so the result is cached on the channel.
"""

from cryptography.x509.oid import NameOID
from zope.interface import implementer

from orchd.api.errors import StatusError
from orchd.auth.interfaces import IAuthenticator
from orchd.auth.user import AUTHENTICATED, UserInfo

_CACHE_ATTRIBUTE = "_orchd_x509_identity"
_NONE = (None, None)


def certificate_identity(certificate):
    """
    The user named by a verified certificate, and when it stops being valid.

    @param certificate: a C{cryptography} certificate.
    @return: C{(UserInfo, not_valid_after_timestamp)}.
    """
    subject = certificate.subject
    names = subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    groups = [a.value for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    name = names[0].value if names else ""
    user = UserInfo(name, groups + [AUTHENTICATED])
    return user, certificate.not_valid_after_utc.timestamp()


@implementer(IAuthenticator)
class X509Authenticator:
    """Authenticates by the verified client certificate of the TLS connection."""

    def __init__(self, clock, observe_lifetime=None):
        self._clock = clock
        #: C{observe_lifetime(seconds)} per authenticated request: the
        #: certificate's remaining lifetime, for the metrics.
        self._observe_lifetime = observe_lifetime

    def authenticate(self, request):
        channel = request.channel
        cached = getattr(channel, _CACHE_ATTRIBUTE, None)
        if cached is None:
            cached = _read_identity(request.transport)
            setattr(channel, _CACHE_ATTRIBUTE, cached)
        user, not_after = cached
        if user is None:
            return None
        left = not_after - self._clock.seconds()
        if left < 0 or not user.name:
            raise StatusError.unauthorized()
        if self._observe_lifetime is not None:
            self._observe_lifetime(left)
        return user


def _read_identity(transport):
    get_peer = getattr(transport, "getPeerCertificate", None)
    if get_peer is None:
        return _NONE
    try:
        peer = get_peer()
    except Exception:
        return _NONE
    if peer is None:
        return _NONE
    return certificate_identity(peer.to_cryptography())
