# -*- test-case-name: tests.auth.test_authz -*-
"""One way to put a question to any authorizer, synchronous or not."""

import inspect

from orchd.auth.interfaces import AuthorizerError, Decision


async def ask(authorizer, attributes):
    """
    @return: C{(decision, reason, error)}: an authorizer that could not
        decide has no opinion, and C{error} says why (else it is "").
    """
    try:
        result = authorizer.authorize(attributes)
        if inspect.isawaitable(result):
            result = await result
    except AuthorizerError as e:
        return Decision.NO_OPINION, "", str(e)
    decision, reason = result
    return decision, reason, ""
