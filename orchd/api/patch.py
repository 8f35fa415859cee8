# -*- test-case-name: tests.api.test_patch -*-
"""
The three patch formats of PATCH requests, applied to plain JSON objects.

JSON patch (RFC 6902) and JSON merge patch (RFC 7386) work on any object;
strategic merge patch (L{orchd.api.strategic}) also needs the kind's patch
metadata (the C{patch_schema} of its KindInfo).  Each function returns a new object and
leaves its arguments alone.  Failures raise L{StatusError} with the codes
clients know: 400 for a document that cannot be read, 422 for one that
cannot be applied.
"""

import jsonpatch
import jsonpointer

from orchd.api.errors import StatusError
from orchd.api.strategic import (
    apply_strategic_merge_patch, copy_json, decode_document, json_kind,
)

__all__ = [
    "apply_json_patch", "apply_merge_patch", "apply_strategic_merge_patch",
    "MAX_JSON_PATCH_OPERATIONS",
]

#: Upstream refuses longer JSON patches with 413.
MAX_JSON_PATCH_OPERATIONS = 10000


# -- JSON patch --------------------------------------------------------------

def apply_json_patch(obj, patch):
    """
    Apply an RFC 6902 operation list (bytes, text or a parsed list).

    @raise StatusError: 400 if the document is not a list of operations, 413
        beyond L{MAX_JSON_PATCH_OPERATIONS}, 422 if an operation fails.
    """
    operations = decode_document(patch, "patch")
    if not isinstance(operations, list):
        raise StatusError.bad_request(
            f"json: cannot unmarshal {json_kind(operations)} into Go value of type jsonpatch.Patch")
    for operation in operations:
        if not isinstance(operation, dict):
            raise StatusError.bad_request(
                f"json: cannot unmarshal {json_kind(operation)} into Go value of type "
                "jsonpatch.Operation")
    if len(operations) > MAX_JSON_PATCH_OPERATIONS:
        raise StatusError.too_large(
            f"The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, "
            f"got {len(operations)}")
    document = copy_json(obj)
    for operation in operations:
        try:
            # The copy keeps later operations from editing the caller's values.
            document = jsonpatch.JsonPatch([copy_json(operation)]).apply(document, in_place=True)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException,
                KeyError, IndexError, TypeError) as e:
            raise StatusError.unprocessable(_json_patch_failure(document, operation, e)) from None
    return document


def _lookup(document, path):
    """Whether C{path} (a JSON pointer) names a value in C{document}."""
    try:
        jsonpointer.JsonPointer(path).resolve(document)
    except (jsonpointer.JsonPointerException, TypeError):
        return False
    return True


def _parent(path):
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _json_patch_failure(document, operation, error):
    """Word a failed operation as upstream (evanphx/json-patch) does."""
    kind = operation.get("op")
    path = operation.get("path")
    source = operation.get("from")
    if kind not in ("add", "remove", "replace", "move", "copy", "test"):
        return f"Unexpected kind: {kind if isinstance(kind, str) else 'unknown'}"
    if not isinstance(path, str):
        return f"{kind} operation failed to decode path"
    parent_ok = _lookup(document, _parent(path))
    if kind == "test":
        if not parent_ok:
            return f"test operation does not apply: is missing path: {path}: missing value"
        return f"testing value {path} failed: test failed"
    if kind in ("add", "remove") and not parent_ok:
        return f'{kind} operation does not apply: doc is missing path: "{path}": missing value'
    if kind == "remove":
        key = jsonpointer.unescape(path.rsplit("/", 1)[-1])
        return (f"error in remove for path: '{path}': Unable to remove nonexistent key: {key}: "
                "missing value")
    if kind == "replace":
        what = "key" if parent_ok else "path"
        return f"replace operation does not apply: doc is missing {what}: {path}: missing value"
    if kind in ("move", "copy"):
        if not isinstance(source, str) or not _lookup(document, source):
            return (f"{kind} operation does not apply: doc is missing from path: {source}: "
                    "missing value")
        if not parent_ok:
            return (f"{kind} operation does not apply: doc is missing destination path: {path}: "
                    "missing value")
    return f"error in {kind} for path: '{path}': {error}"


# -- JSON merge patch ----------------------------------------------------------

def apply_merge_patch(obj, patch):
    """
    Apply an RFC 7386 merge patch: maps merge, C{null} deletes, the rest replaces.

    @raise StatusError: 400 unless the patch is a JSON object.
    """
    patch = decode_document(patch, "patch")
    if not isinstance(patch, dict):
        raise StatusError.bad_request(
            f"Invalid JSON Patch: a merge patch must be a JSON object, not {json_kind(patch)}")
    return _merge_into(copy_json(obj) if isinstance(obj, dict) else {}, patch)


def _merge_into(target, patch):
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            current = target.get(key)
            target[key] = _merge_into(current if isinstance(current, dict) else {}, value)
        else:
            target[key] = copy_json(value)
    return target
