# -*- test-case-name: tests.server.test_handlers -*-
"""GET of one object (or of one of its subresources)."""


async def handle(scope):
    obj = await scope.provider.get(scope.ctx, scope.info.name)
    scope.respond(200, obj, stored=True)
