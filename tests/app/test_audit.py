"""The audit flags: parsed, checked, and made into an auditor with its backends."""

import io
import os
import sys

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.app.audit import AuditConfigError, build_auditor
from orchd.app.config import Config
from orchd.server.audit.logbackend import LogBackend
from orchd.server.audit.webhook import WebhookBackend
from tests.app.test_config import parse

POLICY = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"


class AuditFlagTests(SynchronousTestCase):
    def setUp(self):
        self.stderr = io.StringIO()
        self.patch(sys, "stderr", self.stderr)

    def write(self, text):
        path = self.mktemp()
        with open(path, "w", encoding="utf-8") as stream:
            stream.write(text)
        return path

    def fails(self, *argv):
        with self.assertRaises(SystemExit):
            parse(*argv)
        (line,) = self.stderr.getvalue().splitlines()
        self.stderr.seek(0)
        self.stderr.truncate()
        return line

    def test_flags_parsed(self):
        """The --audit-* and --log-format flags reach Config converted."""
        policy = self.write(POLICY)
        options = parse(f"--audit-policy-file={policy}", "--audit-log-path=-",
                        "--audit-log-maxage=30", "--audit-log-maxbackup=10",
                        "--audit-log-maxsize=100", "--audit-log-compress",
                        "--audit-log-format=legacy", "--audit-webhook-batch-max-wait=5s",
                        "--log-format=json")
        config = options
        self.assertEqual((config.audit_log_maxage, config.audit_log_maxbackup,
                          config.audit_log_maxsize, config.audit_log_compress,
                          config.audit_log_format, config.audit_webhook_batch_max_wait,
                          config.log_format),
                         (30, 10, 100, True, "legacy", 5.0, "json"))

    def test_defaults(self):
        """Without flags nothing is audited, the webhook defaults are upstream's, text logs."""
        config = Config()
        self.assertEqual((config.audit_policy_file, config.audit_log_path,
                          config.audit_webhook_batch_max_size,
                          config.audit_webhook_batch_max_wait, config.audit_log_format,
                          config.log_format), (None, None, 400, 30.0, "json", "text"))

    def test_bad_values(self):
        """Bad audit values stop start-up with one line naming the flag."""
        self.assertIn("--audit-log-format", self.fails("--audit-log-format=xml"))
        self.assertIn("--log-format", self.fails("--log-format=yaml"))
        self.assertIn("--audit-log-maxage", self.fails("--audit-log-maxage=-1"))
        self.assertIn("--audit-policy-file: no such file",
                      self.fails("--audit-policy-file=/nonexistent"))
        line = self.fails(f"--audit-policy-file={self.write(POLICY + '- level: Loud')}")
        self.assertIn("--audit-policy-file: rules[1].level: Unsupported value: 'Loud'", line)
        self.assertIn("--audit-webhook-batch-max-size",
                      self.fails("--audit-webhook-batch-max-size=0"))

    def test_build_auditor(self):
        """The policy and both backends are built from the flags."""
        clock = Clock()
        webhook = self.write(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
            "    server: https://audit.example:8443/events\n"
            "users:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context:\n"
            "    cluster: c\n    user: u\ncurrent-context: x\n")
        config = Config(audit_policy_file=self.write(POLICY),
                        audit_log_path=os.path.join(self.mktemp(), "audit.log"),
                        audit_webhook_config_file=webhook)
        auditor, backends = build_auditor(config, clock)
        self.assertEqual([type(b) for b in backends], [LogBackend, WebhookBackend])
        self.assertEqual(len(auditor.policy.rules), 1)

    def test_bad_webhook_config(self):
        """An unusable webhook file is an error naming the flag."""
        config = Config(audit_webhook_config_file=self.write(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
            "    server: ftp://audit.example/\n"))
        with self.assertRaises(AuditConfigError) as caught:
            build_auditor(config, Clock())
        self.assertIn("--audit-webhook-config-file", str(caught.exception))
