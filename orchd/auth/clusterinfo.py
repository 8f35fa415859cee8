# -*- test-case-name: tests.controllers.test_bootstrapsigner,tests.orchlet.test_bootstrap -*-
"""
The C{cluster-info} ConfigMap as bootstrap tokens see it: its names, and the
detached JWS a signing token puts on it.

Three parties must agree on these: the API server writes C{cluster-info}
(L{orchd.app.clusterinfo}), the bootstrap signer signs it with every signing
token (L{orchd.controllers.bootstrapsigner}), and a joining node checks the
signature made with its own token (L{orchd.orchlet.bootstrap}). They live
here, beside L{orchd.auth.bootstraptoken}, which both the signer and the
node's credentials depend on.
"""

import base64
import hashlib
import hmac

NAMESPACE = "orch-public"
NAME = "cluster-info"
#: The data key holding the kubeconfig that is signed.
KUBECONFIG = "kubeconfig"
#: Data key prefix of the signatures: C{jws-kubeconfig-<token id>}.
SIGNATURE_PREFIX = "jws-kubeconfig-"


def _b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def detached_jws(payload, token):
    """
    C{<b64 header>..<b64 signature>}: the compact HS256 JWS of C{payload}
    keyed with the whole C{token}, its payload part left out.
    """
    token_id = token.split(".", 1)[0]
    # These exact bytes: verifiers rebuild the JWS and compare strings.
    header = _b64url(b'{"alg":"HS256","kid":"%s"}' % token_id.encode())
    signing_input = header + b"." + _b64url(payload.encode("utf-8"))
    signature = hmac.new(token.encode(), signing_input, hashlib.sha256).digest()
    return (header + b".." + _b64url(signature)).decode("ascii")
