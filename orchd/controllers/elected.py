# -*- test-case-name: tests.controllers.test_elected -*-
"""
The controllers as one service that runs them only while this process leads.

Controllers are not restartable (their queues and informers end for good
when stopped), so each time this process becomes leader it builds a fresh
set; losing the Lease stops that set at once. Without an elector (leader
election switched off) the set runs from start to stop, as before.
"""

from twisted.application.service import MultiService, Service
from twisted.internet.defer import Deferred, DeferredList
from twisted.logger import Logger

from orchd.controllers.leaderelection import LeaderElector


class ElectedControllers(Service):
    """
    @param build: C{build()} returns the controller services (a new set per call).
    @param elector: a L{orchd.controllers.leaderelection.LeaderElector}, or
        None to run the controllers unconditionally; its callbacks are set here.

    @ivar controllers: the L{MultiService} of the running set, or None.
    @ivar started: fires once this process either leads with its first set's
        initial sync done, or follows a holder it has seen with a valid Lease:
        in both cases the cluster has working controllers, which is what the
        C{start-orch-controllers} readiness hook reports.
    """

    name = "controllers"
    log = Logger()

    def __init__(self, build, elector=None):
        self._build = build
        self.elector = elector
        self.controllers = None
        self.started = Deferred()
        if elector is not None:
            elector.on_started_leading = self._start_controllers
            elector.on_stopped_leading = self._stop_controllers
            elector.settled.addCallback(self._settled)

    @classmethod
    def from_config(cls, build, catalog, clock, config):
        """
        With an elector as the C{--leader-elect*} settings say (none when off).

        A LevelDB store is locked to this process, so a Lease held by another
        identity there is a dead predecessor's: a restart after a crash takes
        it at once instead of waiting for it to expire.
        """
        if not config.leader_elect:
            return cls(build)
        return cls(build, LeaderElector(
            catalog, clock, lease_duration=config.leader_elect_lease_duration,
            renew_deadline=config.leader_elect_renew_deadline,
            retry_period=config.leader_elect_retry_period,
            sole=config.storage_backend == "leveldb"))

    def startService(self):
        super().startService()
        if self.elector is None:
            self._start_controllers()
            self._settled(True)

    def campaign(self):
        """Start competing for the Lease (once the C{orch-system} namespace exists)."""
        if self.elector is not None and self.running:
            self.elector.start()

    def _start_controllers(self):
        self.controllers = MultiService()
        for controller in self._build():
            controller.setServiceParent(self.controllers)
        self.controllers.startService()
        self.log.info("Controllers started")

    def _stop_controllers(self):
        controllers, self.controllers = self.controllers, None
        if controllers is None:
            return None
        self.log.info("Stopping controllers")
        return controllers.stopService()

    def _settled(self, leading):
        if self.started.called:
            return
        if leading and self.controllers is not None:
            first = [c.started for c in self.controllers
                     if getattr(c, "started", None) is not None]
            DeferredList(first, consumeErrors=True).addCallback(
                lambda _: self.started.called or self.started.callback(True))
        else:
            self.started.callback(False)

    def stopService(self):
        super().stopService()
        if self.elector is not None:
            return self.elector.stop(release=True)
        return self._stop_controllers()
