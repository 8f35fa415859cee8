# -*- test-case-name: tests.server.test_client_errors,tests.server.test_handlers -*-
"""
The one error type of the API: a L{StatusError} carries a v1 C{Status}.

Any layer raises it through the named constructors below, whose messages
follow the wording clients know; C{orchd.server.errors} is the only place
that turns it into a response.
"""

import json

#: Cause types of field errors, as clients match them.
NOT_FOUND = "FieldValueNotFound"
REQUIRED = "FieldValueRequired"
DUPLICATE = "FieldValueDuplicate"
INVALID = "FieldValueInvalid"
NOT_SUPPORTED = "FieldValueNotSupported"
FORBIDDEN = "FieldValueForbidden"
TOO_LONG = "FieldValueTooLong"
TOO_MANY = "FieldValueTooMany"
INTERNAL = "InternalError"
TYPE_INVALID = "FieldValueTypeInvalid"

_TYPE_TEXT = {
    NOT_FOUND: "Not found",
    REQUIRED: "Required value",
    DUPLICATE: "Duplicate value",
    INVALID: "Invalid value",
    NOT_SUPPORTED: "Unsupported value",
    FORBIDDEN: "Forbidden",
    TOO_LONG: "Too long",
    TOO_MANY: "Too many",
    INTERNAL: "Internal error",
    TYPE_INVALID: "Invalid value",
}

# Types whose message never repeats the offending value.
_VALUELESS = {REQUIRED, FORBIDDEN, TOO_LONG, INTERNAL}
_OMIT = object()


