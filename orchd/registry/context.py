# -*- test-case-name: tests.server.test_handlers -*-
"""What the registry knows of the request it serves."""


class RequestContext:
    """
    The caller and the request-wide options of one API call.

    @ivar warnings: texts the response carries back as C{Warning} headers.
    @ivar audit: the request's audit record (anything with an C{annotations}
        dict), or None when the request is not audited.
    @ivar timing: the request's timing for the metrics (anything with an
        C{excluded} number of seconds), or None when it is not timed.
    """

    __slots__ = ("user", "namespace", "dry_run", "field_manager", "warnings", "audit",
                 "timing")

    def __init__(self, user, namespace="", dry_run=False, field_manager=None, audit=None,
                 timing=None):
        self.user = user
        self.namespace = namespace
        self.dry_run = dry_run
        self.field_manager = field_manager
        self.warnings = []
        self.audit = audit
        self.timing = timing

    def warn(self, text):
        if text not in self.warnings:
            self.warnings.append(text)

    def add_audit_annotation(self, key, value):
        """Annotate the request's audit event (nothing when it is not audited)."""
        if self.audit is not None:
            self.audit.annotate(key, value)

    def add_webhook_time(self, seconds):
        """
        Count C{seconds} spent calling admission webhooks, which the
        request's SLI latency leaves out (nothing when it is not timed).
        """
        if self.timing is not None:
            self.timing.excluded += seconds
