# -*- test-case-name: tests.server.test_handlers -*-
"""
DELETE of one object, or of every selected object of a collection.

An object that stays (finalizers, grace) is answered as it now is; one
removed at once is answered with a C{Status}, or for the kinds whose
upstream DELETE returns the object (KindInfo C{delete_answers_object}),
with the object as it was last.
"""

from orchd.api import codecs
from orchd.api.errors import FieldError, StatusError
from orchd.registry.options import DeleteOptions
from orchd.server.handlers.list import list_options

_POLICIES = ("Orphan", "Background", "Foreground")


async def delete_options(scope):
    """The L{DeleteOptions} of the body (a DeleteOptions object) and the query."""
    body = scope.body()
    document = {}
    if body.strip():
        syntax = codecs.body_syntax(scope.request.getHeader(b"content-type"))
        document = codecs.must_be_object((await scope.decode(body, syntax, False))[0])
    preconditions = document.get("preconditions") or {}
    if not isinstance(preconditions, dict):
        raise StatusError.bad_request("preconditions must be an object")
    policy = document.get("propagationPolicy") or scope.query("propagationPolicy") or None
    grace = document.get("gracePeriodSeconds")
    if grace is None and scope.query("gracePeriodSeconds"):
        grace = scope.query_int("gracePeriodSeconds")
    errors = []
    if policy is not None and policy not in _POLICIES:
        errors.append(FieldError.not_supported("propagationPolicy", policy, _POLICIES))
    orphan = document.get("orphanDependents")
    if orphan is None:
        orphan = scope.query_bool("orphanDependents", None)
    if orphan is not None and policy is not None:
        errors.append(FieldError.invalid(
            "propagationPolicy", policy, "orphanDependents and deletionPropagation cannot be "
            "both set"))
    dry_run = document.get("dryRun") or []
    if dry_run:
        if dry_run != ["All"]:
            errors.append(FieldError.not_supported("dryRun", dry_run, ["All"]))
        scope.ctx.dry_run = True
    # A negative grace period is read as 1 s further on (registry/gracefuldelete.py), as
    # upstream; only what is not an integer is refused.
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int)):
        errors.append(FieldError.invalid("gracePeriodSeconds", grace, "must be an integer"))
    if errors:
        raise StatusError.invalid("DeleteOptions", "meta.k8s.io", "", errors)
    if orphan is not None:
        policy = "Orphan" if orphan else "Background"
    return DeleteOptions(
        uid=preconditions.get("uid"), resource_version=preconditions.get("resourceVersion"),
        propagation_policy=policy, grace_period_seconds=grace, orphan_dependents=orphan,
    )


async def handle(scope):
    info, kind = scope.info, scope.kind
    if info.subresource:
        raise StatusError.method_not_allowed("delete", kind.resource, kind.group)
    scope.write_options("DeleteOptions")
    options = await delete_options(scope)
    obj, removed = await scope.provider.delete(scope.ctx, info.name, options)
    if not removed:
        # 202 only for the legacy orphanDependents=false, as clients expect.
        scope.respond(202 if options.orphan_dependents is False else 200, obj)
        return
    if kind.delete_answers_object:
        scope.respond(200, obj)
        return
    details = {"name": info.name}
    if kind.group:
        details["group"] = kind.group
    details["kind"] = kind.resource
    details["uid"] = obj["metadata"].get("uid", "")
    scope.respond(200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                        "status": "Success", "details": details})


async def handle_collection(scope):
    scope.write_options("DeleteOptions")
    options = await delete_options(scope)
    result = await scope.provider.delete_collection(scope.ctx, list_options(scope), options)
    scope.respond(200, result)
