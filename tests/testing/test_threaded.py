"""
Blocking use of orchd.testing (C{with ControlPlane() as cp}), run in a
subprocess: it starts the global reactor in a thread, which trial's
reactor in this process must not meet.
"""

import os
import sys

from twisted.internet import reactor
from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import SkipTest, TestCase

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ThreadedTests(TestCase):
    """The context manager, the official client and kopf from a program's main thread."""

    timeout = 120

    async def run_script(self, part):
        env = dict(os.environ, PYTHONPATH=ROOT)
        out, err, code = await getProcessOutputAndValue(
            sys.executable, ["-m", "tests.testing.threaded_script", part], env=env, path=ROOT,
            reactor=reactor)
        self.assertEqual(code, 0, (out + err).decode("utf-8", "replace"))
        return out.decode("utf-8").splitlines()

    async def test_context_manager(self):
        """Two control planes share the reactor thread; every blocking call works from main."""
        try:
            import kubernetes  # noqa: F401
        except ImportError:
            raise SkipTest("the kubernetes package (the test extra) is not installed")
        lines = await self.run_script("plain")
        self.assertEqual([line.split()[1] for line in lines[1:]],
                         ["official", "create_namespace", "fail_next", "wait_for", "requests",
                          "separate", "blocking", "stopped"])

    async def test_kopf_operator(self):
        """A kopf operator logged in with C{kopf_login} reconciles a resource of C{crds=}."""
        try:
            import kopf  # noqa: F401
        except ImportError:
            raise SkipTest("kopf is not installed")
        lines = await self.run_script("operator")
        self.assertEqual(lines, ["ok kopf reconciled", "ok kopf patches recorded",
                                 "ok kopf stopped"])
