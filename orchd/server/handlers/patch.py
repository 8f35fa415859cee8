# -*- test-case-name: tests.server.test_handlers -*-
"""PATCH of an object: JSON patch, merge patch or strategic merge patch."""

from orchd.api import codecs
from orchd.api.errors import FieldError, StatusError
from orchd.api.patch import (
    apply_json_patch, apply_merge_patch, apply_strategic_merge_patch, patch_schema_for,
)

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH)


def _patcher(scope, media, body):
    """The function that turns the current object into the patched one."""
    if media == JSON_PATCH:
        operations = codecs.loads_json(body)
        return lambda current: apply_json_patch(current, operations)
    document = codecs.loads_json(body)
    if media == MERGE_PATCH:
        return lambda current: apply_merge_patch(current, document)
    schema = patch_schema_for(scope.kind.group, scope.kind.kind)
    return lambda current: apply_strategic_merge_patch(current, document, schema)


async def handle(scope):
    info = scope.info
    if not info.name:
        raise StatusError.method_not_allowed("patch", scope.kind.resource, scope.kind.group)
    media = codecs.media_type(scope.request.getHeader(b"content-type") or b"")
    if media not in PATCH_TYPES:
        raise StatusError.unsupported_media_type(media, PATCH_TYPES)
    if scope.query("force"):
        raise StatusError.invalid("PatchOptions", "meta.k8s.io", "", [FieldError.forbidden(
            "force", "may not be specified for non-apply patch")])
    scope.write_options("PatchOptions")
    apply = _patcher(scope, media, scope.body())

    def patch_and_check(current):
        patched = apply(current)
        if isinstance(patched, dict):
            scope.check_kind(patched)
        return patched

    result = await scope.provider.patch(scope.ctx, info.name, patch_and_check, info.subresource)
    scope.respond(200, result)
