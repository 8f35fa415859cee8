"""Raising the open-file limit at start."""

import resource

from twisted.logger import globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from orchd.app.fdlimit import raise_open_file_limit


class FakeRlimit:
    """The parts of the C{resource} module the function uses."""

    RLIMIT_NOFILE = resource.RLIMIT_NOFILE
    RLIM_INFINITY = resource.RLIM_INFINITY

    def __init__(self, soft, hard, refuse=False):
        self.limits = (soft, hard)
        self.refuse = refuse

    def getrlimit(self, which):
        assert which == self.RLIMIT_NOFILE
        return self.limits

    def setrlimit(self, which, limits):
        if self.refuse:
            raise ValueError("not allowed to raise maximum limit")
        self.limits = limits


class RaiseTests(SynchronousTestCase):
    def setUp(self):
        self.events = []
        globalLogPublisher.addObserver(self.events.append)
        self.addCleanup(globalLogPublisher.removeObserver, self.events.append)

    def messages(self):
        return [e["log_format"] for e in self.events
                if e.get("log_namespace") == "orchd.app.fdlimit"]

    def test_soft_raised_to_hard(self):
        """A soft limit of 1024 under a hard one of 524288 is raised, and the log says so."""
        rlimit = FakeRlimit(1024, 524288)
        self.assertEqual(raise_open_file_limit(rlimit), 524288)
        self.assertEqual(rlimit.limits, (524288, 524288))
        self.assertEqual(self.messages(), ["Open-file limit raised from {soft} to {hard}"])

    def test_already_at_hard(self):
        """A soft limit already at the hard one is left alone and logged."""
        rlimit = FakeRlimit(20000, 20000)
        self.assertEqual(raise_open_file_limit(rlimit), 20000)
        self.assertEqual(self.messages(), ["Open-file limit: {soft}"])

    def test_refused_raise_is_a_warning(self):
        """A raise the system refuses (an unlimited hard limit) keeps the soft one, and warns."""
        rlimit = FakeRlimit(256, resource.RLIM_INFINITY, refuse=True)
        self.assertEqual(raise_open_file_limit(rlimit), 256)
        self.assertEqual(rlimit.limits, (256, resource.RLIM_INFINITY))
        [event] = [e for e in self.events if e.get("log_namespace") == "orchd.app.fdlimit"]
        self.assertEqual(event["hard"], "unlimited")
        self.assertEqual(event["log_level"].name, "warn")
