# -*- test-case-name: tests.server.test_handlers,tests.auth.test_authz -*-
"""Authorization of a request: allowed, or a 403 worded as clients know it."""

from twisted.logger import Logger

from orchd.api.errors import StatusError
from orchd.auth.attributes import Attributes
from orchd.auth.interfaces import AuthorizerError, Decision


class AuthorizationFilter:
    """Asks the authorizer union; anything but an allow is 403."""

    log = Logger()

    def __init__(self, authorizer):
        self._authorizer = authorizer

    async def check(self, user, info, audit=None):
        """
        @param audit: the request's L{orchd.server.audit.record.AuditRecord},
            if audited: it gets the decision and reason as annotations.
        """
        attributes = Attributes.from_request_info(user, info)
        try:
            decision, reason = await self._authorizer.authorize(attributes)
        except AuthorizerError as e:
            raise StatusError.internal(str(e)) from None
        if audit is not None:
            audit.authorized(decision is Decision.ALLOW, reason)
        if decision is Decision.ALLOW:
            return attributes
        self.log.debug("Forbidden: {attributes} ({reason})", attributes=attributes, reason=reason)
        why = attributes.describe_denial()
        if reason:
            why = f"{why}: {reason}"
        if info.is_resource_request:
            raise StatusError.forbidden(info.resource, info.api_group, info.name, why)
        raise StatusError.forbidden("", "", "", why)
