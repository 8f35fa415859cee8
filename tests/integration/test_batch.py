"""
Unmodified kubectl and the official Python client driving Jobs and CronJobs
against a real server with its scheduler and two simulated nodes, whose
Job pods end by themselves (after 1 s, or with the exit code an
annotation asks for).
"""

from twisted.internet import threads
from twisted.trial.unittest import SkipTest, TestCase

from tests.integration.test_kubectl import KubectlMixin

try:
    import kubernetes
except ImportError:  # pragma: no cover - the test extra is not installed
    kubernetes = None


def job_manifest(name, annotations=None, **spec):
    template = {"spec": {"restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "busybox",
                                         "command": ["sh", "-c", "exit 0"]}]}}
    if annotations:
        template["metadata"] = {"annotations": annotations}
    spec["template"] = template
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


class BatchKubectlTests(KubectlMixin, TestCase):
    timeout = 180
    server_settings = {"no_orchlet": False, "simulated_nodes": 2}

    async def wait(self, what, condition):
        _, out, _ = await self.kubectl("wait", f"--for=condition={condition}", what,
                                       "--timeout=60s")
        return out

    async def test_job_completes_and_kubectl_wait_returns(self):
        """kubectl create job, then kubectl wait --for=condition=complete returns; counted once."""
        _, out, _ = await self.kubectl("create", "job", "pi", "--image=busybox", "--",
                                       "sh", "-c", "exit 0")
        self.assertIn("job.batch/pi created", out)
        self.assertIn("job.batch/pi condition met", await self.wait("job/pi", "complete"))
        job = await self.get_json("job", "pi")
        status = job["status"]
        self.assertEqual((status["succeeded"], status["active"], status.get("failed", 0)),
                         (1, 0, 0))
        self.assertEqual(status["uncountedTerminatedPods"], {})
        pods = (await self.get_json("pods", "-l", "job-name=pi"))["items"]
        self.assertEqual([p["status"]["phase"] for p in pods], ["Succeeded"])
        self.assertNotIn("finalizers", pods[0]["metadata"])
        _, out, _ = await self.kubectl("get", "job", "pi", "--no-headers")
        self.assertEqual(out.split()[:3], ["pi", "Complete", "1/1"])

    async def test_indexed_and_failing_jobs(self):
        """An Indexed Job completes every index; a Job whose pods exit 3 fails with BackoffLimitExceeded."""
        await self.kubectl("create", "-f", "-", stdin=[
            job_manifest("indexed", completions=3, parallelism=3, completionMode="Indexed"),
            job_manifest("broken", annotations={"orchlet.orch.io/exit-code": "3"},
                         backoffLimit=0)])
        await self.wait("job/indexed", "complete")
        await self.wait("job/broken", "failed")
        indexed = (await self.get_json("job", "indexed"))["status"]
        self.assertEqual((indexed["completedIndexes"], indexed["succeeded"]), ("0-2", 3))
        pods = (await self.get_json("pods", "-l", "job-name=indexed"))["items"]
        self.assertEqual(sorted(p["spec"]["hostname"] for p in pods),
                         ["indexed-0", "indexed-1", "indexed-2"])
        broken = (await self.get_json("job", "broken"))["status"]
        failed = [c for c in broken["conditions"] if c["type"] == "Failed"][0]
        self.assertEqual((failed["reason"], failed["message"], broken["failed"]),
                         ("BackoffLimitExceeded", "Job has reached the specified backoff limit",
                          1))
        pod = (await self.get_json("pods", "-l", "job-name=broken"))["items"][0]
        terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        self.assertEqual((terminated["exitCode"], terminated["reason"]), (3, "Error"))

    async def test_create_job_from_cronjob(self):
        """kubectl create cronjob, then create job --from=cronjob/x runs the template to completion."""
        await self.kubectl("create", "cronjob", "tick", "--image=busybox",
                           "--schedule=0 0 1 1 *", "--", "sh", "-c", "exit 0")
        cronjob = await self.get_json("cronjob", "tick")
        self.assertEqual(cronjob["spec"]["concurrencyPolicy"], "Allow")
        _, out, _ = await self.kubectl("create", "job", "manual", "--from=cronjob/tick")
        self.assertIn("job.batch/manual created", out)
        await self.wait("job/manual", "complete")
        job = await self.get_json("job", "manual")
        self.assertEqual(job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"],
                         "manual")
        self.assertEqual(job["metadata"]["ownerReferences"][0]["kind"], "CronJob")
        _, out, _ = await self.kubectl("get", "cronjob", "tick", "--no-headers")
        self.assertEqual(out.split()[:2], ["tick", "0"])
        _, out, _ = await self.kubectl("describe", "job", "manual")
        self.assertIn("1 Succeeded / 0 Failed", out)
        self.assertIn("Completed", out)
        await self.kubectl("describe", "cronjob", "tick")

    async def test_python_client_reads_jobs_and_cronjobs(self):
        """The official client reads a finished Job and a CronJob that ran, through its models."""
        if kubernetes is None:
            raise SkipTest("the kubernetes package (the test extra) is not installed")
        await self.kubectl("create", "job", "pi", "--image=busybox")
        await self.kubectl("create", "cronjob", "every", "--image=busybox",
                           "--schedule=* * * * *")
        await self.wait("job/pi", "complete")

        def run():
            configuration = kubernetes.client.Configuration()
            kubernetes.config.load_kube_config(
                config_file=self.server.plane.pki.admin_orchconfig_path,
                client_configuration=configuration)
            with kubernetes.client.ApiClient(configuration) as client:
                batch = kubernetes.client.BatchV1Api(client)
                return (batch.read_namespaced_job("pi", "default"),
                        batch.list_namespaced_job("default"),
                        batch.read_namespaced_cron_job("every", "default"),
                        batch.list_namespaced_cron_job("default"))

        job, jobs, cronjob, cronjobs = await threads.deferToThread(run)
        self.assertEqual(job.status.succeeded, 1)
        self.assertEqual([c.type for c in job.status.conditions],
                         ["SuccessCriteriaMet", "Complete"])
        self.assertIn("pi", [j.metadata.name for j in jobs.items])
        self.assertEqual(cronjob.spec.schedule, "* * * * *")
        self.assertEqual([c.metadata.name for c in cronjobs.items], ["every"])
