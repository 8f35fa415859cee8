"""The Job controller's pure rules: indexes, pod verdicts, failure policy and back-off."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers import jobutil as ju


def pod(phase=None, deleting=False, finalizer=True, index=None, code=None):
    meta = {"name": "p", "namespace": "default", "uid": "u"}
    if deleting:
        meta["deletionTimestamp"] = "2023-11-14T22:13:20Z"
    if finalizer:
        meta["finalizers"] = [ju.TRACKING_FINALIZER]
    if index is not None:
        meta["annotations"] = {ju.COMPLETION_INDEX: index}
    status = {"phase": phase}
    if code is not None:
        status["containerStatuses"] = [{"name": "main",
                                        "state": {"terminated": {"exitCode": code}}}]
    return {"metadata": meta, "status": status}


class IndexTests(SynchronousTestCase):
    def test_format(self):
        """Indexes are written as ranges: 0-2,4 and 1,3-5."""
        self.assertEqual(ju.format_indexes({0, 1, 2, 4}), "0-2,4")
        self.assertEqual(ju.format_indexes({5, 1, 3, 4}), "1,3-5")
        self.assertEqual(ju.format_indexes(set()), "")

    def test_parse_hostile(self):
        """Garbage and indexes past the completions are skipped, not raised."""
        self.assertEqual(ju.parse_indexes("0-2,4", 10), {0, 1, 2, 4})
        self.assertEqual(ju.parse_indexes("x,-1,3-,2-9999999999", 5), {2, 3, 4})
        self.assertEqual(ju.parse_indexes(None, 5), set())

    def test_completion_index(self):
        """Only a plain decimal annotation is an index."""
        self.assertEqual(ju.completion_index(pod(index="3")), 3)
        for bad in ("-1", "x", "1e3", "9" * 20):
            self.assertIsNone(ju.completion_index(pod(index=bad)), bad)


class PodVerdictTests(SynchronousTestCase):
    def test_failed(self):
        """Failed phase fails; a tracked pod being deleted fails unless the Job replaces only failed pods."""
        job = {"spec": {}}
        self.assertTrue(ju.is_failed(pod("Failed"), job))
        self.assertTrue(ju.is_failed(pod("Running", deleting=True), job))
        self.assertFalse(ju.is_failed(pod("Running", deleting=True, finalizer=False), job))
        self.assertFalse(ju.is_failed(pod("Succeeded", deleting=True), job))
        only_failed = {"spec": {"podReplacementPolicy": "Failed"}}
        self.assertFalse(ju.is_failed(pod("Running", deleting=True), only_failed))

    def test_failure_policy(self):
        """The first matching rule decides; NotIn matches other codes; no match counts."""
        job = {"spec": {"podFailurePolicy": {"rules": [
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}},
            {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [1, 2]}}]}}}
        self.assertEqual(ju.failure_policy_action(job, pod("Failed", code=1))[0], "Ignore")
        self.assertEqual(ju.failure_policy_action(job, pod("Failed", code=2)), (None, None))
        action, message = ju.failure_policy_action(job, pod("Failed", code=5))
        self.assertEqual(message, "Container main for pod default/p failed with exit code 5 "
                                  "matching FailJob rule at index 1")

    def test_backoff(self):
        """10 s, 20 s, 40 s ... capped at 6 minutes; none before a failure."""
        self.assertEqual([ju.failure_backoff(n) for n in (0, 1, 2, 3, 6, 100)],
                         [0.0, 10.0, 20.0, 40.0, 320.0, 360.0])
