# -*- test-case-name: tests.registry.test_bootstraptoken -*-
"""
Validation of bootstrap-token Secrets (type C{bootstrap.orch.io/token}).

Upstream stores them unchecked and the authenticator silently ignores a
malformed one; refusing it at write time (422, one error per bad field)
tells the user at once why a token would never work.
"""

from orchd.api.errors import INVALID, FieldError
from orchd.auth import bootstraptoken as bt


def bootstrap_token_errors(obj, data):
    """
    Field errors of a bootstrap-token Secret.

    @param data: its C{data} decoded to text (L{bt.decoded_data}).
    """
    errors = []
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    if namespace != bt.NAMESPACE:
        errors.append(FieldError.invalid(
            "metadata.namespace", namespace, f"bootstrap tokens must be in {bt.NAMESPACE}"))
    token_id = data.get(bt.ID_KEY)
    path = f"data[{bt.ID_KEY}]"
    if token_id is None:
        errors.append(FieldError.required(path))
    elif not bt.TOKEN_ID.fullmatch(token_id):
        errors.append(FieldError.invalid(path, token_id, "must match [a-z0-9]{6}"))
    elif meta.get("name") != bt.secret_name(token_id):
        errors.append(FieldError.invalid(
            "metadata.name", meta.get("name"), f"must be {bt.secret_name(token_id)}"))
    path = f"data[{bt.SECRET_KEY}]"
    if bt.SECRET_KEY not in data:
        errors.append(FieldError.required(path))
    elif not bt.TOKEN_SECRET.fullmatch(data[bt.SECRET_KEY]):
        # The value is a credential: never repeat it.
        errors.append(FieldError(INVALID, path, detail="must match [a-z0-9]{16}"))
    if bt.EXPIRATION_KEY in data:
        try:
            bt.parse_expiration(data[bt.EXPIRATION_KEY])
        except ValueError:
            errors.append(FieldError.invalid(
                f"data[{bt.EXPIRATION_KEY}]", data[bt.EXPIRATION_KEY],
                "must be an RFC 3339 time, e.g. 2030-01-02T15:04:05Z"))
    for key in sorted(data):
        if not key.startswith(bt.USAGE_PREFIX):
            continue
        path = f"data[{key}]"
        if key[len(bt.USAGE_PREFIX):] not in bt.USAGES:
            errors.append(FieldError.not_supported(
                path, key, [bt.USAGE_PREFIX + u for u in bt.USAGES]))
        elif data[key] not in ("true", "false"):
            errors.append(FieldError.not_supported(path, data[key], ["true", "false"]))
    if data.get(bt.EXTRA_GROUPS_KEY):
        path = f"data[{bt.EXTRA_GROUPS_KEY}]"
        for group in data[bt.EXTRA_GROUPS_KEY].split(","):
            if not bt.EXTRA_GROUP.fullmatch(group.strip()):
                errors.append(FieldError.invalid(
                    path, group, f"must match ^{bt.EXTRA_GROUP.pattern}$"))
    return errors
