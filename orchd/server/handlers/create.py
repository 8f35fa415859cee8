# -*- test-case-name: tests.server.test_handlers -*-
"""POST to a collection: a new object; or to a subresource that takes one (a TokenRequest)."""

from orchd.api.errors import StatusError


async def handle(scope):
    info = scope.info
    if info.name and not info.subresource:
        # POST to an item path is not a create; only create-style subresources take it.
        raise StatusError.method_not_allowed("create", scope.kind.resource, scope.kind.group)
    scope.write_options("CreateOptions")
    obj = await scope.read_object()
    if info.subresource:
        # The site routes these to a connector (orchd.registry.catalog.IConnector).
        created = await scope.provider.connect(scope.ctx, info.name, obj)
    else:
        created = await scope.provider.create(scope.ctx, obj)
    scope.respond(201, created)
