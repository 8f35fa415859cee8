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
from orchd.api.proto.ranges import integer_errors
from orchd.api.query import query_bool, query_int, query_text
from orchd.api.strategic import json_kind
from orchd.registry.context import RequestContext
from orchd.server import negotiation
from orchd.server.response import wants_pretty, write_body

#: Larger JSON and protobuf bodies are decoded on the worker thread
#: (L{orchd.server.offload}), and YAML bodies always are: a few kilobytes
#: of YAML may expand through aliases into hundreds of thousands of values.
INLINE_DECODE = 64 * 1024
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
        self.ctx = RequestContext(user, info.namespace if kind.namespaced else "",
                                  audit=getattr(request, "audit", None),
                                  timing=getattr(request, "timing", None))
        if kind.deprecation:
            # A deprecated custom resource version: every request to it says so.
            self.ctx.warn(kind.deprecation)

    # -- query --------------------------------------------------------------

    def query(self, name, default=""):
        """The first value of query parameter C{name} as text (400 if not UTF-8, or NUL)."""
        return query_text(self.request.args, name, default)

    def query_bool(self, name, default=False):
        """
        The first value of C{name} as upstream converts it to a bool (400 if
        not UTF-8, or NUL); C{default} when absent (None: keep absent apart).
        """
        return query_bool(self.request.args, name, default)

    def query_int(self, name, default=0):
        """The first value of C{name} as an int64, as upstream parses it (400 if not)."""
        return query_int(self.request.args, name, default)

    def write_options(self, options_kind, apply=False):
        """
        Read C{dryRun}, C{fieldManager} and C{fieldValidation} of a write.

        The manager defaults to one derived from the User-Agent, as upstream.

        @param options_kind: C{CreateOptions}, C{UpdateOptions}, ... for messages.
        @param apply: True for server-side apply, where fieldManager is required.
        """
        errors = []
        args = self.request.args
        # Most writes have no query at all: nothing to read in it.
        dry_run = args.get(b"dryRun", []) if args else ()
        for value in dry_run:
            if value != b"All":
                errors.append(FieldError.not_supported(
                    "dryRun", value.decode("utf-8", "replace"), ["All"]))
        manager = (self.query("fieldManager") or None) if args else None
        if manager is not None:
            errors += field_manager_errors(manager)
        elif apply:
            raise apply_manager_required()
        validation = (self.query("fieldValidation") if args else "") or _DEFAULT_VALIDATION
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
        """The raw request body (the connection refuses one past C{MAX_BODY} with 413)."""
        self.request.content.seek(0)
        return self.request.content.read()

    async def read_object(self):
        """The body as an object of this resource's kind, checked field by field."""
        body = self.body()
        syntax = codecs.body_syntax(self.request.getHeader(b"content-type"))
        obj, duplicates = await self.decode(body, syntax)
        obj = codecs.must_be_object(obj)
        if self.ctx.audit is not None:
            self.ctx.audit.request_object(obj)
        self.check_kind(obj)
        self.check_fields(obj, duplicates)
        return obj

    async def decode(self, body, syntax, duplicates=True):
        """
        Decode a body of C{syntax} (see L{codecs.decode}), off the reactor
        thread when it is large.

        @param duplicates: look for repeated keys (unless C{fieldValidation}
            ignores them).
        @return: C{(value, messages of keys repeated in it)}.
        """
        duplicates = duplicates and self.field_validation != "Ignore"
        if syntax == codecs.YAML or len(body) > INLINE_DECODE:
            value, repeated = await self.settings.offload(codecs.decode, body, syntax, duplicates)
        else:
            value, repeated = codecs.decode(body, syntax, duplicates)
        return value, [duplicate_field_message(path) for path in repeated]

    def check_fields(self, obj, messages=()):
        """
        Drop fields the kind does not know, then report them as the request's
        C{fieldValidation} asks: not at all, as warnings, or as a 400. Values
        of integer fields out of their type's range are invalid (422).
        """
        kind = self.kind
        errors = integer_errors(obj, kind.api_version, kind.kind)
        if errors:
            name = (obj.get("metadata") or {}).get("name") or self.info.name
            raise StatusError.invalid(kind.kind, kind.group, str(name), errors)
        unknown = prune_unknown_fields(obj, kind)
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
        for field in ("apiVersion", "kind"):
            value = obj.get(field)
            if value is not None and type(value) is not str:
                raise StatusError.bad_request(
                    f"json: cannot unmarshal {json_kind(value)} into Go struct field "
                    f"TypeMeta.{field} of type string")
        if api_version:
            canonical = canonical_api_version(api_version)
            if canonical != api_version:
                self.body_spelling = api_version
            api_version = obj["apiVersion"] = canonical
        if not api_version:
            obj["apiVersion"] = info.api_version
        elif api_version != info.api_version and api_version not in getattr(
                self.provider, "accepted_api_versions", ()):
            # A provider may take older versions of its kind (pods/eviction: v1beta1).
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
