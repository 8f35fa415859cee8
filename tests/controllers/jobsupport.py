"""
What the Job and CronJob controllers' tests share: Jobs and CronJobs to
create, and a fake kubelet that finishes a Job's pods.
"""

from orchd.controllers.job import JobController
from tests.controllers.workloadsupport import PODS, WorkloadHarness

JOBS = "/apis/batch/v1/namespaces/default/jobs"
CRONJOBS = "/apis/batch/v1/namespaces/default/cronjobs"


def job(name="pi", completions=None, parallelism=None, restart="Never", **spec):
    """A Job as C{kubectl create job} sends it (no selector), with C{spec} added."""
    if completions is not None:
        spec["completions"] = completions
    if parallelism is not None:
        spec["parallelism"] = parallelism
    spec["template"] = {"spec": {"restartPolicy": restart,
                                 "containers": [{"name": "main", "image": "busybox"}]}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


class JobHarness(WorkloadHarness):
    """A L{WorkloadHarness} with the Job controller and a kubelet that ends pods."""

    def jobs(self):
        return self.start(JobController(self.api.catalog, self.clock))

    def job(self, name="pi"):
        return self.get(f"{JOBS}/{name}")

    def all_pods(self):
        return sorted(self.get(PODS)["items"], key=lambda p: p["metadata"]["name"])

    def finish(self, name, phase="Succeeded", code=0, conditions=(), restarts=0):
        """The kubelet: the pod ran and ended in C{phase}, its container with exit C{code}."""
        self.set_pod_status(name)
        self.patch(f"{PODS}/{name}/status", {"status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "False"}] + list(conditions),
            "containerStatuses": [{
                "name": "main", "image": "busybox", "imageID": "", "ready": False,
                "restartCount": restarts,
                "state": {"terminated": {"exitCode": code, "finishedAt": "2023-11-14T22:13:20Z",
                                         "reason": "Completed" if code == 0 else "Error"}}}]}})

    def finish_all(self, phase="Succeeded", code=0):
        """End every active pod; returns their names."""
        names = self.pod_names()
        for name in names:
            self.finish(name, phase, code)
        self.finish_deletions()
        return names

    def conditions(self, name="pi"):
        return [(c["type"], c["status"], c.get("reason"))
                for c in (self.job(name).get("status") or {}).get("conditions") or ()]
