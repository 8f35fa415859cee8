"""The scheduler and the controller manager as components: their checks and statuses."""

from unittest import mock

from twisted.application.service import Service
from twisted.internet.defer import Deferred, fail
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.app.components import Components, leader_election_check


class FakeElector:
    name = "orch-controller-manager"
    lease_duration = 12.0

    def __init__(self, leading=True, renewed_at=0.0):
        self.leading = leading
        self.renewed_at = renewed_at


class FakeElected:
    """What Components reads of ElectedControllers: its elector and running set."""

    def __init__(self, elector=None):
        self.elector = elector
        self.controllers = None


class FakeController(Service):
    def __init__(self, name):
        self.name = name
        self.started = Deferred()


class FakeCatalog:
    """Serves pods, nodes and bindings unless told which of them it lacks."""

    def __init__(self, *missing):
        self.missing = missing

    def resource(self, group, resource):
        return None if resource in self.missing else object()

    def connector(self, group, resource, subresource):
        return None if subresource in self.missing else object()


class FakeStore:
    def __init__(self):
        self.error = None

    def check(self):
        return fail(self.error) if self.error else None


def run(coroutine):
    results = []
    Deferred.fromCoroutine(coroutine).addBoth(results.append)
    return results[0]


class LeaderElectionCheckTests(SynchronousTestCase):
    def test_renewing_leader(self):
        """A leader that renewed within the lease duration plus 20 s is healthy."""
        clock = Clock()
        clock.advance(100)
        check = leader_election_check(FakeElector(renewed_at=69), clock)
        self.assertEqual(check.endpoints, ("healthz", "readyz"))
        self.assertIsNone(check.check())

    def test_stale_leader(self):
        """A leader whose Lease went unrenewed longer fails, naming the Lease."""
        clock = Clock()
        clock.advance(100)
        check = leader_election_check(FakeElector(renewed_at=67), clock)
        with self.assertRaises(RuntimeError) as caught:
            check.check()
        self.assertEqual(str(caught.exception),
                         "failed election to renew leadership on lease orch-controller-manager")

    def test_follower(self):
        """A process that does not lead is healthy whatever its last renewal."""
        clock = Clock()
        clock.advance(1000)
        self.assertIsNone(leader_election_check(FakeElector(leading=False), clock).check())


class ComponentsTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.components = Components(self.clock)
        self.elected = FakeElected(FakeElector(renewed_at=0))
        self.components.follow(self.elected)
        self.controllers = [FakeController("namespace"), FakeController("podgc")]

    def run_set(self, catalog=None):
        """Build and run a set as ElectedControllers does."""
        built = self.components.builder(catalog or FakeCatalog(), lambda: self.controllers)
        with mock.patch("orchd.app.components.Scheduler") as scheduler:
            scheduler.return_value.synced = False
            services = built()
        for controller in self.controllers:
            controller.startService()
        self.elected.controllers = services
        return services

    def names(self, health, endpoint):
        return [check.name for check in health.checks_for(endpoint)]

    def failures(self, health, endpoint="healthz"):
        return [name for name, _ in run(health.failures(endpoint))]

    def test_leader_election_metric(self):
        """Both ports report leader_election_master_status for the Lease; the controller
        manager's includes the work queues and the scheduler's its attempts."""
        elector = self.elected.elector
        elector.leading = True
        for registry in (self.components.scheduler_registry,
                         self.components.controller_manager_registry):
            text = registry.expose().decode()
            self.assertIn(f'leader_election_master_status{{name="{elector.name}"}} 1\n', text)
            self.assertIn("process_cpu_seconds_total", text)
        self.assertIn("# TYPE workqueue_depth gauge",
                      self.components.controller_manager_registry.expose().decode())
        self.assertIn("# TYPE scheduler_schedule_attempts_total counter",
                      self.components.scheduler_registry.expose().decode())
        elector.leading = False
        self.assertIn(f'leader_election_master_status{{name="{elector.name}"}} 0\n',
                      self.components.scheduler_registry.expose().decode())

    def test_no_registries_without_metrics(self):
        """With metrics off the ports serve no /metrics."""
        components = Components(self.clock, metrics=False)
        self.assertIsNone(components.scheduler_registry)
        self.assertIsNone(components.controller_manager_registry)

    def test_checks_without_a_set(self):
        """A follower reports ping and leaderElection, and no controller."""
        self.assertEqual(self.names(self.components.controller_manager_health, "healthz"),
                         ["ping", "leaderElection"])
        self.assertEqual(self.names(self.components.scheduler_health, "readyz"),
                         ["ping", "leaderElection", "sched-handler-sync", "shutdown"])
        self.assertEqual(self.failures(self.components.scheduler_health, "readyz"), [])

    def test_one_check_per_running_controller(self):
        """While a set runs, each controller has a healthz check of its own."""
        services = self.run_set()
        self.assertEqual(len(services), 3)
        health = self.components.controller_manager_health
        self.assertEqual(self.names(health, "healthz"),
                         ["ping", "leaderElection", "namespace", "podgc"])
        self.assertEqual(self.failures(health), [])
        self.controllers[1].stopService()
        self.assertEqual(self.failures(health), ["podgc"])
        self.elected.controllers = None
        self.assertEqual(self.names(health, "healthz"), ["ping", "leaderElection"])

    def test_no_scheduler_without_nodes(self):
        """With nodes (or bindings) switched off the set runs its controllers, no scheduler."""
        for missing in ("nodes", "binding"):
            services = self.run_set(FakeCatalog(missing))
            self.assertEqual(services, self.controllers)
            self.assertIsNone(self.components.scheduler)
            self.assertEqual(run(self.components.scheduler_health.failures("readyz")), [])

    def test_handler_sync(self):
        """readyz waits for a running set's controllers and scheduler to sync."""
        self.run_set()
        self.assertEqual(self.failures(self.components.controller_manager_health, "readyz"),
                         ["kcm-handler-sync"])
        self.assertEqual(self.failures(self.components.scheduler_health, "readyz"),
                         ["sched-handler-sync"])
        for controller in self.controllers:
            controller.started.callback(None)
        self.components.scheduler.synced = True
        self.assertEqual(self.failures(self.components.controller_manager_health, "readyz"), [])
        self.assertEqual(self.failures(self.components.scheduler_health, "readyz"), [])

    def test_shutting_down(self):
        """Once the process stops, both components' readyz fail."""
        self.components.shutting_down()
        for health in (self.components.scheduler_health,
                       self.components.controller_manager_health):
            self.assertEqual(self.failures(health, "readyz"), ["shutdown"])

    def test_statuses(self):
        """ComponentStatus probes say ok, etcd as upstream's etcd does, and why when failing."""
        store = FakeStore()
        probes = {c.name: c.probe for c in self.components.statuses(store)}
        self.assertEqual(list(probes), ["scheduler", "controller-manager", "etcd-0"])
        self.assertEqual(run(probes["scheduler"]()), (True, "ok", ""))
        self.assertEqual(run(probes["etcd-0"]()), (True, '{"health":"true","reason":""}', ""))
        store.error = RuntimeError("connection refused")
        self.assertEqual(run(probes["etcd-0"]()), (False, "", "etcd: connection refused"))
        self.clock.advance(100)         # the Lease is stale now
        self.elected.elector.renewed_at = 0
        healthy, _, error = run(probes["controller-manager"]())
        self.assertEqual((healthy, error), (False, "leaderElection: failed election to renew "
                                                   "leadership on lease orch-controller-manager"))
