# -*- test-case-name: tests.server.test_impersonation -*-
"""
Impersonation: a user may act as another when authorized to.

The C{Impersonate-*} headers (kept as clients send them) name the user,
groups, uid and extra values to act as; each one is checked with verb
C{impersonate} against the authenticated user before the request goes on
as the impersonated one.
"""

import re
from urllib.parse import unquote

from twisted.logger import Logger

from orchd.api.errors import StatusError
from orchd.api.meta import dns1123_label_errors, dns1123_subdomain_errors
from orchd.auth.attributes import Attributes
from orchd.auth.authz.ask import ask
from orchd.auth.interfaces import Decision
from orchd.auth.user import ANONYMOUS, AUTHENTICATED, UNAUTHENTICATED, UserInfo

_PREFIX = b"Impersonate-"
# Header names are canonical ("Impersonate-Uid"): twisted.web stores them so.
_USER = b"Impersonate-User"
_GROUP = b"Impersonate-Group"
_UID = b"Impersonate-Uid"
_EXTRA = b"Impersonate-Extra-"

AUTHENTICATION_GROUP = "authentication.orch.io"
_SA_PREFIX = "system:serviceaccount:"
_BAD_ESCAPE = re.compile(r"%(?![0-9a-fA-F]{2})")
# Control characters but tab, which HTTP allows inside header values.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class ImpersonationFilter:
    """Turns the authenticated user into the one the headers name, if allowed."""

    log = Logger()

    def __init__(self, authorizer):
        self._authorizer = authorizer

    def apply(self, request, user):
        """
        @return: C{user} itself for a request without C{Impersonate-*}
            headers (most requests: answered at once), else an awaitable of
            the user the request acts as (see L{_impersonate}).
        """
        for name, _ in request.requestHeaders.getAllRawHeaders():
            if name.startswith(_PREFIX):
                return self._impersonate(request, user)
        return user

    async def _impersonate(self, request, user):
        """
        @return: the user the request acts as: C{user} itself when the
            headers name nobody.
        @raise StatusError: 403 for a denied check; 400 for groups, uid or
            extras without C{Impersonate-User} (the client's mistake, as
            upstream answers it since it stopped calling it an internal error).
        """
        headers = request.requestHeaders
        name = _first(headers, _USER)
        groups = [_text(_GROUP, g) for g in headers.getRawHeaders(_GROUP, ())]
        uid = _first(headers, _UID)
        extras = [(_extra_key(header), [_text(header, v) for v in values])
                  for header, values in headers.getAllRawHeaders() if header.startswith(_EXTRA)]
        if not name:
            if groups or uid or extras:
                raise StatusError.bad_request(_without_user(groups, extras, uid))
            return user

        service_account = _split_service_account(name)
        if service_account:
            namespace, sa_name = service_account
            await self._check(user, "serviceaccounts", sa_name, namespace=namespace)
        else:
            await self._check(user, "users", name)
        for group in groups:
            await self._check(user, "groups", group)
        for key, values in extras:
            for value in values:
                await self._check(user, "userextras", value, AUTHENTICATION_GROUP,
                                  subresource=key)
        if uid:
            await self._check(user, "uids", uid, AUTHENTICATION_GROUP)

        if not groups and service_account:
            groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
        if name != ANONYMOUS:
            if AUTHENTICATED not in groups and UNAUTHENTICATED not in groups:
                groups.append(AUTHENTICATED)
        elif UNAUTHENTICATED not in groups:
            groups.append(UNAUTHENTICATED)
        extra = {}
        for key, values in extras:
            extra.setdefault(key, []).extend(values)
        acting = UserInfo(name, groups, uid, extra)

        for header in [h for h, _ in headers.getAllRawHeaders() if h.startswith(_EXTRA)]:
            headers.removeHeader(header)
        for header in (_USER, _GROUP, _UID):
            headers.removeHeader(header)
        self.log.debug("{user!r} is impersonating {acting!r}", user=user, acting=acting)
        return acting

    async def _check(self, user, resource, name, group="", namespace="", subresource=""):
        # The impersonation kinds of the authentication group carry version v1.
        attributes = Attributes(user, "impersonate", namespace=namespace, api_group=group,
                                api_version="v1" if group else "", resource=resource,
                                subresource=subresource, name=name)
        decision, reason, error = await ask(self._authorizer, attributes)
        reason = reason or error
        if decision is Decision.ALLOW:
            return
        self.log.debug("Forbidden: {attributes} ({reason})", attributes=attributes, reason=reason)
        why = attributes.describe_denial()
        if reason:
            why = f"{why}: {reason}"
        raise StatusError.forbidden(resource, group, name, why)


def _text(header, value):
    """
    A header value as the name of a user, group, uid or extra value.

    Bytes that are not UTF-8, and control characters, are refused rather
    than replaced: two different values must never become one identity.
    """
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad_header(header, "not valid UTF-8") from None
    if _CONTROL.search(text):
        raise _bad_header(header, "must not contain control characters")
    return text


def _first(headers, name):
    values = headers.getRawHeaders(name)
    return _text(name, values[0]) if values else ""


def _extra_key(header):
    """
    The extra key of a header: lower-cased, then percent-decoded unless
    malformed (kept as sent then, as upstream keeps it).
    """
    key = header[len(_EXTRA):].decode("latin-1").lower()
    if _BAD_ESCAPE.search(key):
        return key
    try:
        return unquote(key, errors="strict")
    except UnicodeDecodeError:
        return key


def _bad_header(header, reason):
    name = header.decode("latin-1")
    return StatusError.bad_request(f'invalid impersonation header "{name}": {reason}')


def _split_service_account(name):
    """C{(namespace, name)} of a valid service-account user name, else None."""
    if not name.startswith(_SA_PREFIX):
        return None
    parts = name[len(_SA_PREFIX):].split(":")
    if len(parts) != 2 or dns1123_label_errors(parts[0]) or dns1123_subdomain_errors(parts[1]):
        return None
    return parts[0], parts[1]


def _without_user(groups, extras, uid):
    """
    The error text for impersonation without a user.

    Worded as upstream prints it: a list of object references, each shown
    as Go formats one, seven fields (kind, namespace, name, uid, apiVersion,
    resourceVersion, fieldPath) joined by spaces.
    """
    version = f"{AUTHENTICATION_GROUP}/v1"
    refs = [("Group", g, "", "") for g in groups]
    refs += [("UserExtra", v, version, key) for key, values in extras for v in values]
    if uid:
        refs.append(("UID", uid, version, ""))
    # Namespace, uid and resourceVersion are empty: the doubled spaces.
    shown = " ".join(f"{{{kind}  {name}  {api_version}  {field_path}}}"
                     for kind, name, api_version, field_path in refs)
    return f"requested [{shown}] without impersonating a user"
