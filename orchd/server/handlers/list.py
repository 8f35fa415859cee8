# -*- test-case-name: tests.server.test_handlers -*-
"""GET of a collection: selectors, paging and the revision to read at."""

from orchd.api.errors import FieldError, StatusError
from orchd.api.query import is_revision
from orchd.api.selectors import parse_field_selector, parse_label_selector
from orchd.registry.options import ListOptions

_MATCHES = ("", "Exact", "NotOlderThan")


def list_options(scope, watching=False):
    """The L{ListOptions} of the query, validated as the API validates them."""
    options = ListOptions(
        label_selector=parse_label_selector(scope.query("labelSelector")),
        field_selector=parse_field_selector(
            scope.query("fieldSelector"), scope.provider.selectable_fields()),
        limit=scope.query_int("limit"),
        continue_token=scope.query("continue"),
        resource_version=scope.query("resourceVersion"),
        resource_version_match=scope.query("resourceVersionMatch"),
    )
    version = options.resource_version
    if version and version != "0" and not is_revision(version):
        raise StatusError.bad_request(f"invalid resource version: {version}")
    if options.limit < 0:
        options.limit = 0
    if not watching:
        _check_list(scope, options)
    return options


def _check_list(scope, options):
    errors = []
    match = options.resource_version_match
    if match not in _MATCHES:
        errors.append(FieldError.not_supported("resourceVersionMatch", match, _MATCHES))
    elif match:
        if options.continue_token:
            errors.append(FieldError.forbidden(
                "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is "
                "provided"))
        elif not options.resource_version:
            errors.append(FieldError.forbidden(
                "resourceVersionMatch", "resourceVersionMatch is forbidden unless "
                "resourceVersion is provided"))
        elif match == "Exact" and options.resource_version == "0":
            errors.append(FieldError.forbidden(
                "resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden for '
                'resourceVersion "0"'))
    if scope.query_bool("sendInitialEvents", None) is not None:
        errors.append(FieldError.forbidden(
            "sendInitialEvents", "sendInitialEvents is forbidden for list"))
    if errors:
        raise StatusError.invalid("ListOptions", "meta.k8s.io", "", errors)


async def handle(scope):
    result = await scope.provider.list(scope.ctx, list_options(scope))
    if not scope.settings.features.enabled("RemainingItemCount"):
        result["metadata"].pop("remainingItemCount", None)
    scope.respond(200, result)
