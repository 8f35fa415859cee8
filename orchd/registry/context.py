# -*- test-case-name: tests.server.test_handlers -*-
"""What the registry knows of the request it serves."""


class RequestContext:
    """
    The caller and the request-wide options of one API call.

    @ivar warnings: texts the response carries back as C{Warning} headers.
    """

    __slots__ = ("user", "namespace", "dry_run", "field_manager", "warnings")

    def __init__(self, user, namespace="", dry_run=False, field_manager=None):
        self.user = user
        self.namespace = namespace
        self.dry_run = dry_run
        self.field_manager = field_manager
        self.warnings = []

    def warn(self, text):
        if text not in self.warnings:
            self.warnings.append(text)
