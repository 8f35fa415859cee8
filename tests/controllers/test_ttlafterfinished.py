"""The TTL-after-finished controller: finished Jobs deleted on time, with their pods."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.garbagecollector import GarbageCollector
from orchd.controllers.ttlafterfinished import TTLAfterFinishedController, expires_at
from tests.controllers.jobsupport import JOBS, JobHarness, job


class TTLAfterFinishedTests(SynchronousTestCase):
    def setUp(self):
        self.h = JobHarness(self)
        self.h.jobs()
        self.h.start(TTLAfterFinishedController(self.h.api.catalog, self.h.clock))
        self.h.start(GarbageCollector(self.h.api.catalog, self.h.clock))

    def test_deleted_after_ttl_with_pods(self):
        """A Job with ttlSecondsAfterFinished 30 is deleted 30 s after it completed, its pods first."""
        self.h.call("POST", JOBS, job(ttlSecondsAfterFinished=30), 201)
        self.h.finish_all()
        self.assertEqual(self.h.conditions()[-1][0], "Complete")
        self.h.clock.advance(29)
        self.assertIsNotNone(self.h.job())
        for _ in range(5):
            self.h.clock.advance(1)
        self.assertIsNone(self.h.job())
        self.assertEqual(self.h.all_pods(), [])

    def test_raised_ttl_is_honoured(self):
        """A TTL raised after the Job finished postpones the delete to the new time."""
        self.h.call("POST", JOBS, job(ttlSecondsAfterFinished=10), 201)
        self.h.finish_all()
        self.h.patch(f"{JOBS}/pi", {"spec": {"ttlSecondsAfterFinished": 100}})
        self.h.clock.advance(20)
        self.assertIsNotNone(self.h.job())
        self.h.clock.advance(81)
        self.h.clock.advance(1)
        self.assertIsNone(self.h.job())

    def test_no_ttl_kept(self):
        """A finished Job without a TTL stays."""
        self.h.call("POST", JOBS, job(), 201)
        self.h.finish_all()
        self.h.clock.advance(3600)
        self.assertIsNotNone(self.h.job())

    def test_expires_at(self):
        """The expiry is the terminal condition's time plus the TTL; unfinished Jobs have none."""
        finished = {"metadata": {}, "spec": {"ttlSecondsAfterFinished": 5}, "status": {
            "conditions": [{"type": "Complete", "status": "True",
                            "lastTransitionTime": "2023-11-14T22:13:20Z"}]}}
        self.assertEqual(expires_at(finished), 1_700_000_005)
        finished["status"]["conditions"][0]["status"] = "False"
        self.assertIsNone(expires_at(finished))
