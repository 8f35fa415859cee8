# -*- test-case-name: tests.server.test_handlers -*-
"""GET of one object (or of one of its subresources)."""

from orchd.api.errors import StatusError


async def handle(scope):
    if scope.info.subresource and scope.info.subresource not in scope.kind.subresources:
        raise StatusError.not_found(scope.kind.resource, scope.kind.group, scope.info.name)
    obj = await scope.provider.get(scope.ctx, scope.info.name)
    scope.respond(200, obj)
