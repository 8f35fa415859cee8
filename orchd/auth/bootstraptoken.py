# -*- test-case-name: tests.auth.test_bootstraptoken -*-
"""
Bootstrap tokens: C{<id>.<secret>} credentials backed by Secrets of type
C{bootstrap.orch.io/token} in C{orch-system}.

Validation, the authenticator, the bootstrap signer and the token cleaner
all read those Secrets; this module is the one place that says how, so
they agree on what a valid, expired or signing token is.
"""

import base64
import binascii
import datetime
import re

import attr

SECRET_TYPE = "bootstrap.orch.io/token"
NAMESPACE = "orch-system"
NAME_PREFIX = "bootstrap-token-"
USER_PREFIX = "system:bootstrap:"
GROUP = "system:bootstrappers"

ID_KEY = "token-id"
SECRET_KEY = "token-secret"
EXPIRATION_KEY = "expiration"
EXTRA_GROUPS_KEY = "auth-extra-groups"
USAGE_PREFIX = "usage-bootstrap-"
AUTHENTICATION = "authentication"
SIGNING = "signing"
USAGES = (AUTHENTICATION, SIGNING)

# Used with fullmatch: Python's "$" would let a trailing newline through.
TOKEN = re.compile(r"([a-z0-9]{6})\.([a-z0-9]{16})")
TOKEN_ID = re.compile(r"[a-z0-9]{6}")
TOKEN_SECRET = re.compile(r"[a-z0-9]{16}")
EXTRA_GROUP = re.compile(r"system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]")
# Go's time.RFC3339 layout: upper-case T and Z, optional fraction, offset required.
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")


def parse_token(text):
    """C{(token_id, token_secret)} of a bearer token, or None when it is not one."""
    match = TOKEN.fullmatch(text)
    return (match.group(1), match.group(2)) if match else None


def secret_name(token_id):
    return NAME_PREFIX + token_id


def parse_expiration(text):
    """
    Seconds since the epoch of an RFC 3339 time.

    @raise ValueError: when C{text} is not RFC 3339.
    """
    if not _RFC3339.fullmatch(text):
        raise ValueError(f"{text!r} is not an RFC 3339 time")
    main, fraction, offset = text[:19], "", text[19:]
    if offset.startswith("."):
        digits = re.match(r"\.(\d+)", offset).group(1)
        fraction, offset = "." + digits[:6].ljust(6, "0"), offset[len(digits) + 1:]
    if offset == "Z":
        offset = "+00:00"
    return datetime.datetime.fromisoformat(main + fraction + offset).timestamp()


def decoded_data(obj):
    """The Secret's C{data} as text; values that are not base64 UTF-8 are left out."""
    data = obj.get("data")
    if not isinstance(data, dict):
        return {}
    decoded = {}
    for key, value in data.items():
        try:
            decoded[key] = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, ValueError, TypeError):
            continue
    return decoded


@attr.s(frozen=True, auto_attribs=True)
class BootstrapToken:
    """
    What a bootstrap-token Secret says, once it is known to be well formed.

    @ivar expiration: seconds since the epoch; None when it does not expire,
        C{float("-inf")} when unreadable (upstream treats that as expired).
    """

    token_id: str
    secret: str
    name: str
    uid: str
    expiration: object
    usages: frozenset
    extra_groups: tuple
    deleting: bool

    @property
    def token(self):
        return f"{self.token_id}.{self.secret}"

    def expired(self, now):
        return self.expiration is not None and now >= self.expiration

    def ttl(self, now):
        """Seconds until it expires (0 when it has), or None when it never does."""
        if self.expiration is None:
            return None
        return max(0.0, self.expiration - now)


def token_from_secret(obj):
    """
    The L{BootstrapToken} a Secret holds, or None when it is not a
    bootstrap-token Secret or its name, id or secret are malformed.
    """
    if obj.get("type") != SECRET_TYPE:
        return None
    meta = obj.get("metadata") or {}
    data = decoded_data(obj)
    token_id, secret = data.get(ID_KEY, ""), data.get(SECRET_KEY, "")
    if not TOKEN_ID.fullmatch(token_id) or not TOKEN_SECRET.fullmatch(secret):
        return None
    if meta.get("name") != secret_name(token_id):
        return None
    expiration = None
    if data.get(EXPIRATION_KEY):
        try:
            expiration = parse_expiration(data[EXPIRATION_KEY])
        except ValueError:
            expiration = float("-inf")
    usages = frozenset(u for u in USAGES if data.get(USAGE_PREFIX + u) == "true")
    groups = tuple(g.strip() for g in data.get(EXTRA_GROUPS_KEY, "").split(",") if g.strip())
    return BootstrapToken(token_id, secret, meta.get("name"), meta.get("uid", ""), expiration,
                          usages, groups, bool(meta.get("deletionTimestamp")))


def secret_expiration(obj):
    """
    The expiration of any bootstrap-token Secret (name and id unchecked, as
    the token cleaner reads it): None, a time, or C{-inf} when unreadable.
    """
    text = decoded_data(obj).get(EXPIRATION_KEY)
    if not text:
        return None
    try:
        return parse_expiration(text)
    except ValueError:
        return float("-inf")
