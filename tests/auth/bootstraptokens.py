"""Bootstrap-token Secrets for tests."""

import base64
import datetime
import warnings

import jwt

TOKEN_ID = "abcdef"
TOKEN_SECRET = "0123456789abcdef"
TOKEN = f"{TOKEN_ID}.{TOKEN_SECRET}"
SECRETS = "/api/v1/namespaces/orch-system/secrets"
CLUSTER_INFO = "/api/v1/namespaces/orch-public/configmaps/cluster-info"


def rfc3339(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def token_secret(token_id=TOKEN_ID, secret=TOKEN_SECRET, expires=None, name=None,
                 usages=("authentication", "signing"), extra_groups=None, **more):
    """A bootstrap-token Secret body (C{stringData}); C{expires} in epoch seconds."""
    strings = {"token-id": token_id, "token-secret": secret}
    for usage in usages:
        strings[f"usage-bootstrap-{usage}"] = "true"
    if expires is not None:
        strings["expiration"] = rfc3339(expires)
    if extra_groups is not None:
        strings["auth-extra-groups"] = extra_groups
    strings.update(more)
    return {"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.orch.io/token",
            "metadata": {"name": name or f"bootstrap-token-{token_id}"},
            "stringData": strings}


def verify_detached(detached, payload, token):
    """
    Check a detached JWS as a joining client would, with pyjwt: put the
    base64url payload between the dots and verify HS256 keyed with the whole
    token. Returns the payload; raises C{jwt.InvalidSignatureError}.
    """
    header, empty, signature = detached.split(".")
    assert empty == "", detached
    encoded = base64.urlsafe_b64encode(payload.encode()).rstrip(b"=").decode()
    with warnings.catch_warnings():
        # A 23-byte token is shorter than RFC 7518 recommends; that is the format.
        warnings.simplefilter("ignore")
        return jwt.api_jws.decode(f"{header}.{encoded}.{signature}", key=token,
                                  algorithms=["HS256"]).decode()
