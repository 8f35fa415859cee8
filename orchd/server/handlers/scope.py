# -*- test-case-name: tests.server.test_handlers -*-
"""
What every verb handler needs of one request: its body, options and answer.

Handlers never know which kind they serve; the scope hands them the
resource's registry (C{provider}) and reads the request uniformly.
"""

from orchd.api import codecs
from orchd.api.errors import FieldError, StatusError
from orchd.api.fieldmanager import (
    apply_manager_required,
    default_manager,
    field_manager_errors,
)
from orchd.api.fieldvalidation import (
    duplicate_field_message,
    prune_unknown_fields,
    strict_error,
    unknown_field_message,
)
from orchd.api.groups import canonical_api_version, in_spelling
from orchd.api.strictdecode import duplicate_fields
from orchd.registry.context import RequestContext
from orchd.server import negotiation
from orchd.server.requestlimits import MAX_BODY
from orchd.server.response import wants_pretty, write_body

_TRUE = (b"true", b"1", b"True")
_OPTIONS_GROUP = "meta.k8s.io"  # [COMPAT] clients match the option kinds' group
_VALIDATIONS = ("Ignore", "Warn", "Strict")
_DEFAULT_VALIDATION = "Warn"


class RequestScope:
    """
    @ivar info: the L{orchd.server.requestinfo.RequestInfo}.
    @ivar kind: the L{orchd.api.kinds.KindInfo} of the resource.
    @ivar provider: the resource's registry (e.g. a generic ResourceStore).
    """

    __slots__ = ("request", "info", "user", "kind", "provider", "ctx", "settings",
                 "field_validation", "body_spelling")

    def __init__(self, request, info, user, kind, provider, settings):
        self.request = request
        self.info = info
        self.user = user
        self.kind = kind
        self.provider = provider
        self.settings = settings
        self.field_validation = _DEFAULT_VALIDATION
        #: The apiVersion the body spelled, when not the canonical one.
        self.body_spelling = None
        self.ctx = RequestContext(user, info.namespace if kind.namespaced else "")

    # -- query --------------------------------------------------------------

    def query(self, name, default=""):
        values = self.request.args.get(name.encode("ascii"))
        if not values:
            return default
        return values[0].decode("utf-8", "replace")

    def query_bool(self, name):
        values = self.request.args.get(name.encode("ascii"))
        return bool(values) and values[0] in _TRUE

    def query_int(self, name, default=0):
        text = self.query(name)
        if not text:
            return default
        try:
            return int(text)
        except ValueError:
            raise StatusError.bad_request(
                f'invalid value for query parameter "{name}": "{text}" is not an integer'
            ) from None

    def write_options(self, options_kind, apply=False):
        """
        Read C{dryRun}, C{fieldManager} and C{fieldValidation} of a write.

        The manager defaults to one derived from the User-Agent, as upstream.

        @param options_kind: C{CreateOptions}, C{UpdateOptions}, ... for messages.
        @param apply: True for server-side apply, where fieldManager is required.
        """
        errors = []
        dry_run = self.request.args.get(b"dryRun", [])
        for value in dry_run:
            if value != b"All":
                errors.append(FieldError.not_supported(
                    "dryRun", value.decode("utf-8", "replace"), ["All"]))
        manager = self.query("fieldManager") or None
        if manager is not None:
            errors += field_manager_errors(manager)
        elif apply:
            raise apply_manager_required()
        validation = self.query("fieldValidation") or _DEFAULT_VALIDATION
        if validation not in _VALIDATIONS:
            errors.append(FieldError.not_supported("fieldValidation", validation, _VALIDATIONS))
        if errors:
            raise StatusError.invalid(options_kind, _OPTIONS_GROUP, "", errors)
        self.ctx.dry_run = bool(dry_run)
        self.ctx.field_manager = manager or default_manager(
            (self.request.getHeader(b"user-agent") or b"").decode("utf-8", "replace"))
        self.field_validation = validation

    # -- body ---------------------------------------------------------------

    def body(self):
        """The raw request body, refused past the size limit (413)."""
        if getattr(self.request, "too_large", False):
            raise StatusError.too_large(f"limit is {MAX_BODY}")
        self.request.content.seek(0)
        data = self.request.content.read()
        if len(data) > MAX_BODY:
            raise StatusError.too_large(f"limit is {MAX_BODY}")
        return data

    def read_object(self):
        """The body as an object of this resource's kind, checked field by field."""
        body = self.body()
        content_type = self.request.getHeader(b"content-type")
        duplicates = self.duplicates(body, content_type)
        obj = codecs.decode_body(content_type, body)
        self.check_kind(obj)
        self.check_fields(obj, duplicates)
        return obj

    def duplicates(self, body, content_type):
        """Messages for keys repeated in a body (skipped when they would be ignored)."""
        media = codecs.media_type(content_type) if content_type else codecs.JSON
        if self.field_validation == "Ignore" or media == codecs.PROTOBUF:
            # A protobuf body cannot name a field twice in a way that matters.
            return []
        return [duplicate_field_message(path) for path in duplicate_fields(body, media)]

    def check_fields(self, obj, messages=()):
        """
        Drop fields the kind does not know, then report them as the request's
        C{fieldValidation} asks: not at all, as warnings, or as a 400.
        """
        kind = self.kind
        unknown = prune_unknown_fields(obj, kind.group, kind.version, kind.kind)
        messages = list(messages) + [unknown_field_message(path) for path in unknown]
        if not messages or self.field_validation == "Ignore":
            return
        if self.field_validation == "Strict":
            raise strict_error(kind.kind, kind.version, messages)
        for message in messages:
            self.ctx.warn(message)

    def check_kind(self, obj, kind=None):
        """Fill in or check C{apiVersion} and C{kind} against the URL (400 on mismatch)."""
        info = self.kind
        kind = kind or info.kind
        api_version = obj.get("apiVersion")
        if api_version:
            canonical = canonical_api_version(api_version)
            if canonical != api_version:
                self.body_spelling = api_version
            api_version = obj["apiVersion"] = canonical
        if not api_version:
            obj["apiVersion"] = info.api_version
        elif api_version != info.api_version:
            raise StatusError.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({info.api_version})")
        body_kind = obj.get("kind")
        if not body_kind:
            obj["kind"] = kind
        elif body_kind != kind:
            raise StatusError.bad_request(
                f"the kind in the data ({body_kind}) does not match the expected kind ({kind})")

    # -- answer -------------------------------------------------------------

    @property
    def spelling(self):
        """The apiVersion to answer with when the client used an upstream group name."""
        info = self.info
        if info.requested_group == info.api_group:
            if self.kind.group != info.api_group:
                # A subresource of another group's kind (serviceaccounts/token takes
                # a TokenRequest): only the body says how the client spells it.
                return self.body_spelling
            return None
        return f"{info.requested_group}/{info.api_version}"

    def respond(self, code, obj, stored=False):
        """
        Answer with C{obj}, as a Table when the client asked for one.

        @param stored: C{obj} is stored state as read (see L{codecs.encode}).
        """
        fmt = negotiation.choose(self.request, info=self.kind)
        obj = negotiation.present(self.kind, fmt, obj, self.provider.clock.seconds())
        spelling = self.spelling
        if spelling is not None and obj.get("apiVersion") == self.kind.api_version:
            obj = in_spelling(obj, spelling)
            stored = False
        body = codecs.encode(obj, fmt.codec, wants_pretty(self.request), stored)
        write_body(self.request, code, fmt.media, body, self.ctx.warnings)
