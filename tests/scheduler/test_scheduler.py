"""The scheduler service over a whole API server in memory, on a Clock."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.scheduler.binder import DefaultBinder
from orchd.scheduler.scheduler import Scheduler
from tests.scheduler.support import node, pod
from tests.support import APIHarness

PODS = "/api/v1/namespaces/default/pods"
NOT_READY = {"key": "node.orch.io/not-ready", "effect": "NoSchedule"}


def one_turn(clock):
    """Run what is due now, as one reactor iteration does (not what that schedules)."""
    due = [call for call in clock.getDelayedCalls() if call.getTime() <= clock.seconds()]
    for call in due:
        clock.calls.remove(call)
        call.func(*call.args, **call.kw)


class FlakyBinder:
    """Refuses the first C{failures} bindings with a 500, then binds as the API does."""

    def __init__(self, catalog, failures=1):
        self.real = DefaultBinder(catalog)
        self.failures = failures

    async def bind(self, pod_info, node_name):
        if self.failures:
            self.failures -= 1
            raise StatusError.internal("the store is resting")
        await self.real.bind(pod_info, node_name)


class SchedulerTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.scheduler = None

    def start(self, **kwargs):
        self.scheduler = Scheduler(self.api.catalog, self.api.clock, **kwargs)
        self.scheduler.startService()
        self.addCleanup(self.scheduler.stopService)
        self.settle()

    def settle(self, seconds=0):
        """Let the scheduler run its turns (and C{seconds} pass)."""
        self.api.clock.advance(seconds)
        for _ in range(50):
            self.api.clock.advance(0)

    def add_node(self, *args, **kwargs):
        obj = node(*args, **kwargs)
        self.assertEqual(self.api.call("POST", "/api/v1/nodes", obj)[0], 201)
        self.assertEqual(self.api.call("PUT", f"/api/v1/nodes/{obj['metadata']['name']}/status",
                                       obj)[0], 200)

    def add_pod(self, *args, **kwargs):
        obj = pod(*args, **kwargs)
        del obj["metadata"]["uid"], obj["metadata"]["namespace"]
        code, created, _ = self.api.call("POST", PODS, obj)
        self.assertEqual(code, 201, created)
        return created

    def get(self, name):
        return self.api.call("GET", f"{PODS}/{name}")[1]

    def node_of(self, name):
        return self.get(name)["spec"].get("nodeName")

    def events(self, reason):
        items = self.api.call("GET", "/api/v1/namespaces/default/events")[1]["items"]
        return [e for e in items if e["reason"] == reason]

    def scheduled_condition(self, name):
        conditions = (self.get(name).get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "PodScheduled"), None)

    def test_spread_across_nodes(self):
        """Six pods of one ReplicaSet on three equal nodes land two on each."""
        for name in ("n1", "n2", "n3"):
            self.add_node(name)
        self.start()
        for i in range(6):
            self.add_pod(f"web-{i}", cpu="100m", owner="rs-web")
        self.settle()
        placed = [self.node_of(f"web-{i}") for i in range(6)]
        self.assertEqual(sorted(placed), ["n1", "n1", "n2", "n2", "n3", "n3"])

    def test_bound_pod_events_and_condition(self):
        """A bound pod has PodScheduled=True and a Scheduled event naming its node."""
        self.add_node("n1")
        self.start()
        self.add_pod("solo")
        self.settle()
        self.assertEqual(self.scheduled_condition("solo")["status"], "True")
        [event] = self.events("Scheduled")
        self.assertEqual((event["type"], event["message"], event["source"]),
                         ("Normal", "Successfully assigned default/solo to n1",
                          {"component": "default-scheduler"}))
        self.assertEqual(event["involvedObject"]["name"], "solo")

    def test_tainted_node_avoided(self):
        """Pods go around a node whose NoSchedule taint they do not tolerate."""
        self.add_node("tainted", taints=[NOT_READY])
        self.add_node("open")
        self.start()
        for i in range(4):
            self.add_pod(f"p{i}", owner="rs")
        self.add_pod("tolerant", node_selector={"orch.io/hostname": "tainted"},
                     tolerations=[{"key": "node.orch.io/not-ready", "operator": "Exists"}])
        self.settle()
        self.assertEqual({self.node_of(f"p{i}") for i in range(4)}, {"open"})
        self.assertEqual(self.node_of("tolerant"), "tainted")

    def test_unschedulable_condition_and_event(self):
        """A pod no node fits gets FailedScheduling and PodScheduled=False with upstream's message."""
        self.add_node("n1", taints=[NOT_READY])
        self.add_node("n2", cpu="1")
        self.add_node("n3", cpu="1")
        self.start()
        self.add_pod("big", cpu="2")
        self.settle()
        message = ("0/3 nodes are available: 1 node(s) had untolerated taint "
                   "{node.orch.io/not-ready: }, 2 Insufficient cpu. preemption: 0/3 nodes are "
                   "available: 1 Preemption is not helpful for scheduling, 2 No preemption "
                   "victims found for incoming pod..")
        condition = self.scheduled_condition("big")
        self.assertEqual((condition["status"], condition["reason"], condition["message"]),
                         ("False", "Unschedulable", message))
        self.assertIsNone(self.node_of("big"))
        [event] = self.events("FailedScheduling")
        self.assertEqual((event["type"], event["message"]), ("Warning", message))

    def test_same_failure_not_rewritten(self):
        """Failing again for the same reason adds to the event's count, not a pod write."""
        self.add_node("n1", cpu="1")
        self.start()
        self.add_pod("big", cpu="2")
        self.settle()
        version = self.get("big")["metadata"]["resourceVersion"]
        self.settle(300)                # tried again after five minutes, and fails again
        self.assertEqual(self.get("big")["metadata"]["resourceVersion"], version)
        [event] = self.events("FailedScheduling")
        self.assertEqual(event["count"], 2)

    def test_scheduled_once_a_node_appears(self):
        """A pod without any node to go to is bound once a node registers (after its backoff)."""
        self.start()
        self.add_pod("early")
        self.settle()
        condition = self.scheduled_condition("early")
        self.assertEqual((condition["reason"], condition["message"]),
                         ("Unschedulable", "no nodes available to schedule pods"))
        self.add_node("late")
        self.settle()
        self.assertIsNone(self.node_of("early"))    # still backing off (1 s)
        self.settle(1)
        self.assertEqual(self.node_of("early"), "late")
        self.assertEqual(self.scheduled_condition("early")["status"], "True")

    def test_deleted_pod_makes_room(self):
        """When a pod leaves a full node, a pod waiting for room there is bound."""
        self.add_node("n1", pods="1")
        self.start()
        self.add_pod("first")
        self.settle()
        self.add_pod("second")
        self.settle()
        self.assertIn("1 Too many pods", self.scheduled_condition("second")["message"])
        # Gone, not just terminating: a terminating pod still holds its node's room.
        self.assertEqual(self.api.call("DELETE", f"{PODS}/first?gracePeriodSeconds=0")[0], 200)
        self.settle(1)
        self.assertEqual(self.node_of("second"), "n1")

    def test_pods_bound_by_others_are_counted(self):
        """Pods already naming a node use its room, and are left where they are."""
        self.add_node("n1", cpu="2")
        self.add_node("n2", cpu="2")
        self.add_pod("pinned", cpu="1500m", node_name="n1")
        self.start()
        self.add_pod("new", cpu="1")
        self.settle()
        self.assertEqual((self.node_of("pinned"), self.node_of("new")), ("n1", "n2"))

    def test_other_schedulers_pods_left_alone(self):
        """Pods for another scheduler, or with scheduling gates, stay unbound."""
        self.add_node("n1")
        self.start()
        self.add_pod("theirs", schedulerName="other-scheduler")
        self.add_pod("gated", schedulingGates=[{"name": "example.com/wait"}])
        self.add_pod("ours", schedulerName="default-scheduler")
        self.settle()
        self.assertEqual([self.node_of(n) for n in ("theirs", "gated", "ours")],
                         [None, None, "n1"])
        self.assertIsNone(self.scheduled_condition("theirs"))

    def test_refused_binding_retried(self):
        """A binding the API refuses is a SchedulerError, and is tried again after the backoff."""
        self.add_node("n1")
        binder = FlakyBinder(self.api.catalog)
        self.start(binder=binder)
        self.add_pod("p")
        self.settle()
        condition = self.scheduled_condition("p")
        self.assertEqual((condition["reason"], condition["message"]), (
            "SchedulerError",
            'running Bind plugin "DefaultBinder": Internal error occurred: the store is resting'))
        self.assertEqual(self.scheduler.cache.node_info("n1").pod_count, 0)
        self.settle(1)
        self.assertEqual(self.node_of("p"), "n1")
        self.assertEqual(self.scheduler.cache.node_info("n1").pod_count, 1)

    def test_decisions_read_no_store(self):
        """Placing pods reads nodes and pods from the informers, not from the store."""
        for name in ("n1", "n2"):
            self.add_node(name)
        self.start()
        for i in range(10):
            self.add_pod(f"p{i}")
        reads = []
        store_get = self.api.store.get
        self.api.store.get = lambda key: reads.append(key) or store_get(key)
        self.settle()
        self.api.store.get = store_get
        self.assertEqual([self.node_of(f"p{i}") is not None for i in range(10)], [True] * 10)
        self.assertEqual([key for key in reads if key.startswith("/registry/pods/")], [])

    def test_turns_are_short(self):
        """Each reactor turn decides a bounded number of pods, so requests are served between."""
        self.add_node("n1", pods="500")
        self.start(per_turn=4, timer=lambda: 0.0)     # time stands still: only the count bounds
        for i in range(10):
            self.add_pod(f"p{i}")
        one_turn(self.api.clock)
        self.assertEqual(sum(self.node_of(f"p{i}") is not None for i in range(10)), 4)
        self.settle()
        self.assertEqual(sum(self.node_of(f"p{i}") is not None for i in range(10)), 10)

    def test_turns_are_bounded_in_time(self):
        """A turn ends once its time is used up, however many decisions it may still make."""
        self.add_node("n1", pods="500")
        ticks = iter(range(10_000))
        self.start(per_turn=100, turn_seconds=3, timer=lambda: next(ticks))
        for i in range(10):
            self.add_pod(f"p{i}")
        one_turn(self.api.clock)
        self.assertEqual(sum(self.node_of(f"p{i}") is not None for i in range(10)), 3)
        self.settle()
        self.assertEqual(sum(self.node_of(f"p{i}") is not None for i in range(10)), 10)

    def test_stop(self):
        """A stopped scheduler binds nothing more and leaves no timer of its own."""
        self.add_node("n1")
        self.start()
        self.scheduler.stopService()
        self.add_pod("late")
        self.settle(30)
        self.assertIsNone(self.node_of("late"))

    def test_attempts_by_result(self):
        """Scheduled and unschedulable attempts are counted and timed by result and profile."""
        from orchd.scheduler.metrics import SchedulerMetrics
        metrics = SchedulerMetrics()
        self.add_node("n1", cpu="1")
        self.start(metrics=metrics)
        self.add_pod("fits", cpu="1")
        self.add_pod("big", cpu="2")
        self.settle()
        self.assertEqual(metrics.attempts.value("scheduled", "default-scheduler"), 1)
        self.assertGreaterEqual(metrics.attempts.value("unschedulable", "default-scheduler"), 1)
        self.assertEqual(metrics.duration.child("scheduled", "default-scheduler").count, 1)
        self.assertIn(b'scheduler_schedule_attempts_total{result="scheduled",'
                      b'profile="default-scheduler"} 1\n', metrics.registry.expose())
