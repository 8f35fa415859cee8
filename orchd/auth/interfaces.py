# -*- test-case-name: tests.auth.test_authn,tests.auth.test_authz -*-
"""The authentication and authorization seams."""

import enum

from zope.interface import Interface


class IAuthenticator(Interface):
    """Turns the credentials of a request into a user."""

    def authenticate(request):
        """
        @param request: the twisted.web request.
        @return: (awaitable) the L{orchd.auth.user.UserInfo}, or None when the
            request carries no credentials of this kind.
        @raise orchd.api.errors.StatusError: 401 for credentials of this
            kind that are not valid.
        """


class InvalidToken(Exception):
    """
    A bearer token its authenticator recognises but refuses (expired, bad
    signature, revoked); the text says why, for TokenReview's C{error}.
    """


class ITokenAuthenticator(Interface):
    """Turns one kind of bearer token into a user."""

    def authenticate_token(token, audiences):
        """
        @param token: the bearer token, as sent.
        @param audiences: the audiences the caller accepts (the server's API
            audiences, or those a TokenReview names); tokens that carry
            audiences must name one of them.
        @return: (awaitable) the L{orchd.auth.user.UserInfo}, or None when
            the token is not of this kind.
        @raise InvalidToken: for a token of this kind that is not valid.
        """


class Decision(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"
    NO_OPINION = "no-opinion"


class AuthorizerError(Exception):
    """
    An authorizer could not decide (its remote service failed, say).

    Later modes are still asked; when none allows, the request fails with
    500 rather than 403, so that clients try again instead of giving up.
    """


class IAuthorizer(Interface):
    """Decides whether a user may do what a request asks."""

    def authorize(attributes):
        """
        @param attributes: L{orchd.auth.attributes.Attributes}.
        @return: (awaitable) C{(Decision, reason)}; reason may be "".
        @raise AuthorizerError: when it cannot decide.
        """

    def rules_for(user, namespace):
        """
        What C{user} may do in C{namespace}, for SelfSubjectRulesReview.

        @return: C{(resource_rules, non_resource_rules, incomplete)} where the
            rules are dicts in the API's C{ResourceRule}/C{NonResourceRule}
            shapes, and C{incomplete} is True when this authorizer cannot
            enumerate everything it would allow.
        """
