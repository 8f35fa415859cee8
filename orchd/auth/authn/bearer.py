# -*- test-case-name: tests.auth.test_authn -*-
"""
Bearer tokens: C{Authorization: Bearer <token>}, checked by each token
authenticator in turn (bootstrap tokens, service-account JWTs, ...).

The scheme is matched without regard to case, as upstream; an empty token,
a token every authenticator passes over and a token one of them refuses
are all 401. The same authenticators answer TokenReviews
(L{TokenAuthenticators.review}).
"""

import inspect

from zope.interface import implementer

from orchd.api.errors import StatusError
from orchd.auth.interfaces import IAuthenticator, InvalidToken


class TokenAuthenticators:
    """
    Several L{orchd.auth.interfaces.ITokenAuthenticator}s as one.

    @param authenticators: tried in order; the first to recognise a token decides.
    @param api_audiences: the audiences the API server accepts.
    """

    def __init__(self, authenticators, api_audiences):
        self.authenticators = tuple(authenticators)
        self.api_audiences = tuple(api_audiences)

    def add(self, authenticator):
        """Try C{authenticator} after those already present."""
        self.authenticators += (authenticator,)

    async def review(self, token, audiences=()):
        """
        C{(user, audiences, error)}: who C{token} names (None when nobody),
        the audiences it was accepted for, and why it was refused.
        """
        wanted = tuple(audiences) or self.api_audiences
        errors = []
        for authenticator in self.authenticators:
            try:
                user = authenticator.authenticate_token(token, wanted)
                if inspect.isawaitable(user):
                    user = await user
            except InvalidToken as e:
                if str(e) not in errors:
                    errors.append(str(e))
                continue
            if user is not None:
                return user, wanted, ""
        return None, (), "; ".join(errors) or "invalid bearer token"


@implementer(IAuthenticator)
class BearerAuthenticator:
    """The request authenticator over L{TokenAuthenticators}."""

    def __init__(self, tokens):
        self.tokens = tokens

    async def authenticate(self, request):
        header = request.getHeader(b"authorization")
        if header is None:
            return None
        scheme, _, token = header.decode("latin-1").strip().partition(" ")
        if scheme.lower() != "bearer":
            return None
        token = token.strip()
        if not token:
            raise StatusError.unauthorized()
        user, _, _ = await self.tokens.review(token)
        if user is None:
            raise StatusError.unauthorized()
        return user
