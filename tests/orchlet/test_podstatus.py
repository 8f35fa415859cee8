"""Pod phase and conditions from container states, by the kubelet's rules, and the merge."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.orchlet.podstatus import (
    go_list, merge_status, owned_conditions, pod_phase, same_status, status_patch,
)

WAITING = {"waiting": {"reason": "ContainerCreating"}}
RUNNING = {"running": {"startedAt": "2024-01-01T00:00:00Z"}}


def terminated(code):
    return {"terminated": {"exitCode": code}}


def statuses(*states, ready=False, last=None):
    return [{"name": f"c{i}", "state": state, "ready": ready, "lastState": last or {}}
            for i, state in enumerate(states)]


def spec(count=1, policy=None, init=0):
    body = {"containers": [{"name": f"c{i}"} for i in range(count)]}
    if init:
        body["initContainers"] = [{"name": f"i{i}"} for i in range(init)]
    if policy:
        body["restartPolicy"] = policy
    return body


class PhaseTests(SynchronousTestCase):
    def test_pending_and_running(self):
        """Waiting containers make Pending; all started with one running make Running."""
        self.assertEqual(pod_phase(spec(2), [], statuses(WAITING, RUNNING)), "Pending")
        self.assertEqual(pod_phase(spec(2), [], statuses(RUNNING, RUNNING)), "Running")
        self.assertEqual(pod_phase(spec(2), [], statuses(RUNNING)), "Pending")   # one unknown

    def test_all_terminated(self):
        """All stopped: Running under Always, else Succeeded or Failed by exit codes."""
        done = statuses(terminated(0), terminated(0))
        failed = statuses(terminated(0), terminated(2))
        self.assertEqual(pod_phase(spec(2), [], done), "Running")
        self.assertEqual(pod_phase(spec(2, "Never"), [], done), "Succeeded")
        self.assertEqual(pod_phase(spec(2, "Never"), [], failed), "Failed")
        self.assertEqual(pod_phase(spec(2, "OnFailure"), [], failed), "Running")
        self.assertEqual(pod_phase(spec(2, "OnFailure"), [], done), "Succeeded")

    def test_terminal(self):
        """A pod stopped for good is Succeeded or Failed whatever its policy."""
        self.assertEqual(pod_phase(spec(1), [], statuses(terminated(0)), terminal=True),
                         "Succeeded")
        self.assertEqual(pod_phase(spec(1), [], statuses(terminated(137)), terminal=True),
                         "Failed")

    def test_crash_loop_counts_as_stopped(self):
        """A container waiting to restart after an exit is stopped, not pending."""
        looping = statuses(WAITING, last=terminated(1))
        self.assertEqual(pod_phase(spec(1), [], looping), "Running")
        self.assertEqual(pod_phase(spec(1, "Never"), [], looping), "Failed")

    def test_init_containers(self):
        """Unfinished init containers keep the pod Pending; a failed one fails a Never pod."""
        init_running = [{"name": "i0", "state": RUNNING}]
        self.assertEqual(pod_phase(spec(1, init=1), init_running, statuses(WAITING)), "Pending")
        init_failed = [{"name": "i0", "state": terminated(1)}]
        self.assertEqual(pod_phase(spec(1, "Never", init=1), init_failed, statuses(WAITING)),
                         "Failed")
        init_done = [{"name": "i0", "state": terminated(0)}]
        self.assertEqual(pod_phase(spec(1, init=1), init_done, statuses(RUNNING)), "Running")


class ConditionTests(SynchronousTestCase):
    def conditions(self, *args, **kwargs):
        return {c["type"]: c for c in owned_conditions(*args, **kwargs)}

    def test_go_list(self):
        """Names print as Go prints a []string."""
        self.assertEqual(go_list(["a", "b"]), "[a b]")
        self.assertEqual(go_list([]), "[]")

    def test_not_ready(self):
        """Unready containers are named in Ready and ContainersReady."""
        found = self.conditions(spec(2), [], statuses(RUNNING, WAITING), "Pending", True)
        self.assertEqual(found["ContainersReady"], {
            "type": "ContainersReady", "status": "False", "reason": "ContainersNotReady",
            "message": "containers with unready status: [c0 c1]"})
        self.assertEqual(dict(found["Ready"], type="ContainersReady"), found["ContainersReady"])
        self.assertEqual(found["PodReadyToStartContainers"]["status"], "True")
        self.assertEqual(found["PodScheduled"], {"type": "PodScheduled", "status": "True"})

    def test_unknown_containers(self):
        """Containers without a status are named as unknown first."""
        found = self.conditions(spec(2), [], statuses(RUNNING), "Pending", True)
        self.assertEqual(found["ContainersReady"]["message"],
                         "containers with unknown status: [c1], "
                         "containers with unready status: [c0]")

    def test_completed_and_failed(self):
        """A Succeeded pod's conditions say PodCompleted; a Failed pod's PodFailed."""
        done = statuses(terminated(0))
        found = self.conditions(spec(1, "Never"), [], done, "Succeeded", False)
        self.assertEqual((found["Ready"]["reason"], found["Initialized"]["reason"]),
                         ("PodCompleted", "PodCompleted"))
        self.assertEqual(found["PodReadyToStartContainers"]["status"], "False")
        found = self.conditions(spec(1, "Never"), [], statuses(terminated(1)), "Failed", False)
        self.assertEqual(found["ContainersReady"]["reason"], "PodFailed")

    def test_readiness_gates(self):
        """Ready containers with a gate that is missing or not True leave the pod unready."""
        body = dict(spec(1), readinessGates=[{"conditionType": "a"}, {"conditionType": "b"}])
        ready = statuses(RUNNING, ready=True)
        found = self.conditions(body, [], ready, "Running", True,
                                [{"type": "a", "status": "False"}])
        self.assertEqual(found["Ready"], {
            "type": "Ready", "status": "False", "reason": "ReadinessGatesNotReady",
            "message": 'the status of pod readiness gate "a" is not "True", but False, '
                       'corresponding condition of pod readiness gate "b" does not exist.'})
        found = self.conditions(body, [], ready, "Running", True,
                                [{"type": "a", "status": "True"}, {"type": "b", "status": "True"}])
        self.assertEqual(found["Ready"], {"type": "Ready", "status": "True"})


class MergeTests(SynchronousTestCase):
    stored = {"phase": "Pending", "qosClass": "BestEffort", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "T-scheduler"},
        {"type": "DisruptionTarget", "status": "True", "lastTransitionTime": "T-other"},
        {"type": "Ready", "status": "True", "lastTransitionTime": "T-old"}]}
    reported = {"phase": "Running", "podIP": "10.88.0.2", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "T-node"},
        {"type": "Ready", "status": "False", "reason": "ContainersNotReady",
         "lastTransitionTime": "T-node"}]}

    def test_merge(self):
        """Reported fields win; others' conditions and fields stay; unchanged times are kept."""
        merged = merge_status(self.stored, self.reported)
        self.assertEqual((merged["phase"], merged["podIP"], merged["qosClass"]),
                         ("Running", "10.88.0.2", "BestEffort"))
        found = {c["type"]: c for c in merged["conditions"]}
        self.assertEqual(found["PodScheduled"]["lastTransitionTime"], "T-scheduler")
        self.assertEqual(found["Ready"]["lastTransitionTime"], "T-node")
        self.assertEqual(found["DisruptionTarget"]["lastTransitionTime"], "T-other")

    def test_patch_carries_only_owned(self):
        """The status patch names the agent's fields and conditions, no one else's."""
        patch = status_patch(merge_status(self.stored, self.reported))["status"]
        self.assertNotIn("qosClass", patch)
        self.assertEqual(sorted(c["type"] for c in patch["conditions"]),
                         ["PodScheduled", "Ready"])

    def test_same_status_ignores_condition_order(self):
        """Two statuses differing only in the order of their conditions are the same."""
        flipped = dict(self.stored, conditions=list(reversed(self.stored["conditions"])))
        self.assertTrue(same_status(self.stored, flipped))
        self.assertFalse(same_status(self.stored, dict(self.stored, phase="Running")))

    def test_same_status_ignores_nulls(self):
        """A stored null field and an absent one agree (a merge patch drops nulls)."""
        stored = {"conditions": [{"type": "Ready", "status": "True", "lastProbeTime": None}]}
        reported = {"conditions": [{"type": "Ready", "status": "True"}]}
        self.assertTrue(same_status(stored, reported))
