# -*- test-case-name: tests.server.test_handlers -*-
"""Writing responses: objects in the negotiated media type, and plain text."""

from orchd.api import codecs
from orchd.api.query import query_parse_bool
from orchd.server.negotiation import negotiate


def wants_pretty(request):
    """True when C{pretty} asks for indented output, read as upstream reads it."""
    return query_parse_bool(request.args, "pretty")


def write_object(request, code, obj, warnings=()):
    """Answer with C{obj} encoded as the client's Accept header asks."""
    media = negotiate(request.getHeader(b"accept"))
    body = codecs.encode(obj, media, wants_pretty(request))
    write_body(request, code, media.encode("ascii"), body, warnings)


def write_body(request, code, content_type, body, warnings=()):
    audit = getattr(request, "audit", None)
    if audit is not None and audit.wants_response:
        audit.response = (content_type, body)
    request.setResponseCode(code)
    request.setHeader(b"content-type", content_type)
    request.setHeader(b"cache-control", b"no-cache, private")
    for text in warnings:
        request.responseHeaders.addRawHeader(b"warning", warning_header(text))
    request.setHeader(b"content-length", b"%d" % len(body))
    request.write(body)
    request.finish()


def write_text(request, code, text):
    """Plain-text answers (health checks), as operators read them."""
    body = text.encode("utf-8")
    request.setResponseCode(code)
    request.setHeader(b"content-type", b"text/plain; charset=utf-8")
    request.setHeader(b"x-content-type-options", b"nosniff")
    request.setHeader(b"content-length", b"%d" % len(body))
    request.write(body)
    request.finish()


def warning_header(text):
    """An RFC 7234 C{Warning} value: code 299, agent C{-}, quoted text."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'.encode("utf-8")
