# -*- test-case-name: tests.registry.test_options -*-
"""
List and delete options, and the opaque continue token of paged lists.

The token records the revision of the first page and the key to resume
from, so every page of a list reads one consistent snapshot.
"""

import base64

import orjson

from orchd.api.errors import StatusError
from orchd.api.query import INT64_MAX

_TOKEN_VERSION = "meta.k8s.io/v1"


class ListOptions:
    """Selectors, paging and revision choice of a list (or, later, a watch)."""

    __slots__ = ("label_selector", "field_selector", "limit", "continue_token",
                 "resource_version", "resource_version_match")

    def __init__(self, label_selector=None, field_selector=None, limit=0, continue_token="",
                 resource_version="", resource_version_match=""):
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.limit = limit
        self.continue_token = continue_token
        self.resource_version = resource_version
        self.resource_version_match = resource_version_match


class DeleteOptions:
    """Preconditions and policy of a delete."""

    __slots__ = ("uid", "resource_version", "propagation_policy", "grace_period_seconds",
                 "orphan_dependents")

    def __init__(self, uid=None, resource_version=None, propagation_policy=None,
                 grace_period_seconds=None, orphan_dependents=None):
        self.uid = uid
        self.resource_version = resource_version
        self.propagation_policy = propagation_policy
        self.grace_period_seconds = grace_period_seconds
        self.orphan_dependents = orphan_dependents


def encode_continue(revision, start_key, remaining=None):
    """
    An opaque token for the page that starts at C{start_key} of snapshot C{revision}.

    @param remaining: how many keys of the snapshot come from C{start_key} on,
        when known: every page reads the same snapshot, so the count taken
        for the first page serves all the following ones.
    """
    data = {"v": _TOKEN_VERSION, "rv": revision, "start": start_key}
    if remaining is not None:
        data["remaining"] = remaining
    return base64.urlsafe_b64encode(orjson.dumps(data)).decode("ascii").rstrip("=")


def decode_continue(token):
    """
    @return: C{(revision, start_key, remaining or None)}; revision 0 (from a
        token handed out after the snapshot expired) means the latest.
    @raise StatusError: 400 for a token this server did not make.
    """
    try:
        padded = token + "=" * (-len(token) % 4)
        data = orjson.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        if data.get("v") != _TOKEN_VERSION:
            raise ValueError("unknown version")
        revision, start = data["rv"], data["start"]
        remaining = data.get("remaining")
        if not _in_range(revision) or not isinstance(start, str):
            raise ValueError("malformed")
        if remaining is not None and not _in_range(remaining):
            raise ValueError("malformed count")
        if start.startswith("/") or "/.." in start or start.startswith(".."):
            raise ValueError("invalid start key")
        return revision, start, remaining
    except (ValueError, KeyError, TypeError, AttributeError, orjson.JSONDecodeError) as e:
        raise StatusError.bad_request(f"continue key is not valid: {e}") from None


def _in_range(number):
    """A count or revision as tokens carry them: an int64 at least 0 (etcd's range)."""
    return type(number) is int and 0 <= number <= INT64_MAX
