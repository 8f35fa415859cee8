"""The Job controller, driven through the API in memory with a Clock."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers import jobutil as ju
from orchd.controllers.garbagecollector import GarbageCollector
from tests.controllers.jobsupport import JOBS, JobHarness, job
from tests.controllers.workloadsupport import PODS, pod


class JobTests(SynchronousTestCase):
    def setUp(self):
        self.h = JobHarness(self)
        self.controller = self.h.jobs()

    def create(self, body=None, **kw):
        return self.h.call("POST", JOBS, body or job(**kw), 201)

    def status(self, name="pi"):
        return self.h.job(name).get("status") or {}

    def test_creates_pod_with_finalizer_and_labels(self):
        """A new Job gets one pod named <job>-xxxxx, owned, labelled by the Job and tracked."""
        created = self.create()
        pods = self.h.pods()
        self.assertEqual(len(pods), 1)
        meta = pods[0]["metadata"]
        uid = created["metadata"]["uid"]
        self.assertTrue(meta["name"].startswith("pi-"))
        self.assertEqual(meta["finalizers"], [ju.TRACKING_FINALIZER])
        self.assertEqual(meta["labels"]["batch.orch.io/controller-uid"], uid)
        self.assertEqual(meta["labels"]["job-name"], "pi")
        self.assertEqual(meta["ownerReferences"][0]["kind"], "Job")
        status = self.status()
        self.assertEqual((status["active"], status["ready"], status["terminating"]), (1, 0, 0))
        self.assertIn("startTime", status)
        self.assertEqual(status["uncountedTerminatedPods"], {})
        self.assertIn(("SuccessfulCreate", f"Created pod: {meta['name']}"), self.h.events("Job"))

    def test_completes_and_counts_once(self):
        """A pod that succeeds is counted once, loses its finalizer, and the Job completes."""
        self.create()
        name = self.h.finish_all()[0]
        status = self.status()
        self.assertEqual(status["succeeded"], 1)
        self.assertNotIn("failed", status)
        self.assertEqual(status["active"], 0)
        self.assertIn("completionTime", status)
        self.assertEqual(self.h.conditions(), [
            ("SuccessCriteriaMet", "True", "CompletionsReached"),
            ("Complete", "True", "CompletionsReached")])
        complete = status["conditions"][1]
        self.assertEqual(complete["message"], "Reached expected number of succeeded pods")
        finished = self.h.get(f"{PODS}/{name}")
        self.assertNotIn("finalizers", finished["metadata"])
        self.assertIn(("Completed", "Job completed"), self.h.events("Job"))
        # Further syncs (a label change on the pod) change nothing.
        self.h.patch(f"{PODS}/{name}", {"metadata": {"labels": {"x": "y"}}})
        self.assertEqual(self.status()["succeeded"], 1)
        self.assertEqual(len(self.h.all_pods()), 1)

    def test_completions_and_parallelism(self):
        """completions 5, parallelism 2: two pods at a time until five succeeded."""
        self.create(completions=5, parallelism=2)
        runs = []
        while self.h.pods():
            runs.append(len(self.h.finish_all()))
        self.assertEqual(runs, [2, 2, 1])
        self.assertEqual(self.status()["succeeded"], 5)
        self.assertEqual(self.h.conditions()[-1][0], "Complete")

    def test_no_completions_ends_after_first_success(self):
        """Without completions, once one pod succeeds no new pod starts and the Job completes when the rest end."""
        body = job(parallelism=3)
        body["spec"]["completions"] = None
        self.create(body)
        names = self.h.pod_names()
        self.assertEqual(len(names), 3)
        self.h.finish(names[0])
        self.assertEqual(len(self.h.pods()), 2)
        self.assertNotIn("Complete", [c[0] for c in self.h.conditions()])
        self.h.finish(names[1])
        self.h.finish(names[2])
        self.assertEqual(self.status()["succeeded"], 3)
        self.assertEqual(self.h.conditions()[-1][0], "Complete")

    def test_failed_pod_replaced_after_backoff(self):
        """A failed pod is counted and replaced only after 10 s, then 20 s."""
        self.create()
        self.h.finish_all("Failed", 1)
        self.assertEqual(self.status()["failed"], 1)
        self.assertEqual(self.h.pods(), [])
        self.h.clock.advance(9)
        self.assertEqual(self.h.pods(), [])
        self.h.clock.advance(1.5)
        self.assertEqual(len(self.h.pods()), 1)
        self.h.finish_all("Failed", 1)
        self.h.clock.advance(19)
        self.assertEqual(self.h.pods(), [])
        self.h.clock.advance(1.5)
        self.assertEqual(len(self.h.pods()), 1)
        self.assertEqual(self.status()["failed"], 2)

    def test_backoff_limit_exceeded(self):
        """With backoffLimit 1 the second failure fails the Job with upstream's reason and message."""
        self.create(backoffLimit=1)
        self.h.finish_all("Failed", 2)
        self.h.clock.advance(11)
        self.h.finish_all("Failed", 2)
        status = self.status()
        self.assertEqual(status["failed"], 2)
        self.assertEqual(self.h.conditions(), [
            ("FailureTarget", "True", "BackoffLimitExceeded"),
            ("Failed", "True", "BackoffLimitExceeded")])
        self.assertEqual(status["conditions"][1]["message"],
                         "Job has reached the specified backoff limit")
        self.assertNotIn("completionTime", status)
        self.h.clock.advance(600)
        self.assertEqual(self.h.pods(), [])
        self.assertIn(("BackoffLimitExceeded", "Job has reached the specified backoff limit"),
                      self.h.events("Job"))

    def test_on_failure_restarts_count(self):
        """With restartPolicy OnFailure, container restarts reaching backoffLimit fail the Job."""
        self.create(restart="OnFailure", backoffLimit=2)
        name = self.h.pod_names()[0]
        self.h.set_pod_status(name, containerStatuses=[{
            "name": "main", "image": "busybox", "imageID": "", "ready": False,
            "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}])
        self.assertEqual(self.h.conditions()[0][:2], ("FailureTarget", "True"))
        self.h.finish_deletions()
        self.assertEqual(self.h.conditions()[-1], ("Failed", "True", "BackoffLimitExceeded"))
        self.assertEqual(self.status()["failed"], 1)

    def test_active_deadline(self):
        """Past activeDeadlineSeconds the running pods are deleted and the Job fails with DeadlineExceeded."""
        self.create(activeDeadlineSeconds=30, parallelism=2, completions=4)
        self.h.make_ready()
        self.assertEqual(self.status()["ready"], 2)
        self.h.clock.advance(30)
        self.assertEqual(self.h.conditions(), [("FailureTarget", "True", "DeadlineExceeded")])
        self.assertEqual(self.h.pods(), [])
        self.assertEqual(self.status()["terminating"], 2)
        self.h.finish_deletions()
        status = self.status()
        self.assertEqual(self.h.conditions()[-1], ("Failed", "True", "DeadlineExceeded"))
        self.assertEqual(status["conditions"][-1]["message"],
                         "Job was active longer than specified deadline")
        self.assertEqual((status["failed"], status["active"], status["terminating"]), (2, 0, 0))
        self.assertEqual(self.h.all_pods(), [])

    def test_suspend_and_resume(self):
        """Suspending deletes the pods and sets Suspended; resuming starts pods again and resets startTime."""
        self.create(suspend=True)
        self.assertEqual(self.h.pods(), [])
        self.assertEqual(self.h.conditions(), [("Suspended", "True", "JobSuspended")])
        self.assertNotIn("startTime", self.status())
        self.h.clock.advance(5)
        self.h.patch(f"{JOBS}/pi", {"spec": {"suspend": False}})
        self.assertEqual(len(self.h.pods()), 1)
        self.assertEqual(self.h.conditions(), [("Suspended", "False", "JobResumed")])
        self.assertEqual(self.status()["startTime"], "2023-11-14T22:13:25Z")
        self.h.patch(f"{JOBS}/pi", {"spec": {"suspend": True}})
        self.assertEqual(self.h.pods(), [])
        self.assertEqual(self.h.conditions(), [("Suspended", "True", "JobSuspended")])
        events = [e[0] for e in self.h.events("Job")]
        self.assertIn("Suspended", events)
        self.assertIn("Resumed", events)

    def test_indexed(self):
        """An Indexed Job runs one pod per index with annotation, label, hostname and env, and writes completedIndexes."""
        self.create(completions=5, parallelism=5, completionMode="Indexed")
        pods = self.h.pods()
        self.assertEqual(len(pods), 5)
        by_index = {}
        for p in pods:
            meta = p["metadata"]
            index = meta["annotations"][ju.COMPLETION_INDEX]
            self.assertEqual(meta["labels"][ju.COMPLETION_INDEX], index)
            self.assertTrue(meta["name"].startswith(f"pi-{index}-"))
            self.assertEqual(p["spec"]["hostname"], f"pi-{index}")
            self.assertEqual(p["spec"]["containers"][0]["env"][-1]["name"],
                             "JOB_COMPLETION_INDEX")
            by_index[int(index)] = meta["name"]
        self.assertEqual(sorted(by_index), [0, 1, 2, 3, 4])
        for i in (1, 3, 4):
            self.h.finish(by_index[i])
        status = self.status()
        self.assertEqual((status["completedIndexes"], status["succeeded"]), ("1,3-4", 3))
        self.h.finish(by_index[0], "Failed", 1)
        self.h.clock.advance(11)
        again = [p for p in self.h.pods()
                 if p["metadata"]["annotations"][ju.COMPLETION_INDEX] == "0"]
        self.assertEqual(len(again), 1)
        self.h.finish(again[0]["metadata"]["name"])
        self.h.finish(by_index[2])
        status = self.status()
        self.assertEqual((status["completedIndexes"], status["succeeded"], status["failed"]),
                         ("0-4", 5, 1))
        self.assertEqual(self.h.conditions()[-1][0], "Complete")

    def test_pod_failure_policy_fail_job(self):
        """A FailJob rule on an exit code fails the Job at the first such failure, with upstream's message."""
        body = job(backoffLimit=6)
        body["spec"]["podFailurePolicy"] = {"rules": [
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}
        self.create(body)
        name = self.h.pod_names()[0]
        self.h.finish(name, "Failed", 42)
        status = self.status()
        self.assertEqual(self.h.conditions()[-1], ("Failed", "True", "PodFailurePolicy"))
        self.assertEqual(status["conditions"][-1]["message"],
                         f"Container main for pod default/{name} failed with exit code 42 "
                         f"matching FailJob rule at index 0")

    def test_pod_failure_policy_ignore(self):
        """An Ignore rule on DisruptionTarget does not count the failure, and the pod is replaced at once."""
        body = job(backoffLimit=0)
        body["spec"]["podFailurePolicy"] = {"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
        self.create(body)
        name = self.h.pod_names()[0]
        self.h.finish(name, "Failed", 137, conditions=[
            {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}])
        self.assertNotIn("failed", self.status())
        self.assertEqual(self.h.conditions(), [])
        pods = self.h.pods()
        self.assertEqual(len(pods), 1)
        self.assertNotEqual(pods[0]["metadata"]["name"], name)

    def test_deleted_pod_counts_as_failed_and_is_replaced(self):
        """A running pod deleted by a user counts as failed and a replacement starts."""
        self.create()
        name = self.h.pod_names()[0]
        self.h.set_pod_status(name)
        self.h.call("DELETE", f"{PODS}/{name}", code=200)
        self.assertEqual(self.status()["failed"], 1)
        self.h.clock.advance(11)
        self.assertEqual(len(self.h.pods()), 1)
        self.h.finish_deletions()
        self.assertIsNone(self.h.get(f"{PODS}/{name}"))

    def test_job_deleted_releases_pods(self):
        """Once its Job is gone, a pod's tracking finalizer is removed so it can be collected."""
        self.create()
        name = self.h.pod_names()[0]
        self.h.call("DELETE", f"{JOBS}/pi?propagationPolicy=Orphan", code=200)
        self.h.clock.advance(0)
        self.assertNotIn("finalizers", self.h.get(f"{PODS}/{name}")["metadata"])

    def test_job_deleted_pods_collected(self):
        """Deleting a Job (background) lets the garbage collector delete its pods, finished or not."""
        self.h.start(GarbageCollector(self.h.api.catalog, self.h.clock))
        self.create(completions=2, parallelism=2)
        first, second = self.h.pod_names()
        self.h.finish(first)
        self.h.set_pod_status(second)
        self.h.call("DELETE", f"{JOBS}/pi", code=200)
        self.h.clock.advance(1)
        self.h.finish_deletions()
        self.h.clock.advance(1)
        self.assertEqual(self.h.all_pods(), [])

    def test_adopts_matching_orphan(self):
        """An orphan pod matching a manual selector is adopted and counted."""
        body = job(manualSelector=True)
        body["spec"]["selector"] = {"matchLabels": {"app": "web"}}
        body["spec"]["template"]["metadata"] = {"labels": {"app": "web"}}
        self.create(body, completions=2)
        self.h.call("POST", PODS, pod("stray"), 201)
        owners = self.h.get(f"{PODS}/stray")["metadata"].get("ownerReferences") or []
        self.assertEqual([o["name"] for o in owners], ["pi"])

    def test_generated_selector_adopts_by_its_uid_label(self):
        """An orphan carrying a Job's uid label is adopted; others in the namespace are not read."""
        created = self.create(completions=2, parallelism=1)
        uid = created["metadata"]["uid"]
        stray = pod("stray")
        stray["metadata"]["labels"] = dict(created["spec"]["template"]["metadata"]["labels"])
        self.h.call("POST", PODS, stray, 201)
        for i in range(3):
            self.h.call("POST", PODS, pod(f"other{i}"), 201)
        self.assertEqual(self.controller._orphan_candidates(self.h.get(f"{JOBS}/pi")),
                         set())                          # the stray is adopted by now
        owners = self.h.get(f"{PODS}/stray")["metadata"].get("ownerReferences") or []
        self.assertEqual([(o["name"], o["uid"]) for o in owners], [("pi", uid)])
        for i in range(3):
            self.assertNotIn("ownerReferences", self.h.get(f"{PODS}/other{i}")["metadata"])

    def test_orphans_try_only_the_jobs_they_may_match(self):
        """Jobs are indexed by generated uid or as manual selectors, and leave the index."""
        created = self.create()
        manual = job(name="own", manualSelector=True)
        manual["spec"]["selector"] = {"matchLabels": {"app": "web"}}
        manual["spec"]["template"]["metadata"] = {"labels": {"app": "web"}}
        self.h.call("POST", JOBS, manual, 201)
        self.assertEqual(self.controller._generated,
                         {("default", created["metadata"]["uid"]): "pi"})
        self.assertEqual(dict(self.controller._manual), {"default": {"own"}})
        self.h.call("DELETE", f"{JOBS}/own", code=200)
        self.h.call("DELETE", f"{JOBS}/pi", code=200)
        self.h.clock.advance(1)
        self.h.finish_deletions()
        self.h.clock.advance(1)
        self.assertEqual((self.controller._generated, dict(self.controller._manual)), ({}, {}))

    def test_lagging_cache_counts_once(self):
        """A pod cache that still shows a counted pod with its finalizer does not count it twice."""
        created = self.create(completions=2, parallelism=1)
        name = self.h.pod_names()[0]
        self.h.finish(name)
        self.assertEqual(self.status()["succeeded"], 1)
        # The state before the informer delivers the finalizer's removal.
        cached = self.controller._pods.cache[f"{self.controller._pod_prefix}default/{name}"]
        cached["metadata"]["finalizers"] = [ju.TRACKING_FINALIZER]
        pod_uid = cached["metadata"]["uid"]
        self.controller._uncounting[created["metadata"]["uid"]].add(pod_uid)
        self.controller.enqueue("default/pi")
        self.h.clock.advance(0)
        self.assertEqual(self.status()["succeeded"], 1)

    def test_parallelism_lowered(self):
        """Lowering parallelism deletes the surplus pods, not-ready ones first."""
        self.create(completions=10, parallelism=3)
        names = self.h.pod_names()
        self.h.set_pod_status(names[0])
        self.h.set_pod_status(names[1])
        self.h.patch(f"{JOBS}/pi", {"spec": {"parallelism": 2}})
        self.assertEqual(self.h.pod_names(), names[:2])

    def test_indexed_completions_lowered(self):
        """An elastic Indexed Job scaled down deletes the pods of indexes past the new completions."""
        self.create(completions=4, parallelism=4, completionMode="Indexed")
        self.h.patch(f"{JOBS}/pi", {"spec": {"completions": 2, "parallelism": 2}})
        indexes = sorted(p["metadata"]["annotations"][ju.COMPLETION_INDEX]
                         for p in self.h.pods())
        self.assertEqual(indexes, ["0", "1"])
        self.h.finish_deletions()
        self.assertNotIn("failed", self.status())
        self.h.finish_all()
        self.assertEqual(self.status()["completedIndexes"], "0-1")
        self.assertEqual(self.h.conditions()[-1][0], "Complete")

    def test_long_indexed_name_keeps_index(self):
        """A long Indexed Job's pod names keep the index when the name is cut."""
        name = "j" * 60
        self.create(job(name=name, completions=1, completionMode="Indexed"))
        pod_name = self.h.pod_names()[0]
        self.assertEqual(len(pod_name), 63)
        self.assertTrue(pod_name.startswith("j" * 55 + "-0-"), pod_name)

    def test_replacement_policy_failed(self):
        """With podReplacementPolicy Failed a deleted pod is replaced only once it has failed."""
        self.create(podReplacementPolicy="Failed", completions=2)
        name = self.h.pod_names()[0]
        self.h.set_pod_status(name)
        self.h.call("DELETE", f"{PODS}/{name}", code=200)
        self.assertEqual(self.h.pods(), [])
        self.assertEqual(self.status()["terminating"], 1)
        self.h.patch(f"{PODS}/{name}/status", {"status": {"phase": "Failed"}})
        self.assertEqual(self.status()["failed"], 1)
        self.h.clock.advance(11)
        self.assertEqual(len(self.h.pods()), 1)

    def test_uncounted_after_restart_is_counted(self):
        """A uid left in uncountedTerminatedPods by a stopped controller, its pod already released, is counted by the next one."""
        self.create(completions=2, parallelism=1)
        name = self.h.pod_names()[0]
        self.controller.stopService()
        self.h.finish(name)
        pod = self.h.get(f"{PODS}/{name}")
        self.h.patch(f"{PODS}/{name}", {"metadata": {"finalizers": None}})
        self.h.patch(f"{JOBS}/pi/status", {"status": {
            "uncountedTerminatedPods": {"succeeded": [pod["metadata"]["uid"]]}}})
        self.h.jobs()
        status = self.status()
        self.assertEqual((status["succeeded"], status["uncountedTerminatedPods"]), (1, {}))
        self.assertEqual(len(self.h.pods()), 1)
