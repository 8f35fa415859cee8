"""A simulated pod's life on the clock: the states, conditions and events upstream shows."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.orchlet.behaviour import IMAGE_BYTES
from orchd.orchlet.simulated import SimulatedRuntime
from tests.orchlet.test_simulated import Observer, pod

T0 = "2023-11-14T22:13:20Z"


def at(seconds):
    """The RFC 3339 time C{seconds} after T0."""
    from orchd.api.meta import rfc3339
    return rfc3339(1_700_000_000 + seconds)


class LifecycleTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.clock.advance(1_700_000_000)
        self.runtime = SimulatedRuntime(self.clock, host_ip="192.0.2.7")
        self.observer = Observer()
        self.runtime.observe(self.observer)

    def run_pod(self, **kwargs):
        kwargs.setdefault("start_after", None)
        self.runtime.sync_pod(pod(**kwargs))
        return kwargs.get("name", "web")

    def status(self, name="web"):
        return self.runtime.pod_status("default", name)

    def conditions(self, name="web"):
        return {c["type"]: c for c in self.status(name)["conditions"]}

    def container(self, name="web", index=0, field="containerStatuses"):
        return self.status(name)[field][index]

    def events(self, since=0):
        return [(type, reason, message, path)
                for _, type, reason, message, path in self.observer.events[since:]]

    def test_container_creating_then_running_and_ready(self):
        """An image pulled in 1 s: ContainerCreating with upstream's conditions, then Running."""
        spec = pod(containers=(), start_after=None)
        spec["spec"]["containers"] = [{"name": "nginx", "image": "nginx"}]
        self.runtime.sync_pod(spec)
        status = self.status()
        self.assertEqual(status["phase"], "Pending")
        self.assertEqual(status["startTime"], T0)
        nginx = self.container()
        self.assertEqual(nginx, {"name": "nginx", "state": {"waiting": {"reason":
                                                                         "ContainerCreating"}},
                                 "lastState": {}, "ready": False, "restartCount": 0,
                                 "image": "nginx", "imageID": "", "started": False})
        conditions = self.conditions()
        self.assertEqual([c["type"] for c in status["conditions"]],
                         ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                          "PodScheduled"])
        self.assertEqual(conditions["Ready"], {
            "type": "Ready", "status": "False", "reason": "ContainersNotReady",
            "message": "containers with unready status: [nginx]", "lastTransitionTime": T0})
        self.assertEqual(conditions["ContainersReady"]["reason"], "ContainersNotReady")
        self.assertEqual(conditions["PodReadyToStartContainers"]["status"], "True")
        self.assertEqual(conditions["Initialized"]["status"], "True")
        self.assertEqual(self.events(), [
            ("Normal", "Pulling", 'Pulling image "nginx"', "spec.containers{nginx}")])
        self.clock.advance(1)
        status = self.status()
        self.assertEqual(status["phase"], "Running")
        nginx = self.container()
        self.assertEqual(nginx["state"], {"running": {"startedAt": at(1)}})
        self.assertEqual((nginx["ready"], nginx["started"]), (True, True))
        self.assertTrue(nginx["containerID"].startswith("simulated://"))
        self.assertEqual(self.conditions()["Ready"], {"type": "Ready", "status": "True",
                                                      "lastTransitionTime": at(1)})
        self.assertEqual(self.events()[1:], [
            ("Normal", "Pulled", f'Successfully pulled image "nginx" in 1s (1s including '
                                 f'waiting). Image size: {IMAGE_BYTES} bytes.',
             "spec.containers{nginx}"),
            ("Normal", "Created", "Created container: nginx", "spec.containers{nginx}"),
            ("Normal", "Started", "Started container nginx", "spec.containers{nginx}")])

    def test_ready_after_annotation(self):
        """ready-after keeps a started container unready for that long."""
        self.run_pod(start_after="0s", annotations={"orchlet.orch.io/ready-after": "5s"})
        self.assertEqual(self.status()["phase"], "Running")
        self.assertEqual(self.container()["ready"], False)
        self.assertEqual(self.container()["started"], True)
        self.assertEqual(self.conditions()["Ready"]["status"], "False")
        self.clock.advance(4.9)
        self.assertEqual(self.container()["ready"], False)
        self.clock.advance(0.1)
        self.assertEqual(self.container()["ready"], True)
        self.assertEqual(self.conditions()["Ready"]["lastTransitionTime"], at(5))
        self.assertEqual(self.conditions()["ContainersReady"]["status"], "True")

    def test_readiness_probe_delay(self):
        """Without the annotation, a readiness probe's initialDelaySeconds delays readiness."""
        spec = pod(start_after="0s")
        spec["spec"]["containers"][0]["readinessProbe"] = {"initialDelaySeconds": 3,
                                                           "exec": {"command": ["true"]}}
        self.runtime.sync_pod(spec)
        self.assertFalse(self.container()["ready"])
        self.clock.advance(3)
        self.assertTrue(self.container()["ready"])

    def test_start_after_annotation(self):
        """start-after replaces the pull time: Pending until then, pulled 'in' that time."""
        self.run_pod(start_after="3s")
        self.clock.advance(2.9)
        self.assertEqual(self.status()["phase"], "Pending")
        self.clock.advance(0.1)
        self.assertEqual(self.status()["phase"], "Running")
        pulled = [m for _, r, m, _ in self.events() if r == "Pulled"]
        self.assertEqual(pulled, [f'Successfully pulled image "app:1.0" in 3s (3s including '
                                  f'waiting). Image size: {IMAGE_BYTES} bytes.'])

    def test_image_that_cannot_be_pulled(self):
        """An 'invalid' image: ErrImagePull, ImagePullBackOff, pulled again after 10 s, 20 s."""
        spec = pod(start_after=None)
        spec["spec"]["containers"][0]["image"] = "nginx:invalid"
        self.runtime.sync_pod(spec)
        self.clock.advance(1)
        waiting = self.container()["state"]["waiting"]
        self.assertEqual(waiting["reason"], "ErrImagePull")
        self.assertIn("not found", waiting["message"])
        self.assertEqual(self.status()["phase"], "Pending")
        self.assertEqual([(t, r, m[:40]) for t, r, m, _ in self.events()[1:]], [
            ("Warning", "Failed", 'Failed to pull image "nginx:invalid": rp'),
            ("Warning", "Failed", "Error: ErrImagePull")])
        self.clock.advance(1)
        waiting = self.container()["state"]["waiting"]
        self.assertEqual(waiting["reason"], "ImagePullBackOff")
        self.assertTrue(waiting["message"].startswith(
            'Back-off pulling image "nginx:invalid": ErrImagePull: '))
        self.assertEqual(self.events()[3:], [
            ("Normal", "BackOff", 'Back-off pulling image "nginx:invalid"',
             "spec.containers{app}"),
            ("Warning", "Failed", "Error: ImagePullBackOff", "spec.containers{app}")])
        count = len(self.events())
        self.clock.advance(9)          # 10 s after the failure: pulled again
        self.assertEqual([r for _, r, _, _ in self.events(count)], ["Pulling"])
        self.clock.advance(1)
        self.assertEqual(self.container()["state"]["waiting"]["reason"], "ErrImagePull")
        count = len(self.events())
        self.clock.advance(1)
        self.assertEqual([r for _, r, _, _ in self.events(count)], ["BackOff", "Failed"])
        self.clock.advance(18)
        self.assertEqual(self.events()[-1][1], "Failed")
        self.clock.advance(1)          # 20 s after the second failure
        self.assertEqual(self.events()[-1][1], "Pulling")

    def test_never_pull_policy(self):
        """An absent image with pull policy Never is ErrImageNeverPull, for good."""
        spec = pod(start_after=None)
        spec["spec"]["containers"][0]["imagePullPolicy"] = "Never"
        self.runtime.sync_pod(spec)
        self.assertEqual(self.container()["state"]["waiting"]["reason"], "ErrImageNeverPull")
        self.assertEqual(self.events(), [
            ("Warning", "ErrImageNeverPull",
             'Container image "app:1.0" is not present with pull policy of Never',
             "spec.containers{app}")])

    def test_exit_with_restart_policy_never(self):
        """exit-after and exit-code end a Never pod Succeeded (code 0) or Failed."""
        notes = {"orchlet.orch.io/exit-after": "10s"}
        self.run_pod(name="ok", uid="1", start_after="0s", annotations=notes,
                     restartPolicy="Never")
        self.run_pod(name="bad", uid="2", start_after="0s", restartPolicy="Never",
                     annotations=dict(notes, **{"orchlet.orch.io/exit-code": "3"}))
        self.clock.advance(10)
        self.assertEqual(self.status("ok")["phase"], "Succeeded")
        state = self.container("ok")["state"]["terminated"]
        self.assertEqual((state["exitCode"], state["reason"], state["startedAt"],
                          state["finishedAt"]), (0, "Completed", T0, at(10)))
        ready = self.conditions("ok")["Ready"]
        self.assertEqual((ready["status"], ready["reason"]), ("False", "PodCompleted"))
        self.assertEqual(self.conditions("ok")["PodReadyToStartContainers"]["status"], "False")
        self.assertEqual(self.status("bad")["phase"], "Failed")
        self.assertEqual(self.container("bad")["state"]["terminated"]["reason"], "Error")
        self.assertEqual(self.conditions("bad")["Ready"]["reason"], "PodFailed")

    def job_pod(self, name, policy="Never", annotations=None):
        body = pod(name=name, uid=name, annotations=annotations, restartPolicy=policy)
        body["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "pi", "uid": "j1",
             "controller": True}]
        self.runtime.sync_pod(body)

    def test_job_pod_completes_by_default(self):
        """A Job's Never pod without annotations runs 1 s and ends Succeeded; a plain Never pod keeps running."""
        self.job_pod("done")
        self.run_pod(name="plain", uid="3", start_after="0s", restartPolicy="Never")
        self.clock.advance(0.9)
        self.assertEqual(self.status("done")["phase"], "Running")
        self.clock.advance(0.1)
        self.assertEqual(self.status("done")["phase"], "Succeeded")
        state = self.container("done")["state"]["terminated"]
        self.assertEqual((state["exitCode"], state["reason"]), (0, "Completed"))
        self.assertEqual(self.conditions("done")["Ready"]["reason"], "PodCompleted")
        self.clock.advance(60)
        self.assertEqual(self.status("plain")["phase"], "Running")

    def test_job_pod_exit_code_annotation(self):
        """A Job's pod fails with the exit code its annotation asks for, after exit-after if set."""
        self.job_pod("bad", annotations={"orchlet.orch.io/exit-code": "7"})
        self.job_pod("late", annotations={"orchlet.orch.io/exit-after": "30s"})
        self.clock.advance(1)
        self.assertEqual(self.status("bad")["phase"], "Failed")
        terminated = self.container("bad")["state"]["terminated"]
        self.assertEqual((terminated["exitCode"], terminated["reason"]), (7, "Error"))
        self.assertEqual(self.status("late")["phase"], "Running")
        self.clock.advance(29)
        self.assertEqual(self.status("late")["phase"], "Succeeded")

    def test_job_pod_on_failure_restarts(self):
        """A Job's OnFailure pod that fails restarts with back-off, its restart count growing."""
        self.job_pod("retry", policy="OnFailure", annotations={"orchlet.orch.io/exit-code": "1"})
        self.clock.advance(1)
        self.assertEqual(self.container("retry")["restartCount"], 1)
        self.clock.advance(1)
        self.assertEqual(self.container("retry")["state"]["waiting"]["reason"],
                         "CrashLoopBackOff")
        self.clock.advance(11)
        self.assertEqual(self.container("retry")["restartCount"], 2)
        self.assertEqual(self.status("retry")["phase"], "Running")

    def test_crash_loop(self):
        """An exiting container restarts at once, then after 10 s, 20 s (CrashLoopBackOff)."""
        self.run_pod(start_after="0s", annotations={"orchlet.orch.io/exit-after": "5s",
                                                     "orchlet.orch.io/exit-code": "1"})
        self.clock.advance(5)
        app = self.container()
        self.assertEqual((app["restartCount"], list(app["state"])), (1, ["running"]))
        self.assertEqual(app["lastState"]["terminated"]["exitCode"], 1)
        self.assertEqual(self.status()["phase"], "Running")
        self.clock.advance(5)
        app = self.container()
        waiting = app["state"]["waiting"]
        self.assertEqual(waiting["reason"], "CrashLoopBackOff")
        self.assertEqual(waiting["message"], "back-off 10s restarting failed container=app "
                                             "pod=web_default(u1)")
        self.assertEqual(self.status()["phase"], "Running")
        self.assertEqual(self.events()[-1], (
            "Warning", "BackOff", "Back-off restarting failed container app in pod "
                                  "web_default(u1)", "spec.containers{app}"))
        self.clock.advance(10)
        self.assertEqual((self.container()["restartCount"], list(self.container()["state"])),
                         (2, ["running"]))
        self.clock.advance(5)
        self.assertEqual(self.container()["state"]["waiting"]["message"][:12], "back-off 20s")

    def test_init_containers(self):
        """Init containers run first, one at a time; the others wait in PodInitializing."""
        spec = pod(start_after=None)
        spec["spec"]["initContainers"] = [{"name": "setup", "image": "busybox:1.36"}]
        self.runtime.sync_pod(spec)
        status = self.status()
        self.assertEqual(status["phase"], "Pending")
        self.assertEqual(status["initContainerStatuses"][0]["state"],
                         {"waiting": {"reason": "PodInitializing"}})
        self.assertEqual(self.container()["state"], {"waiting": {"reason": "PodInitializing"}})
        initialized = self.conditions()["Initialized"]
        self.assertEqual((initialized["status"], initialized["reason"], initialized["message"]),
                         ("False", "ContainersNotInitialized",
                          "containers with incomplete status: [setup]"))
        self.clock.advance(1)
        setup = self.container(field="initContainerStatuses")
        self.assertEqual(setup["state"]["terminated"]["reason"], "Completed")
        self.assertEqual(self.conditions()["Initialized"]["status"], "True")
        self.assertEqual(self.status()["phase"], "Pending")       # app's image being pulled
        self.clock.advance(1)
        self.assertEqual(self.status()["phase"], "Running")
        self.assertEqual([(r, p) for _, r, _, p in self.events() if r == "Started"],
                         [("Started", "spec.initContainers{setup}"),
                          ("Started", "spec.containers{app}")])

    def test_readiness_gates(self):
        """Ready waits for the pod's readiness gates, read from its stored conditions."""
        spec = pod(start_after="0s", readinessGates=[{"conditionType": "example.com/lb"}])
        self.runtime.sync_pod(spec)
        ready = self.conditions()["Ready"]
        self.assertEqual((ready["status"], ready["reason"], ready["message"]),
                         ("False", "ReadinessGatesNotReady", 'corresponding condition of pod '
                          'readiness gate "example.com/lb" does not exist.'))
        self.assertEqual(self.conditions()["ContainersReady"]["status"], "True")
        spec = dict(spec, status={"conditions": [{"type": "example.com/lb", "status": "True"}]})
        spec["metadata"] = dict(spec["metadata"], resourceVersion="2")
        self.runtime.sync_pod(spec)
        self.assertEqual(self.conditions()["Ready"]["status"], "True")

    def test_stop_within_grace(self):
        """Stopping: Killing events, then exit 0 after stop-after; the pod ends Succeeded."""
        self.run_pod(start_after="0s", containers=("app", "side"),
                     annotations={"orchlet.orch.io/stop-after": "2s"})
        count = len(self.events())
        stopped = []
        self.runtime.stop_pod("default", "web", 30).addCallback(stopped.append)
        self.assertEqual(self.events(count), [
            ("Normal", "Killing", "Stopping container app", "spec.containers{app}"),
            ("Normal", "Killing", "Stopping container side", "spec.containers{side}")])
        self.assertEqual(self.conditions()["Ready"]["status"], "False")
        self.assertEqual(self.status()["phase"], "Running")
        self.clock.advance(2)
        self.assertEqual(stopped, [None])
        self.assertEqual(self.status()["phase"], "Succeeded")
        state = self.container()["state"]["terminated"]
        self.assertEqual((state["exitCode"], state["reason"]), (0, "Completed"))

    def test_stop_past_grace_is_a_kill(self):
        """A container slower to stop than the grace period is killed (137) at its end."""
        self.run_pod(start_after="0s", annotations={"orchlet.orch.io/stop-after": "1m"})
        self.runtime.stop_pod("default", "web", 30)
        self.clock.advance(29)
        self.assertIn("running", self.container()["state"])
        self.runtime.stop_pod("default", "web", 60)      # a longer grace changes nothing
        self.clock.advance(1)
        state = self.container()["state"]["terminated"]
        self.assertEqual((state["exitCode"], state["reason"]), (137, "Error"))
        self.assertEqual(self.status()["phase"], "Failed")

    def test_stop_shortened(self):
        """A second stop with a shorter grace brings the kill forward."""
        self.run_pod(start_after="0s", annotations={"orchlet.orch.io/stop-after": "1m"})
        self.runtime.stop_pod("default", "web", 30)
        self.clock.advance(5)
        stopped = self.runtime.stop_pod("default", "web", 2)
        self.clock.advance(2)
        self.successResultOf(stopped)
        self.assertEqual(self.container()["state"]["terminated"]["exitCode"], 137)

    def test_stop_before_start(self):
        """A container stopped before it ever ran ends as ContainerStatusUnknown; the pod Failed."""
        self.run_pod(start_after="10s")
        self.successResultOf(self.runtime.stop_pod("default", "web", 30))
        state = self.container()["state"]["terminated"]
        self.assertEqual((state["exitCode"], state["reason"], state["message"]),
                         (137, "ContainerStatusUnknown",
                          "The container could not be located when the pod was terminated"))
        self.assertEqual(self.status()["phase"], "Failed")
        self.clock.advance(10)
        self.assertEqual(self.status()["phase"], "Failed")     # nothing starts any more

    def test_unreadable_annotation(self):
        """An annotation that cannot be read is named in a Warning event and ignored."""
        self.run_pod(start_after="soon")
        [(type, reason, message, path)] = self.events()[:1]
        self.assertEqual((type, reason, path), ("Warning", "FailedSimulation", None))
        self.assertIn("orchlet.orch.io/start-after", message)
        self.clock.advance(1)
        self.assertEqual(self.status()["phase"], "Running")

    def test_one_timer_per_pod(self):
        """A pod waiting on several things holds one timer, for the first of them."""
        self.run_pod(start_after="0s", annotations={"orchlet.orch.io/ready-after": "5s",
                                                     "orchlet.orch.io/exit-after": "9s"})
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        self.assertEqual(self.clock.getDelayedCalls()[0].getTime(), 1_700_000_005)
        self.runtime.kill_pod("default", "web")
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_restarted_agent_carries_on(self):
        """A runtime started anew takes over what the stored status shows running: no restart."""
        self.run_pod(start_after="0s", annotations={"orchlet.orch.io/ready-after": "5s"})
        self.clock.advance(1)
        stored = self.runtime.pod_status("default", "web")
        spec = pod(start_after="0s", annotations={"orchlet.orch.io/ready-after": "5s"})
        spec["status"] = dict(stored, podIP="10.88.0.9")
        again = SimulatedRuntime(self.clock, host_ip="192.0.2.7")
        observer = Observer()
        again.observe(observer)
        again.sync_pod(spec)
        status = again.pod_status("default", "web")
        self.assertEqual((status["phase"], status["startTime"], status["podIP"]),
                         ("Running", T0, "10.88.0.9"))
        app = status["containerStatuses"][0]
        self.assertEqual((app["state"], app["containerID"], app["ready"]),
                         (stored["containerStatuses"][0]["state"],
                          stored["containerStatuses"][0]["containerID"], False))
        self.assertEqual(observer.events, [])
        self.clock.advance(4)                      # ready 5 s after the container started
        self.assertTrue(again.pod_status("default", "web")["containerStatuses"][0]["ready"])

    def test_image_change_restarts_the_container(self):
        """A new image for a running container: Killing, then the new one, restartCount 1."""
        self.run_pod(start_after="0s")
        spec = pod(start_after="0s")
        spec["metadata"]["resourceVersion"] = "2"
        spec["spec"]["containers"][0]["image"] = "app:2.0"
        count = len(self.events())
        self.runtime.sync_pod(spec)
        self.assertEqual(self.events(count)[0], (
            "Normal", "Killing", "Container app definition changed, will be restarted",
            "spec.containers{app}"))
        self.clock.advance(1)
        app = self.container()
        self.assertEqual((app["image"], app["restartCount"], list(app["state"])),
                         ("app:2.0", 1, ["running"]))
        self.assertEqual(app["lastState"]["terminated"]["exitCode"], 0)