def _render_value(value):
    """Render a bad value the way validation messages quote it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class FieldError:
    """
    One validation failure at a field path, such as C{metadata.name}.

    Use the named constructors; C{body} is the message without the path.
    """

    __slots__ = ("type", "field", "value", "detail")

    def __init__(self, type, field, value=_OMIT, detail=""):
        self.type = type
        self.field = field
        self.value = value
        self.detail = detail

    @property
    def body(self):
        text = _TYPE_TEXT[self.type]
        if self.type not in _VALUELESS and self.value is not _OMIT:
            text = f"{text}: {_render_value(self.value)}"
        if self.detail:
            text = f"{text}: {self.detail}"
        return text

    def __str__(self):
        return f"{self.field}: {self.body}"

    def __repr__(self):
        return f"<FieldError {self}>"

    def __eq__(self, other):
        return isinstance(other, FieldError) and str(self) == str(other) and self.type == other.type

    def __hash__(self):
        return hash(str(self))

    @classmethod
    def required(cls, field, detail=""):
        return cls(REQUIRED, field, detail=detail)

    @classmethod
    def invalid(cls, field, value, detail=""):
        return cls(INVALID, field, value, detail)

    @classmethod
    def not_supported(cls, field, value, supported):
        quoted = ", ".join(json.dumps(s) for s in supported)
        return cls(NOT_SUPPORTED, field, value, f"supported values: {quoted}" if supported else "")

    @classmethod
    def forbidden(cls, field, detail):
        return cls(FORBIDDEN, field, detail=detail)

    @classmethod
    def duplicate(cls, field, value):
        return cls(DUPLICATE, field, value)

    @classmethod
    def not_found(cls, field, value):
        return cls(NOT_FOUND, field, value)

    @classmethod
    def too_long(cls, field, max_length):
        return cls(TOO_LONG, field, detail=f"must have at most {max_length} bytes")

    @classmethod
    def too_many(cls, field, actual, max_items):
        return cls(TOO_MANY, field, actual, f"must have at most {max_items} items")

    @classmethod
    def type_invalid(cls, field, value, detail):
        return cls(TYPE_INVALID, field, value, detail)


def aggregate(errors):
    """Join messages as clients expect: one alone, several as C{[a, b]}."""
    messages = []
    for error in errors:
        text = str(error)
        if text not in messages:
            messages.append(text)
    if len(messages) == 1:
        return messages[0]
    return "[" + ", ".join(messages) + "]"


def qualified(resource, group=""):
    """The qualified resource name used in messages: C{pods}, C{deployments.apps}."""
    return f"{resource}.{group}" if group else resource


class StatusError(Exception):
    """
    An API error: HTTP code, machine-readable reason, message and details.

    @ivar headers: extra response headers (e.g. C{Retry-After}).
    @ivar metadata: the Status's ListMeta (e.g. a fresh C{continue} token).
    """

    def __init__(self, code, reason, message, details=None, headers=None, metadata=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}
        self.headers = headers or {}
        self.metadata = metadata or {}

    def __repr__(self):
        return f"<StatusError {self.code} {self.reason}: {self.message}>"

    def to_status(self):
        """The v1 C{Status} object for this error."""
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.metadata),
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details:
            status["details"] = self.details
        status["code"] = self.code
        return status

    # Named constructors, mirroring the wording of the upstream API.

    @classmethod
    def bad_request(cls, message):
        return cls(400, "BadRequest", message)

    @classmethod
    def unauthorized(cls, message="Unauthorized"):
        return cls(401, "Unauthorized", message)

    @classmethod
    def forbidden(cls, resource, group, name, why):
        subject = qualified(resource, group)
        if name:
            message = f'{subject} "{name}" is forbidden: {why}'
        elif subject:
            message = f"{subject} is forbidden: {why}"
        else:
            message = f"forbidden: {why}"
        return cls(403, "Forbidden", message, _details(name, group, resource))

    @classmethod
    def not_found(cls, resource, group, name):
        return cls(
            404, "NotFound", f'{qualified(resource, group)} "{name}" not found',
            _details(name, group, resource),
        )

    @classmethod
    def method_not_allowed(cls, verb, resource, group=""):
        return cls(
            405, "MethodNotAllowed",
            f'{verb} is not supported on resources of kind "{qualified(resource, group)}"',
            _details("", group, resource),
        )

    @classmethod
    def not_acceptable(cls, message):
        return cls(406, "NotAcceptable", message)

    @classmethod
    def already_exists(cls, resource, group, name):
        return cls(
            409, "AlreadyExists", f'{qualified(resource, group)} "{name}" already exists',
            _details(name, group, resource),
        )

    @classmethod
    def generated_name_taken(cls, resource, group, name):
        details = _details(name, group, resource)
        details["retryAfterSeconds"] = 1
        return cls(
            409, "AlreadyExists",
            f'{qualified(resource, group)} "{name}" already exists, the server was not able '
            "to generate a unique name for the object",
            details,
        )

    @classmethod
    def conflict(cls, resource, group, name, why):
        return cls(
            409, "Conflict",
            f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
            _details(name, group, resource),
        )

    @classmethod
    def stale(cls, resource, group, name):
        """The optimistic-concurrency conflict of an update with an old resourceVersion."""
        return cls.conflict(
            resource, group, name,
            "the object has been modified; please apply your changes to the latest version "
            "and try again",
        )

    @classmethod
    def expired(cls, message):
        return cls(410, "Expired", message)

    @classmethod
    def too_large(cls, message):
        return cls(413, "RequestEntityTooLarge", f"Request entity too large: {message}")

    @classmethod
    def unsupported_media_type(cls, content_type, accepted):
        return cls(
            415, "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(accepted),
        )

    @classmethod
    def invalid(cls, kind, group, name, errors):
        """422: C{errors} is a list of L{FieldError}."""
        subject = f"{kind}.{group}" if group else kind
        details = {"name": name, "kind": kind}
        if group:
            details["group"] = group
        details["causes"] = [
            {"reason": e.type, "message": e.body, "field": e.field} for e in errors
        ]
        if not name:
            details.pop("name")
        message = f'{subject} "{name}" is invalid'
        if errors:
            message += f": {aggregate(errors)}"
        return cls(422, "Invalid", message, details)

    @classmethod
    def unprocessable(cls, message):
        """422 without field causes, e.g. a JSON patch that cannot be applied."""
        return cls(422, "Invalid", message)

    @classmethod
    def too_many_requests(cls, message, retry_after=1):
        return cls(
            429, "TooManyRequests", f"Too many requests: {message}",
            {"retryAfterSeconds": retry_after},
            {"Retry-After": str(retry_after)},
        )

    @classmethod
    def internal(cls, message):
        return cls(
            500, "InternalError", f"Internal error occurred: {message}",
            {"causes": [{"message": message}]},
        )

    @classmethod
    def service_unavailable(cls, message):
        return cls(503, "ServiceUnavailable", message)

    @classmethod
    def timeout(cls, message, retry_after=1):
        return cls(504, "Timeout", f"Timeout: {message}", {"retryAfterSeconds": retry_after})


def _details(name, group, resource):
    details = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if resource:
        details["kind"] = resource
    return details
