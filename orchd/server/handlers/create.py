# -*- test-case-name: tests.server.test_handlers -*-
"""POST to a collection: a new object."""

from orchd.api.errors import StatusError


async def handle(scope):
    if scope.info.name:
        # POST to an item path is not a create; only create-style subresources take it.
        raise StatusError.method_not_allowed("create", scope.kind.resource, scope.kind.group)
    scope.write_options("CreateOptions")
    obj = scope.read_object()
    created = await scope.provider.create(scope.ctx, obj)
    scope.respond(201, created)
