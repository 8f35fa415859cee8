# -*- test-case-name: tests.server.test_handlers -*-
"""PUT of an object or of one of its subresources."""

from orchd.api.errors import StatusError


async def handle(scope):
    info = scope.info
    if not info.name:
        raise StatusError.method_not_allowed("update", scope.kind.resource, scope.kind.group)
    scope.write_options("UpdateOptions")
    obj = await scope.read_object()
    result, created = await scope.provider.update(scope.ctx, info.name, obj, info.subresource)
    scope.respond(201 if created else 200, result)
