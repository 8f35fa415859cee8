# -*- test-case-name: tests.admission.test_chain -*-
"""
Admission: plugins that may change (mutating) or refuse (validating) a write.

They run inside the generic store: mutating plugins before the kind's
strategy validates, validating plugins after it, both before storage.
"""

from zope.interface import Interface

CREATE = "CREATE"
UPDATE = "UPDATE"
DELETE = "DELETE"


class AdmissionAttributes:
    """
    The write under review.

    @ivar obj: the new object (None for DELETE); mutating plugins may edit it.
    @ivar old: the stored object (None for CREATE).
    @ivar warn: a callable taking a text for the response's C{Warning} headers.
    @ivar audit_annotation: a callable C{(key, value)} annotating the
        request's audit event; use L{add_audit_annotation}.
    @ivar webhook_time: a callable taking the seconds spent calling admission
        webhooks, which the request's SLI latency leaves out.
    """

    __slots__ = ("operation", "info", "namespace", "name", "subresource", "obj", "old",
                 "user", "dry_run", "warn", "audit_annotation", "webhook_time")

    def __init__(self, operation, info, namespace, name, obj, old, user, subresource="",
                 dry_run=False, warn=None, audit_annotation=None, webhook_time=None):
        self.operation = operation
        self.info = info
        self.namespace = namespace
        self.name = name
        self.obj = obj
        self.old = old
        self.user = user
        self.subresource = subresource
        self.dry_run = dry_run
        self.warn = warn if warn is not None else _ignore
        self.audit_annotation = audit_annotation
        self.webhook_time = webhook_time if webhook_time is not None else _ignore

    @classmethod
    def of_request(cls, ctx, operation, info, name, obj, old, subresource=""):
        """
        The attributes of a write made in C{ctx}, an
        L{orchd.registry.context.RequestContext}: its namespace, user and dry
        run, and where its warnings, audit annotations and webhook time go.
        """
        return cls(operation, info, ctx.namespace, name, obj, old, ctx.user, subresource,
                   ctx.dry_run, ctx.warn, ctx.add_audit_annotation, ctx.add_webhook_time)

    def add_audit_annotation(self, key, value):
        """
        Add C{key: value} to the annotations of the request's audit event, as
        upstream's C{AddAnnotation}: how a plugin records what it found
        without changing the object (pod security's audit violations).
        Nothing happens when the request is not audited.
        """
        if self.audit_annotation is not None:
            self.audit_annotation(key, value)


def _ignore(value):
    """Where a warning or a webhook's time goes when nobody takes it."""


class IAdmissionPlugin(Interface):
    """
    One admission plugin. Either method may be a no-op.

    A method with nothing to do for a write returns None rather than an
    awaitable that does nothing: a coroutine costs more than the check that
    shows it is not needed. What a plugin never acts on it says with three
    optional class attributes, so that the chain does not call it at all:

      - C{resources}: the C{(group, resource)} pairs it acts on (the
        storage group, C{""} for the core one); absent or None: every
        resource;
      - C{mutates = False}: C{admit} never does anything;
      - C{validates = False}: C{validate} never does anything.
    """

    def admit(attributes):
        """Mutate C{attributes.obj}; may be awaitable; raise StatusError to refuse."""

    def validate(attributes):
        """Refuse with a StatusError; must not mutate; may be awaitable."""
