"""Jobs and CronJobs: upstream's defaults, a Job's generated selector, and the checks."""

from twisted.trial.unittest import SynchronousTestCase

from tests.support import APIHarness

JOBS = "/apis/batch/v1/namespaces/default/jobs"
CRONJOBS = "/apis/batch/v1/namespaces/default/cronjobs"
MERGE_PATCH = b"application/merge-patch+json"


def pod_template(restart="Never", labels=None):
    template = {"spec": {"restartPolicy": restart,
                         "containers": [{"name": "c", "image": "busybox"}]}}
    if labels is not None:
        template["metadata"] = {"labels": labels}
    return template


def job(name="j", **spec):
    spec.setdefault("template", pod_template())
    return {"metadata": {"name": name}, "spec": spec}


class JobTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def create(self, body, code=201):
        got, obj, _ = self.api.call("POST", JOBS, body)
        self.assertEqual(got, code, obj)
        return obj

    def test_defaults(self):
        """A Job as kubectl create job sends it gets upstream's defaults."""
        spec = self.create(job())["spec"]
        spec.pop("template"), spec.pop("selector")
        self.assertEqual(spec, {"completions": 1, "parallelism": 1, "backoffLimit": 6,
                                "completionMode": "NonIndexed", "suspend": False,
                                "podReplacementPolicy": "TerminatingOrFailed",
                                "manualSelector": False})

    def test_parallelism_alone(self):
        """Completions stay unset when parallelism is given; a failure policy replaces on Failed."""
        spec = self.create(job(parallelism=3, podFailurePolicy={"rules": []}))["spec"]
        self.assertNotIn("completions", spec)
        self.assertEqual((spec["parallelism"], spec["podReplacementPolicy"]), (3, "Failed"))
        spec = self.create(job("per-index", completions=2, completionMode="Indexed",
                               backoffLimitPerIndex=1))["spec"]
        self.assertEqual(spec["backoffLimit"], 2 ** 31 - 1)

    def test_generated_selector(self):
        """A new Job selects its own uid, and its template carries the generated labels."""
        obj = self.create(job(template=pod_template(labels={"app": "batch"})))
        uid = obj["metadata"]["uid"]
        self.assertEqual(obj["spec"]["selector"],
                         {"matchLabels": {"batch.orch.io/controller-uid": uid}})
        self.assertEqual(obj["spec"]["template"]["metadata"]["labels"], {
            "app": "batch", "job-name": "j", "batch.orch.io/job-name": "j",
            "controller-uid": uid, "batch.orch.io/controller-uid": uid})
        self.assertEqual(obj["metadata"]["labels"], {"app": "batch"})
        self.assertEqual(obj["status"], {})

    def test_labels_follow_on_status_write(self):
        """A Job made without labels takes its template's at its next write, status too."""
        obj = self.create(job())
        self.assertNotIn("labels", obj["metadata"])
        code, obj, _ = self.api.call("PATCH", JOBS + "/j/status", {"status": {"active": 1}},
                                     content_type=MERGE_PATCH)
        self.assertEqual(code, 200)
        self.assertEqual(obj["metadata"]["labels"]["job-name"], "j")
        self.assertEqual(obj["status"], {"active": 1})

    def test_manual_selector(self):
        """With manualSelector the selector is the user's, and must pick the template."""
        obj = self.create(job(manualSelector=True, selector={"matchLabels": {"run": "x"}},
                              template=pod_template(labels={"run": "x"})))
        self.assertEqual(obj["spec"]["selector"], {"matchLabels": {"run": "x"}})
        self.assertEqual(obj["spec"]["template"]["metadata"]["labels"], {"run": "x"})
        code, status, _ = self.api.call("POST", JOBS, job(
            "m2", manualSelector=True, template=pod_template(labels={"run": "x"})))
        self.assertEqual((code, status["details"]["causes"][0]["field"]),
                         (422, "spec.selector"))

    def test_selector_not_generated(self):
        """A selector of one's own without manualSelector is refused, as upstream."""
        code, status, _ = self.api.call("POST", JOBS, job(
            selector={"matchLabels": {"run": "x"}}, template=pod_template(labels={"run": "x"})))
        self.assertEqual(code, 422)
        self.assertIn("`selector` not auto-generated", status["message"])

    def test_restart_policy(self):
        """A Job's pods restart OnFailure or Never; the default Always is refused."""
        code, status, _ = self.api.call("POST", JOBS, job(template={"spec": {
            "containers": [{"name": "c", "image": "i"}]}}))
        self.assertEqual(status["message"], 'Job.batch "j" is invalid: spec.template.spec.'
                         'restartPolicy: Required value: valid values: "OnFailure", "Never"')

    def test_counts_not_negative(self):
        """Parallelism, completions and backoffLimit may not be negative."""
        code, status, _ = self.api.call("POST", JOBS, job(parallelism=-1, backoffLimit=-2))
        self.assertEqual([c["field"] for c in status["details"]["causes"]],
                         ["spec.parallelism", "spec.backoffLimit"])

    def test_immutable_fields(self):
        """The selector, completions and the template of a started Job cannot change."""
        self.create(job())
        for patch, field in (({"spec": {"completions": 4}}, "spec.completions"),
                             ({"spec": {"template": {"spec": {"containers": [
                                 {"name": "c", "image": "other"}]}}}}, "spec.template"),
                             ({"spec": {"selector": {"matchLabels": {"a": "b"}}}},
                              "spec.selector")):
            code, status, _ = self.api.call("PATCH", JOBS + "/j", patch,
                                            content_type=MERGE_PATCH)
            self.assertEqual(code, 422, patch)
            self.assertIn(field, [c["field"] for c in status["details"]["causes"]])
        code, obj, _ = self.api.call("PATCH", JOBS + "/j", {"spec": {"parallelism": 5}},
                                     content_type=MERGE_PATCH)
        self.assertEqual((code, obj["spec"]["parallelism"]), (200, 5))

    def test_suspended_job_template_may_change(self):
        """The template of a suspended Job that never started may change."""
        self.create(job(suspend=True))
        code, _, _ = self.api.call("PATCH", JOBS + "/j", {"spec": {"template": {"spec": {
            "nodeSelector": {"disk": "ssd"}}}}}, content_type=MERGE_PATCH)
        self.assertEqual(code, 200)


class CronJobTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def cronjob(self, name="c", schedule="*/5 * * * *", **spec):
        spec.setdefault("jobTemplate", {"spec": {"template": pod_template("OnFailure")}})
        return self.api.call("POST", CRONJOBS, {"metadata": {"name": name},
                                                "spec": dict(spec, schedule=schedule)})

    def test_defaults(self):
        """A CronJob gets Allow, not suspended, and history limits 3 and 1."""
        code, obj, _ = self.cronjob()
        self.assertEqual(code, 201, obj)
        spec = obj["spec"]
        self.assertEqual({k: spec[k] for k in ("concurrencyPolicy", "suspend",
                                               "successfulJobsHistoryLimit",
                                               "failedJobsHistoryLimit")},
                         {"concurrencyPolicy": "Allow", "suspend": False,
                          "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1})
        job_spec = spec["jobTemplate"]["spec"]
        self.assertNotIn("backoffLimit", job_spec)
        self.assertEqual(job_spec["template"]["spec"]["dnsPolicy"], "ClusterFirst")

    def test_schedule(self):
        """A schedule is required and parsed; TZ belongs in timeZone."""
        code, status, _ = self.cronjob(schedule="")
        self.assertEqual(status["message"], 'CronJob.batch "c" is invalid: spec.schedule: '
                         "Required value")
        code, status, _ = self.cronjob(schedule="* * *")
        self.assertEqual(status["message"], 'CronJob.batch "c" is invalid: spec.schedule: '
                         'Invalid value: "* * *": expected exactly 5 fields, found 3: [* * *]')
        code, status, _ = self.cronjob(schedule="TZ=UTC 0 * * * *")
        self.assertEqual(status["details"]["causes"][0]["message"],
                         'Invalid value: "TZ=UTC 0 * * * *": cannot use TZ or CRON_TZ in '
                         "schedule, use timeZone field instead")

    def test_job_template(self):
        """The job template may not select, and its pods restart OnFailure or Never."""
        code, status, _ = self.cronjob(jobTemplate={"spec": {
            "selector": {"matchLabels": {"a": "b"}}, "template": pod_template("Always")}})
        self.assertEqual([c["field"] for c in status["details"]["causes"]],
                         ["spec.jobTemplate.spec.selector",
                          "spec.jobTemplate.spec.template.spec.restartPolicy"])
        code, status, _ = self.cronjob(concurrencyPolicy="Sometimes")
        self.assertEqual(status["details"]["causes"][0]["field"], "spec.concurrencyPolicy")
