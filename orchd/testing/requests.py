# -*- test-case-name: tests.testing.test_units -*-
"""The requests a test control plane served, from its audit events."""

import attr


@attr.s(frozen=True, slots=True)
class Request:
    """
    One finished request.

    @ivar body: the request's object (create, update, patch; decoded JSON,
        or the patch document), else None.
    @ivar status: the HTTP status code answered.
    """

    verb = attr.ib()
    path = attr.ib()
    user = attr.ib()
    status = attr.ib()
    body = attr.ib()
    resource = attr.ib()
    subresource = attr.ib()
    namespace = attr.ib()
    name = attr.ib()


def requests_of(events):
    """The L{Request}s of the C{ResponseComplete} (or C{Panic}) events, in order."""
    found = []
    for event in events:
        if event["stage"] not in ("ResponseComplete", "Panic"):
            continue
        ref = event.get("objectRef") or {}
        found.append(Request(
            verb=event["verb"], path=event["requestURI"],
            user=(event.get("user") or {}).get("username"),
            status=(event.get("responseStatus") or {}).get("code"),
            body=_decoded(event.get("requestObject")), resource=ref.get("resource"),
            subresource=ref.get("subresource", ""), namespace=ref.get("namespace"),
            name=ref.get("name")))
    return found


def _decoded(body):
    """The request object as JSON-shaped values (the sink keeps it undecoded until asked)."""
    return body.decode() if hasattr(body, "decode") else body
