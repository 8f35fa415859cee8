# -*- test-case-name: tests.auth.test_authn -*-
"""
Several authenticators as one: the first that recognises the credentials wins.

Credentials that one authenticator rejects fail the request (401) unless a
later one accepts them; a request with no credentials at all is anonymous
when anonymous access is on.
"""

import inspect

from zope.interface import implementer

from orchd.api.errors import StatusError
from orchd.auth.interfaces import IAuthenticator
from orchd.auth.user import ANONYMOUS_USER, UserInfo


@implementer(IAuthenticator)
class UnionAuthenticator:
    def __init__(self, authenticators, anonymous=True):
        self._authenticators = tuple(authenticators)
        self._anonymous = anonymous

    async def authenticate(self, request):
        rejected = None
        for authenticator in self._authenticators:
            try:
                user = authenticator.authenticate(request)
                # Most answer at once (a client certificate): no await, and
                # no ABC check of a user.
                if user is not None and type(user) is not UserInfo and inspect.isawaitable(user):
                    user = await user
            except StatusError as e:
                if e.code != 401:
                    raise
                rejected = e
                continue
            if user is not None:
                return user
        if rejected is not None:
            raise rejected
        if self._anonymous:
            return ANONYMOUS_USER
        raise StatusError.unauthorized()
