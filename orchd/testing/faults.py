# -*- test-case-name: tests.testing.test_units -*-
"""
Injected failures: the next matching requests answer an error status.

A L{Faults} queue wraps the API server's resource handler only while a
fault is pending, so a control plane without faults serves requests
exactly as the real server does. The check runs after authentication and
authorization, so the request is recorded with the injected status.
"""

import attr

from orchd.api.errors import StatusError

#: The reason of each status code a test commonly injects (upstream's).
REASONS = {400: "BadRequest", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
           410: "Expired", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
           503: "ServiceUnavailable", 504: "Timeout"}


@attr.s(slots=True)
class Fault:
    """One pending fault: what it matches and how many more times it fires."""

    verb = attr.ib()
    resource = attr.ib()
    code = attr.ib()
    times = attr.ib()
    subresource = attr.ib(default="")
    namespace = attr.ib(default=None)
    name = attr.ib(default=None)

    def matches(self, info):
        return (info.verb == self.verb and info.resource == self.resource
                and (info.subresource or "") == self.subresource
                and (self.namespace is None or info.namespace == self.namespace)
                and (self.name is None or info.name == self.name))

    def error(self):
        reason = REASONS.get(self.code, "InternalError")
        message = f"injected by fail_next: {self.verb} {self.resource} answers {self.code}"
        headers = {"Retry-After": "1"} if self.code == 429 else None
        return StatusError(self.code, reason, message, headers=headers)


class Faults:
    """
    The pending faults of one API server.

    @param server: the L{orchd.server.site.APIServer} whose C{_serve_resource}
        is wrapped while a fault is pending.
    """

    def __init__(self, server):
        self.server = server
        self.pending = []

    def add(self, verb, resource, code, times=1, subresource="", namespace=None, name=None):
        if not isinstance(code, int) or not 400 <= code <= 599:
            raise ValueError(f"code must be an HTTP error status (400-599), not {code!r}")
        if times < 1:
            raise ValueError(f"times must be at least 1, not {times!r}")
        self.pending.append(Fault(verb, resource, code, times, subresource, namespace, name))
        if "_serve_resource" not in vars(self.server):
            original = self.server._serve_resource

            async def serve(request, info, user, found):
                self._check(info)
                await original(request, info, user, found)
            self.server._serve_resource = serve

    def _check(self, info):
        for fault in self.pending:
            if fault.matches(info):
                fault.times -= 1
                if fault.times == 0:
                    self.pending.remove(fault)
                    if not self.pending:
                        self.clear()
                raise fault.error()

    def clear(self):
        """Drop every pending fault and unwrap the handler."""
        self.pending.clear()
        vars(self.server).pop("_serve_resource", None)
