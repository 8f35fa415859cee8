# -*- test-case-name: tests.app.test_audit -*-
"""The audit flags made into an L{Auditor} and the backends it writes to."""

from twisted.internet.threads import deferToThreadPool

from orchd.server.audit.logbackend import LogBackend
from orchd.server.audit.policy import AuditPolicyError, Policy
from orchd.server.audit.webhook import WebhookBackend
from orchd.server.filters.audit import Auditor


class AuditConfigError(ValueError):
    """An audit flag's file is unusable; the message names the flag."""


def build_auditor(config, reactor):
    """
    The API server's L{Auditor} and its backend services (to start and stop).

    Without C{--audit-policy-file}, or without a backend, nothing is audited
    (the C{Audit-ID} header is still given).

    @raise AuditConfigError: for an unusable policy or webhook file.
    """
    backends = []
    if config.audit_log_path is not None:
        backends.append(LogBackend(
            reactor, config.audit_log_path, config.audit_log_maxsize,
            config.audit_log_maxbackup, config.audit_log_maxage, config.audit_log_compress,
            config.audit_log_format, max(1, config.audit_log_batch_buffer_size)))
    if config.audit_webhook_config_file is not None:
        try:
            backends.append(WebhookBackend.from_config_file(
                config.audit_webhook_config_file, reactor,
                max_size=config.audit_webhook_batch_max_size,
                max_wait=config.audit_webhook_batch_max_wait,
                buffer_size=config.audit_webhook_batch_buffer_size,
                initial_backoff=config.audit_webhook_initial_backoff,
                offload=lambda f, *args: deferToThreadPool(reactor, reactor.getThreadPool(),
                                                           f, *args)))
        except ValueError as e:
            raise AuditConfigError(f"--audit-webhook-config-file: {e}") from None
    policy = None
    if config.audit_policy_file is not None:
        try:
            policy = Policy.load(config.audit_policy_file)
        except AuditPolicyError as e:
            raise AuditConfigError(f"--audit-policy-file: {e}") from None
    return Auditor(policy, backends), backends
