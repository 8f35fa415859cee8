"""Expectations: an owner waits for its informer to see what it wrote, five minutes at most."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.expectations import Expectations


class ExpectationsTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.expectations = Expectations(self.clock)

    def test_nothing_expected(self):
        """An owner never seen expects nothing."""
        self.assertTrue(self.expectations.satisfied("ns/a"))

    def test_creations(self):
        """Expected creations hold the owner until each is observed."""
        self.expectations.expect_creations("ns/a", 2)
        self.assertFalse(self.expectations.satisfied("ns/a"))
        self.expectations.creation_observed("ns/a")
        self.assertFalse(self.expectations.satisfied("ns/a"))
        self.expectations.creation_observed("ns/a")
        self.assertTrue(self.expectations.satisfied("ns/a"))
        self.assertTrue(self.expectations.satisfied("ns/b"))

    def test_deletions_by_pod(self):
        """Only the deletion of a pod being waited for counts, and only once."""
        self.expectations.expect_deletions("ns/a", ["ns/p1", "ns/p2"])
        self.expectations.deletion_observed("ns/a", "ns/other")
        self.expectations.deletion_observed("ns/a", "ns/p1")
        self.expectations.deletion_observed("ns/a", "ns/p1")
        self.assertEqual(self.expectations.pending("ns/a"), (0, 1))
        self.expectations.deletion_observed("ns/a", "ns/p2")
        self.assertTrue(self.expectations.satisfied("ns/a"))

    def test_expiry(self):
        """Expectations older than five minutes no longer hold the owner."""
        self.expectations.expect_creations("ns/a", 1)
        self.clock.advance(300)
        self.assertFalse(self.expectations.satisfied("ns/a"))
        self.clock.advance(0.5)
        self.assertTrue(self.expectations.satisfied("ns/a"))

    def test_forget(self):
        """A forgotten owner expects nothing."""
        self.expectations.expect_creations("ns/a", 3)
        self.expectations.forget("ns/a")
        self.assertTrue(self.expectations.satisfied("ns/a"))
        self.assertEqual(self.expectations.pending("ns/a"), (0, 0))

    def test_creations_and_deletions_at_once(self):
        """An owner that creates and deletes in one pass waits for both."""
        self.expectations.expect("ns/a", 1, ["ns/p1"])
        self.assertEqual(self.expectations.pending("ns/a"), (1, 1))
        self.expectations.creation_observed("ns/a")
        self.assertFalse(self.expectations.satisfied("ns/a"))
        self.expectations.deletion_observed("ns/a", "ns/p1")
        self.assertTrue(self.expectations.satisfied("ns/a"))
