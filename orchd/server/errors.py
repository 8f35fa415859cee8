# -*- test-case-name: tests.server.test_client_errors -*-
"""
The one place an error becomes a response.

A L{StatusError} raised anywhere is written as its v1 C{Status}; a store
that cannot serve (closed while stopping, its disk or cluster gone) is a
503 the client may retry; anything else is a bug: it is logged with its
traceback and the client gets a generic 500 Status, never a Twisted HTML
page.
"""

from twisted.internet.defer import CancelledError
from twisted.logger import Logger

from orchd.api import codecs
from orchd.api.errors import StatusError
from orchd.server.response import write_body
from orchd.storage.interfaces import StoreUnavailableError

log = Logger()

#: Reasons of the answers a connection gives before any request is handled
#: (L{orchd.server.channel}); upstream names none for 414 and 431.
_REFUSAL_REASONS = {400: "BadRequest", 408: "Timeout", 413: "RequestEntityTooLarge",
                    414: "RequestURITooLong", 431: "RequestHeaderFieldsTooLarge"}


def request_gone(request):
    """True when the client left or the response is already complete."""
    return request.finished or getattr(request, "_disconnected", False)


def render_failure(failure, request):
    """Errback for request handling: write the failure as a Status, once."""
    if failure.check(CancelledError) or request_gone(request):
        return None
    if failure.check(StoreUnavailableError):
        error = StatusError.service_unavailable(f"the store cannot serve: {failure.value}")
        log.warn("{method} {path} failed: {message}", method=request.method,
                 path=request.path, message=error.message)
    elif failure.check(StatusError):
        error = failure.value
        if error.code >= 500:
            log.warn("{method} {path} failed: {message}", method=request.method,
                     path=request.path, message=error.message)
    else:
        log.failure("Unhandled error for {method} {path}", failure,
                    method=request.method, path=request.path)
        error = StatusError.internal("an error on the server has prevented the request from "
                                     "succeeding")
    write_status(request, error)
    return None


def write_status(request, error):
    """Write a StatusError: JSON, whatever the client asked for."""
    for name, value in error.headers.items():
        request.setHeader(name.encode("ascii"), value.encode("ascii"))
    status = error.to_status()
    audit = getattr(request, "audit", None)
    if audit is not None:
        audit.status = status
    write_body(request, error.code, b"application/json", codecs.dumps_json(status))


def refusal_body(code, message):
    """The JSON Status body of a request refused by the connection itself."""
    error = StatusError(code, _REFUSAL_REASONS.get(code, ""), message)
    return codecs.dumps_json(error.to_status())
