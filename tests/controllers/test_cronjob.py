"""The CronJob controller, driven through the API in memory with a Clock."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.cronjob import SCHEDULED_TIMESTAMP, CronJobController
from orchd.controllers.garbagecollector import GarbageCollector
from tests.controllers.jobsupport import CRONJOBS, JOBS, JobHarness

T0 = 1_700_000_000  # 2023-11-14T22:13:20Z


def cronjob(name="tick", schedule="*/5 * * * *", **spec):
    spec.update(schedule=schedule, jobTemplate={"spec": {"template": {"spec": {
        "restartPolicy": "OnFailure", "containers": [{"name": "main", "image": "busybox"}]}}}})
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": spec}


class CronJobTests(SynchronousTestCase):
    def setUp(self):
        self.h = JobHarness(self)
        self.h.start(CronJobController(self.h.api.catalog, self.h.clock))

    def create(self, **kw):
        return self.h.call("POST", CRONJOBS, cronjob(**kw), 201)

    def job_names(self):
        return sorted(j["metadata"]["name"] for j in self.h.get(JOBS)["items"])

    def status(self, name="tick"):
        return self.h.get(f"{CRONJOBS}/{name}").get("status") or {}

    def finish_job(self, name, type="Complete"):
        """What the Job controller writes once a Job is done."""
        stamp = "2023-11-14T22:20:00Z"
        status = {"conditions": [{"type": type, "status": "True",
                                  "lastTransitionTime": stamp}],
                  "startTime": stamp}
        if type == "Complete":
            status["completionTime"] = stamp
        self.h.patch(f"{JOBS}/{name}/status", {"status": status})

    def test_runs_on_schedule(self):
        """At the schedule's time a Job <cronjob>-<minutes> is created, owned and annotated, and status records it."""
        created = self.create()
        self.assertEqual(self.job_names(), [])
        self.h.clock.advance(100)
        self.assertEqual(self.job_names(), [])
        self.h.clock.advance(0.2)
        name = f"tick-{(T0 + 100) // 60}"
        self.assertEqual(self.job_names(), [name])
        job = self.h.get(f"{JOBS}/{name}")
        self.assertEqual(job["metadata"]["annotations"][SCHEDULED_TIMESTAMP],
                         "2023-11-14T22:15:00Z")
        ref = job["metadata"]["ownerReferences"][0]
        self.assertEqual((ref["kind"], ref["uid"], ref["controller"]),
                         ("CronJob", created["metadata"]["uid"], True))
        self.assertEqual(job["spec"]["template"]["spec"]["restartPolicy"], "OnFailure")
        status = self.status()
        self.assertEqual(status["lastScheduleTime"], "2023-11-14T22:15:00Z")
        self.assertEqual([(r["kind"], r["name"], r["uid"]) for r in status["active"]],
                         [("Job", name, job["metadata"]["uid"])])
        self.assertIn(("SuccessfulCreate", f"Created job {name}"), self.h.events("CronJob"))
        self.h.clock.advance(300)
        self.assertEqual(len(self.job_names()), 2)

    def test_completed_job_leaves_active(self):
        """A finished Job leaves status.active, sets lastSuccessfulTime, with a SawCompletedJob event."""
        self.create()
        self.h.clock.advance(100.2)
        name = self.job_names()[0]
        self.finish_job(name)
        status = self.status()
        self.assertNotIn("active", status)
        self.assertEqual(status["lastSuccessfulTime"], "2023-11-14T22:20:00Z")
        self.assertIn(("SawCompletedJob", f"Saw completed job: {name}, status: Complete"),
                      self.h.events("CronJob"))

    def test_forbid(self):
        """With Forbid, a run while the last Job is active is skipped with JobAlreadyActive."""
        self.create(concurrencyPolicy="Forbid")
        self.h.clock.advance(100.2)
        self.h.clock.advance(300)
        self.assertEqual(len(self.job_names()), 1)
        self.assertIn(("JobAlreadyActive", "Not starting job because prior execution is running "
                                           "and concurrency policy is Forbid"),
                      self.h.events("CronJob"))

    def test_replace(self):
        """With Replace, the active Job is deleted and the new one created."""
        self.create(concurrencyPolicy="Replace")
        self.h.clock.advance(100.2)
        first = self.job_names()
        self.h.clock.advance(300)
        names = self.job_names()
        self.assertEqual(len(names), 1)
        self.assertNotEqual(names, first)
        self.assertEqual([r["name"] for r in self.status()["active"]], names)
        self.assertIn(("SuccessfulDelete", f"Deleted job {first[0]}"), self.h.events("CronJob"))

    def test_suspend(self):
        """A suspended CronJob creates nothing; resumed, it runs the latest missed time."""
        self.create(suspend=True)
        self.h.clock.advance(650)
        self.assertEqual(self.job_names(), [])
        self.h.patch(f"{CRONJOBS}/tick", {"spec": {"suspend": False}})
        self.assertEqual(self.job_names(), [f"tick-{(T0 + 400) // 60}"])

    def test_starting_deadline_missed(self):
        """A run found later than startingDeadlineSeconds is skipped with MissSchedule."""
        self.create(suspend=True, startingDeadlineSeconds=200)
        self.h.clock.advance(350)  # the run at +100 is 250 s old
        self.h.patch(f"{CRONJOBS}/tick", {"spec": {"suspend": False}})
        self.assertEqual(self.job_names(), [])
        self.h.clock.advance(50.2)  # +400: in time
        self.assertEqual(len(self.job_names()), 1)

    def test_too_many_missed(self):
        """Over 100 missed runs gives a TooManyMissedTimes warning and still runs the latest."""
        self.create(schedule="* * * * *", suspend=True)
        self.h.clock.advance(200 * 60)
        self.h.patch(f"{CRONJOBS}/tick", {"spec": {"suspend": False}})
        self.assertEqual(len(self.job_names()), 1)
        self.assertIn("TooManyMissedTimes", [e[0] for e in self.h.events("CronJob")])

    def test_history_limits(self):
        """Only successfulJobsHistoryLimit Complete and failedJobsHistoryLimit Failed Jobs are kept, oldest deleted."""
        self.create(schedule="* * * * *", successfulJobsHistoryLimit=1, failedJobsHistoryLimit=1)
        made = []
        for i in range(4):
            self.h.clock.advance(60)
            name = [n for n in self.job_names() if n not in made][0]
            made.append(name)
            self.finish_job(name, "Complete" if i < 2 else "Failed")
        self.assertEqual(self.job_names(), [made[1], made[3]])

    def test_time_zone(self):
        """The scheduled-timestamp annotation is written in the CronJob's zone."""
        self.create(schedule="15 17 * * *", timeZone="America/New_York")
        self.h.clock.advance(100.2)
        name = self.job_names()[0]
        job = self.h.get(f"{JOBS}/{name}")
        self.assertEqual(job["metadata"]["annotations"][SCHEDULED_TIMESTAMP],
                         "2023-11-14T17:15:00-05:00")

    def test_deleted_cronjob_jobs_collected(self):
        """Deleting a CronJob deletes its Jobs through their owner references."""
        self.h.start(GarbageCollector(self.h.api.catalog, self.h.clock))
        self.create()
        self.h.clock.advance(100.2)
        self.assertEqual(len(self.job_names()), 1)
        self.h.call("DELETE", f"{CRONJOBS}/tick", code=200)
        self.h.clock.advance(1)
        self.assertEqual(self.job_names(), [])
