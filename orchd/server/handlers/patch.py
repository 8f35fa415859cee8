# -*- test-case-name: tests.server.test_handlers -*-
"""
PATCH of an object: JSON patch, merge patch, strategic merge patch, or
server-side apply (C{application/apply-patch+yaml}), which may also create.
"""

from orchd.api import codecs
from orchd.api.errors import FieldError, StatusError
from orchd.api.patch import (
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)


def _patcher(scope, media, document):
    """The function that turns the current object into the patched one."""
    if media == JSON_PATCH:
        return lambda current: apply_json_patch(current, document)
    if media == MERGE_PATCH:
        return lambda current: apply_merge_patch(current, document)
    schema = scope.kind.patch_schema
    return lambda current: apply_strategic_merge_patch(current, document, schema)


async def _applied_config(scope, body):
    """The configuration of a server-side apply: a whole object of this kind and name."""
    applied, messages = await scope.decode(body, codecs.YAML)
    if not isinstance(applied, dict):
        raise StatusError.bad_request("the apply configuration must be an object")
    for field in ("apiVersion", "kind"):
        if not applied.get(field):
            raise StatusError.bad_request(f"{field} must be set in an apply configuration")
    scope.check_kind(applied)
    meta = applied.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        raise StatusError.bad_request("metadata.name must be set in an apply configuration")
    if meta["name"] != scope.info.name:
        raise StatusError.bad_request(
            f"the name of the object ({meta['name']}) does not match the name on the URL "
            f"({scope.info.name})")
    scope.check_fields(applied, messages)
    return applied


async def handle(scope):
    info = scope.info
    if not info.name:
        raise StatusError.method_not_allowed("patch", scope.kind.resource, scope.kind.group)
    media = codecs.media_type(scope.request.getHeader(b"content-type") or b"")
    if media not in PATCH_TYPES:
        raise StatusError.unsupported_media_type(media, PATCH_TYPES)
    if media == STRATEGIC_PATCH and not scope.kind.strategic_patch:
        # Custom resources: kubectl then falls back to a merge patch.
        raise StatusError.unsupported_media_type(media, (JSON_PATCH, MERGE_PATCH, APPLY_PATCH))
    apply = media == APPLY_PATCH
    force = scope.query_bool("force", None)
    if force is not None and not apply:
        raise StatusError.invalid("PatchOptions", "meta.k8s.io", "", [FieldError.forbidden(
            "force", "may not be specified for non-apply patch")])
    scope.write_options("PatchOptions", apply=apply)
    body = scope.body()
    if apply:
        applied = await _applied_config(scope, body)
        result, created = await scope.provider.apply(
            scope.ctx, info.name, applied, bool(force), info.subresource)
        scope.respond(201 if created else 200, result)
        return
    document, messages = await scope.decode(body, codecs.JSON)
    patch = _patcher(scope, media, document)

    def patch_and_check(current):
        patched = patch(current)
        if isinstance(patched, dict):
            scope.check_kind(patched)
            scope.check_fields(patched, messages)
        return patched

    result = await scope.provider.patch(scope.ctx, info.name, patch_and_check, info.subresource)
    scope.respond(200, result)
