# -*- test-case-name: tests.app.test_components -*-
"""
The scheduler and the controller manager as components of the control
plane: what the elected set runs, the health each reports on its own port,
and the probes behind C{ComponentStatus}.

Both run in this process while it holds the controllers' Lease (one set,
built anew on each leadership, L{orchd.controllers.elected}); their health
is upstream's:

  - the scheduler (port 10259): C{leaderElection} on C{/healthz} and
    C{/readyz} (a leader whose Lease has not been renewed for the lease
    duration plus 20 s is unhealthy), and C{sched-handler-sync} on
    C{/readyz} (a running scheduler whose informers have not listed yet);
  - the controller manager (port 10257): C{leaderElection}, one check per
    running controller on C{/healthz} (C{/healthz/<controller>}), and
    C{kcm-handler-sync} on C{/readyz} (running controllers still syncing).

A process that follows another's Lease runs neither, and reports healthy:
there is nothing here to be unhealthy.
"""

from orchd.api.metrics import Registry
from orchd.controllers.queuemetrics import WORKQUEUES
from orchd.registry.componentstatus import Component
from orchd.scheduler.metrics import SCHEDULER
from orchd.scheduler.scheduler import Scheduler
from orchd.server.health import Health, HealthCheck
from orchd.server.processmetrics import register_process_metrics

#: Upstream's C{maxTolerableExpiredLease} of the leader election watchdog.
EXPIRED_LEASE_TOLERANCE = 20.0
#: [COMPAT] how upstream's etcd answers a health probe, which ComponentStatus shows.
ETCD_HEALTHY = '{"health":"true","reason":""}'
_HEALTH_AND_READY = ("healthz", "readyz")


def leader_election_check(elector, clock):
    """Upstream's leader election watchdog: a leader must keep renewing its Lease."""
    def check():
        renewed = elector.renewed_at
        if not elector.leading or renewed is None:
            return
        if clock.seconds() > renewed + elector.lease_duration + EXPIRED_LEASE_TOLERANCE:
            raise RuntimeError(f"failed election to renew leadership on lease {elector.name}")
    return HealthCheck("leaderElection", check, endpoints=_HEALTH_AND_READY)


def _schedulable(catalog):
    """Whether the API serves what the scheduler works on (pods, nodes, bindings)."""
    return (catalog.resource("", "pods") is not None and catalog.resource("", "nodes") is not None
            and catalog.connector("", "pods", "binding") is not None)


def _running(service):
    def check():
        if not service.running:
            raise RuntimeError(f"controller {service.name} is not running")
    return check


class Components:
    """
    @param clock: an C{IReactorTime}.

    @ivar scheduler_health: the L{Health} the scheduler's port serves.
    @ivar controller_manager_health: the L{Health} the controller manager's port serves.
    @ivar scheduler: the running set's L{Scheduler}, or None.
    @ivar controllers: the running set's controller services.
    @ivar scheduler_registry: what the scheduler's port serves on C{/metrics}
        (None without metrics).
    @ivar controller_manager_registry: the same for the controller manager.
    """

    def __init__(self, clock, metrics=True):
        self.clock = clock
        self.scheduler_health = Health(clock)
        self.controller_manager_health = Health(clock)
        self.scheduler = None
        self.controllers = ()
        self._elected = None
        self.scheduler_registry = self.controller_manager_registry = None
        if metrics:
            self.scheduler_registry = self._registry(SCHEDULER.registry)
            self.controller_manager_registry = self._registry(WORKQUEUES.registry)

    def _registry(self, families):
        registry = Registry()
        registry.include(families)
        registry.callback("leader_election_master_status",
                          "Gauge of if the reporting system is master of the relevant lease, "
                          "0 indicates backup, 1 indicates master. 'name' is the string used "
                          "to identify the lease. Please make sure to group by name.",
                          ("name",), self._leading)
        register_process_metrics(registry)
        return registry

    def _leading(self):
        elector = self._elected.elector if self._elected is not None else None
        if elector is None:
            return []
        return [((elector.name,), 1 if elector.leading else 0)]

    def builder(self, catalog, build_controllers):
        """
        The C{build} of L{orchd.controllers.elected.ElectedControllers}: the
        controllers C{build_controllers()} makes, and a scheduler working on
        C{catalog} (the L{orchd.registry.catalog.Catalog}).
        """
        def build():
            self.controllers = tuple(build_controllers())
            if not _schedulable(catalog):
                self.scheduler = None
                return list(self.controllers)
            self.scheduler = Scheduler(catalog, self.clock)
            return list(self.controllers) + [self.scheduler]
        return build

    def follow(self, elected):
        """Report on the sets C{elected} (an L{ElectedControllers}) runs."""
        self._elected = elected
        if elected.elector is not None:
            for health in (self.scheduler_health, self.controller_manager_health):
                health.add(leader_election_check(elected.elector, self.clock))
        self.scheduler_health.add(HealthCheck("sched-handler-sync", self._scheduler_synced,
                                              endpoints=("readyz",)))
        self.controller_manager_health.add(HealthCheck(
            "kcm-handler-sync", self._controllers_synced, endpoints=("readyz",)))
        self.controller_manager_health.add_source(self._controller_checks)

    def _running_set(self):
        return self._elected is not None and self._elected.controllers is not None

    def _scheduler_synced(self):
        if self._running_set() and self.scheduler is not None and not self.scheduler.synced:
            raise RuntimeError("waiting for handlers to sync")

    def _controllers_synced(self):
        if not self._running_set():
            return
        for controller in self.controllers:
            started = getattr(controller, "started", None)
            if started is not None and not started.called:
                raise RuntimeError(f"waiting for {controller.name} to sync")

    def _controller_checks(self):
        if not self._running_set():
            return []
        return [HealthCheck(controller.name, _running(controller), endpoints=("healthz",))
                for controller in self.controllers]

    def shutting_down(self):
        """The process is stopping: both components' /readyz fail from now on."""
        self.scheduler_health.shutting_down = True
        self.controller_manager_health.shutting_down = True

    def statuses(self, store):
        """The L{Component}s C{ComponentStatus} reports, C{store} as C{etcd-0}."""
        store_health = Health(self.clock)
        store_health.add(HealthCheck("etcd", store.check))
        return [Component("scheduler", _probe(self.scheduler_health, "ok")),
                Component("controller-manager", _probe(self.controller_manager_health, "ok")),
                Component("etcd-0", _probe(store_health, ETCD_HEALTHY))]


def _probe(health, message):
    """A ComponentStatus probe: C{health}'s C{/healthz} checks, all of which must pass."""
    async def probe():
        failed = await health.failures("healthz")
        if not failed:
            return True, message, ""
        return False, "", "; ".join(f"{name}: {error}" for name, error in failed)
    return probe
