# -*- test-case-name: tests.orchlet.test_simpod -*-
"""
One simulated pod's life: its containers pulled, created, started, made
ready, exited, restarted and stopped on the reactor's clock.

The sequence is the kubelet's as the API shows it. A pod reaches the node
with its containers waiting (C{ContainerCreating}, or C{PodInitializing}
behind init containers); containers then start one after the other, init
containers first (each runs to completion before the next), each after its
image is pulled (C{Pulling}, C{Pulled}, C{Created}, C{Started} events). A
started container is ready after its readiness delay. A container that
exits is restarted as the pod's C{restartPolicy} says, immediately the
first time and then after a back-off (10 s doubling to 5 minutes:
C{CrashLoopBackOff}); an image that cannot be pulled gives C{ErrImagePull},
then C{ImagePullBackOff} with the same back-off. Stopping (the pod being
deleted) sends C{Killing} events and terminates every container; the pod
then has a terminal phase.

Each pod holds at most one timer, set for its next due step: nothing polls.
The timings come from L{orchd.orchlet.behaviour}. The pod tells its owner
through C{hooks} (L{PodHooks}): a status change, an event, a log line.
"""

from zope.interface import Interface

from orchd.api.meta import rfc3339
from orchd.api.printers.base import parse_time
from orchd.orchlet import podstatus
from orchd.orchlet.behaviour import (
    IMAGE_BYTES, PULL_SECONDS, Behaviour, format_duration, pull_policy, pullable,
)
from orchd.orchlet.simcontainer import (
    BACKOFF_START, CRASH_BACKOFF, EXITED, KILLED, PULL_BACKOFF, PULL_FAILED, PULLING, QUEUED,
    RUNNING, STOPPING, SimContainer, digest, earliest, next_backoff,
)

NORMAL, WARNING = "Normal", "Warning"

#: Seconds between an image pull failing (ErrImagePull) and the next sync showing ImagePullBackOff.
RESYNC_SECONDS = 1.0


class PodHooks(Interface):
    """What a simulated pod tells its runtime."""

    def changed(pod):
        """The pod's status changed (C{pod} is the L{SimulatedPod})."""

    def event(pod, type, reason, message, field_path):
        """An event about the pod's object, C{field_path} naming the container."""

    def log(pod, container, text):
        """One line a container printed."""

    def has_image(image):
        """True if the node already has C{image}."""

    def add_image(image):
        """The node now has C{image}."""


class SimulatedPod:
    """
    The life of one pod on a simulated node.

    @param pod: the Pod as the API serves it.
    @param clock: the C{IReactorTime} for every time and timer.
    @param hooks: a L{PodHooks} provider.
    @param host_ip: the node's address (C{status.hostIP}).
    @param pod_ip: the pod's address.
    """

    def __init__(self, pod, clock, hooks, host_ip, pod_ip):
        self.pod = pod
        self.clock = clock
        self.hooks = hooks
        self.host_ip = host_ip
        self.ip = pod_ip
        self.arrived = clock.seconds()
        self.behaviour = Behaviour.of(pod)
        spec = pod.get("spec") or {}
        self.restart_policy = spec.get("restartPolicy") or "Always"
        self.containers = []
        for init, field in ((True, "initContainers"), (False, "containers")):
            for container in spec.get(field) or ():
                if isinstance(container, dict):
                    self.containers.append(SimContainer(container, init))
        if not any(c.init for c in self.containers):
            for container in self.containers:
                container.waiting = ("ContainerCreating", None)
        self.stopping = False
        self.forgotten = False
        self._on_stopped = []
        self._conditions = []
        self._timer = None
        self._pulled_first = False
        self._status = None
        self._adopt(pod.get("status"))
        for key, why in self.behaviour.problems:
            self._event(None, WARNING, "FailedSimulation",
                        f"annotation {key} ignored: {why}")

    def _adopt(self, status):
        """
        Take over the containers the stored status shows running (or done
        for good): the node agent was restarted, not the node, so its pods
        carry on instead of starting again from ContainerCreating.
        """
        if not isinstance(status, dict) or parse_time(status.get("startTime")) is None:
            return
        adopted = False
        for field, init in (("initContainerStatuses", True), ("containerStatuses", False)):
            for entry in status.get(field) or ():
                if not isinstance(entry, dict):
                    continue
                container = self._find(entry.get("name"), init)
                if container is None or entry.get("image") != container.image:
                    continue
                state = entry.get("state") or {}
                running, done = state.get("running"), state.get("terminated")
                if isinstance(running, dict) and parse_time(running.get("startedAt")):
                    container.where = RUNNING
                    container.started_at = parse_time(running["startedAt"])
                    container.ready = entry.get("ready") is True
                    if not container.ready:
                        container.ready_at = (container.started_at
                                              + self.behaviour.ready_delay(container.spec))
                    if self.behaviour.exit_after is not None and not container.sidecar:
                        container.exit_at = container.started_at + self.behaviour.exit_after
                    container.due = earliest(container.ready_at, container.exit_at)
                elif isinstance(done, dict) and (container.init or not self._restarts(
                        container, done.get("exitCode"))):
                    container.where = EXITED
                    container.terminated = dict(done)
                    container.started_at = parse_time(done.get("startedAt")) or 0.0
                else:
                    continue
                restarts = entry.get("restartCount")
                container.restarts = restarts if isinstance(restarts, int) else 0
                container.last_state = dict(entry.get("lastState") or {})
                container.container_id = entry.get("containerID") or ""
                container.image_id = entry.get("imageID") or ""
                self.hooks.add_image(container.image)
                adopted = True
        if adopted:
            self.arrived = parse_time(status["startTime"])
            self._pulled_first = True

    def _find(self, name, init):
        for container in self.containers:
            if container.init == init and container.name == name:
                return container
        return None

    # -- identity ----------------------------------------------------------------------

    @property
    def meta(self):
        return self.pod.get("metadata") or {}

    @property
    def uid(self):
        return self.meta.get("uid", "")

    @property
    def key(self):
        return self.meta.get("namespace", "default"), self.meta.get("name", "")

    def container(self, name):
        for container in self.containers:
            if not container.init and container.name == name:
                return container
        for container in self.containers:
            if container.name == name:
                return container
        return None

    # -- the clock -----------------------------------------------------------------------

    def start(self):
        """Begin the pod's life: report it waiting, then step on the clock."""
        self._advance()

    def _advance(self):
        """Take every step due by now, then set the timer for the next one."""
        if self.forgotten:
            return
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        now = self.clock.seconds()
        for _ in range(10 * len(self.containers) + 10):
            if not self._step(now):
                break
        due = [c.due for c in self.containers if c.due is not None]
        if due:
            self._timer = self.clock.callLater(max(min(due) - now, 0), self._advance)
        self._report()

    def _step(self, now):
        """One step due by C{now}, if any; True if something happened."""
        head = self._head()
        if head is not None and head.where == QUEUED and not self.stopping:
            self._begin_pull(head, now)
            return True
        for container in self.containers:
            if container.due is not None and container.due <= now:
                container.due = None
                self._due(container, now)
                return True
        return False

    def _head(self):
        """
        The container to start next, or None: init containers one at a time
        (each must have started, and so completed, before the next), then
        the others in order, one image pull at a time; a container whose
        image cannot be pulled holds up only the init sequence.
        """
        for container in self.containers:
            if container.init:
                if container.started_at is not None:
                    continue
                return container if container.where == QUEUED else None
            if container.where == PULLING and container.started_at is None:
                return None
            if container.where == QUEUED:
                return container
        return None

    def _due(self, container, now):
        where = container.where
        if where == PULLING:
            self._end_pull(container, now)
        elif where == PULL_FAILED:
            container.where = PULL_BACKOFF
            message = f'Back-off pulling image "{container.image}"'
            container.waiting = ("ImagePullBackOff", f"{message}: ErrImagePull: "
                                                     f"{container.pull_error}")
            self._event(container, NORMAL, "BackOff", message)
            self._event(container, WARNING, "Failed", "Error: ImagePullBackOff")
            container.due = container.pull_failed_at + container.pull_backoff
        elif where == PULL_BACKOFF:
            self._begin_pull(container, now)
        elif where == RUNNING:
            if not container.ready and container.ready_at is not None \
                    and container.ready_at <= now:
                container.ready = True
                container.ready_at = None
            if container.exit_at is not None and container.exit_at <= now:
                self._exit(container, now, self.behaviour.exit_code)
            else:
                container.due = earliest(container.ready_at, container.exit_at)
        elif where == CRASH_BACKOFF:
            self._begin_pull(container, now)
        elif where == STOPPING:
            self._exit(container, now, KILLED if container.killed else 0, stopping=True)

    # -- pulling and starting --------------------------------------------------------------

    def _begin_pull(self, container, now):
        """
        Make sure C{container}'s image is there, as its pull policy says,
        then run it: at once when nothing is fetched, else once the pull
        (or the pod's C{start-after}) is over.
        """
        image = container.image
        policy = pull_policy(container.spec)
        present = self.hooks.has_image(image) and pullable(image)
        if policy == "Never" and not present:
            message = f'Container image "{image}" is not present with pull policy of Never'
            container.where = PULL_BACKOFF
            container.waiting = ("ErrImageNeverPull", message)
            self._event(container, WARNING, "ErrImageNeverPull", message)
            return
        container.fetch = policy == "Always" or not present
        container.pull_started = now
        delay = self._pull_seconds(container.fetch)
        if container.fetch:
            self._event(container, NORMAL, "Pulling", f'Pulling image "{image}"')
        if delay > 0:
            container.where = PULLING
            container.due = now + delay
            return
        self._end_pull(container, now)

    def _pull_seconds(self, fetch):
        """How long a pull takes: the pod's C{start-after} for its first one, else a pull's."""
        start_after = self.behaviour.start_after
        if start_after is None:
            return PULL_SECONDS if fetch else 0.0
        if self._pulled_first:
            return 0.0
        self._pulled_first = True
        return max(start_after - (self.clock.seconds() - self.arrived), 0.0)

    def _end_pull(self, container, now):
        image = container.image
        if not container.fetch:
            self._event(container, NORMAL, "Pulled",
                        f'Container image "{image}" already present on machine')
            self._run(container, now)
            return
        if not pullable(image):
            error = (f'rpc error: code = NotFound desc = failed to pull and unpack image '
                     f'"{image}": failed to resolve reference "{image}": not found')
            container.pull_error = error
            container.pull_failed_at = now
            container.where = PULL_FAILED
            container.waiting = ("ErrImagePull", error)
            self._event(container, WARNING, "Failed", f'Failed to pull image "{image}": {error}')
            self._event(container, WARNING, "Failed", "Error: ErrImagePull")
            delay = container.pull_backoff = next_backoff(container.pull_backoff)
            container.due = now + min(RESYNC_SECONDS, delay)
            return
        took = format_duration(now - container.pull_started)
        self.hooks.add_image(image)
        self._event(container, NORMAL, "Pulled",
                    f'Successfully pulled image "{image}" in {took} ({took} including '
                    f'waiting). Image size: {IMAGE_BYTES} bytes.')
        container.pull_backoff = None
        self._run(container, now)

    def _run(self, container, now):
        """Create and start C{container} (its image is there)."""
        ns, name = self.key
        if container.started_at is not None or container.terminated is not None:
            container.restarts += 1
        container.container_id = "simulated://" + digest(ns, name, self.uid, container.name,
                                                        str(container.restarts))
        container.image_id = f"{container.image}@sha256:{digest(container.image)}"
        self._event(container, NORMAL, "Created", f"Created container: {container.name}")
        self._event(container, NORMAL, "Started", f"Started container {container.name}")
        self.hooks.log(self, container.name,
                       f"container {container.name} started from image {container.image}")
        container.where = RUNNING
        container.started_at = now
        container.terminated = None
        if container.init and not container.sidecar:
            # An init container runs to completion at once.
            self._exit(container, now, 0)
            return
        delay = self.behaviour.ready_delay(container.spec)
        container.ready = delay <= 0
        container.ready_at = None if container.ready else now + delay
        exit_after = self.behaviour.exit_after
        container.exit_at = None if exit_after is None or container.sidecar else now + exit_after
        container.due = earliest(container.ready_at, container.exit_at)

    # -- exiting -----------------------------------------------------------------------

    def _exit(self, container, now, code, stopping=False):
        """C{container} ends with C{code}; restarted as the pod's policy says unless stopping."""
        reason = "Completed" if code == 0 else "Error"
        container.terminated = {"exitCode": code, "reason": reason,
                                "startedAt": rfc3339(container.started_at),
                                "finishedAt": rfc3339(now),
                                "containerID": container.container_id}
        container.ready = False
        container.ready_at = container.exit_at = container.due = None
        container.where = EXITED
        self.hooks.log(self, container.name, f"container {container.name} exited with code {code}")
        if stopping or self.stopping or (container.init and not container.sidecar and code == 0):
            return
        if not self._restarts(container, code):
            return
        container.last_state = {"terminated": dict(container.terminated)}
        if container.backoff is None:
            container.backoff = BACKOFF_START
            self._begin_pull(container, now)
            return
        delay = container.backoff
        container.backoff = next_backoff(delay)
        ns, name = self.key
        where = f"{name}_{ns}({self.uid})"
        container.where = CRASH_BACKOFF
        container.waiting = ("CrashLoopBackOff", f"back-off {format_duration(delay)} restarting "
                                                 f"failed container={container.name} pod={where}")
        self._event(container, WARNING, "BackOff",
                    f"Back-off restarting failed container {container.name} in pod {where}")
        container.due = now + delay

    def _restarts(self, container, code):
        if container.sidecar or self.restart_policy == "Always":
            return True
        return self.restart_policy == "OnFailure" and code != 0

    # -- stopping ----------------------------------------------------------------------

    def stop(self, grace, on_stopped):
        """
        Stop every container within C{grace} seconds; C{on_stopped()} is
        called once all have stopped (at once if none runs). A second call
        may only shorten the time left.
        """
        now = self.clock.seconds()
        self._on_stopped.append(on_stopped)
        if not self.stopping:
            self.stopping = True
            stop_after = self.behaviour.stop_after
            for container in self.containers:
                if container.running:
                    self._event(container, NORMAL, "Killing",
                                f"Stopping container {container.name}")
                    container.where = STOPPING
                    container.ready = False
                    container.killed = stop_after > grace
                    container.due = now + min(stop_after, grace)
                elif container.where != EXITED:
                    self._lost(container, now)
        else:
            for container in self.containers:
                if container.where == STOPPING and container.due is not None \
                        and container.due > now + grace:
                    container.due = now + grace
                    container.killed = True
        self._advance()

    def _lost(self, container, now):
        """A container that never ran ends as upstream's TerminatePod reports it."""
        container.terminated = {
            "exitCode": KILLED, "reason": "ContainerStatusUnknown",
            "message": "The container could not be located when the pod was terminated"}
        container.where = EXITED
        container.due = None
        container.ready = False

    def pause(self):
        """Cancel the timer: the clock no longer moves this pod (its runtime is closing)."""
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def kill(self):
        """Stop at once (the pod is gone): Killing events for running containers, no timer."""
        if not self.stopping:
            for container in self.containers:
                if container.running:
                    self._event(container, NORMAL, "Killing",
                                f"Stopping container {container.name}")
        self.forgotten = True
        self.pause()

    # -- status ------------------------------------------------------------------------

    def phase(self):
        spec = self.pod.get("spec") or {}
        init, regular = self._statuses()
        phase = podstatus.pod_phase(spec, init, regular, terminal=self.stopping)
        if self.stopping and phase not in podstatus.TERMINAL and self._all_stopped():
            phase = podstatus.FAILED
        return phase

    def _all_stopped(self):
        return all(c.where == EXITED for c in self.containers)

    def _statuses(self):
        init = [c.status() for c in self.containers if c.init]
        regular = [c.status() for c in self.containers if not c.init]
        return init, regular

    def status(self):
        """The pod status this node reports (its own conditions timed by this pod's clock)."""
        return self._status if self._status is not None else self._compute()

    def _compute(self):
        spec = self.pod.get("spec") or {}
        init, regular = self._statuses()
        phase = self.phase()
        # The sandbox (the pod's network) is up from the start and torn down once it is over.
        sandbox = phase not in podstatus.TERMINAL and not (self.stopping and self._all_stopped())
        stored = (self.pod.get("status") or {}).get("conditions")
        conditions = podstatus.owned_conditions(spec, init, regular, phase, sandbox, stored)
        self._conditions = podstatus.stamp_conditions(conditions, self._conditions,
                                                      rfc3339(self.clock.seconds()))
        status = {"phase": phase, "conditions": self._conditions, "hostIP": self.host_ip,
                  "hostIPs": [{"ip": self.host_ip}], "podIP": self.ip,
                  "podIPs": [{"ip": self.ip}], "startTime": rfc3339(self.arrived)}
        if init:
            status["initContainerStatuses"] = init
        status["containerStatuses"] = regular
        self._status = status
        return status

    def _report(self):
        before = self._status
        self._status = None
        after = self._compute()
        if before != after:
            self.hooks.changed(self)
        if self.stopping and self._all_stopped() and self._on_stopped:
            callbacks, self._on_stopped = self._on_stopped, []
            for callback in callbacks:
                callback()

    def update(self, pod):
        """
        The pod object changed (a new resourceVersion): its readiness gates
        may have, or a container's image (then the container is restarted
        with the new one, as upstream does when a container's spec changes).
        """
        self.pod = pod
        now = self.clock.seconds()
        specs = {c.get("name"): c for c in (pod.get("spec") or {}).get("containers") or ()
                 if isinstance(c, dict)}
        for container in self.containers:
            spec = specs.get(container.name)
            if container.init or spec is None or spec.get("image") == container.image:
                continue
            container.spec, container.image = spec, spec.get("image", "")
            if container.where == RUNNING and not self.stopping:
                self._event(container, NORMAL, "Killing", f"Container {container.name} "
                                                          "definition changed, will be restarted")
                self._exit(container, now, 0, stopping=True)
                container.last_state = {"terminated": dict(container.terminated)}
                self._begin_pull(container, now)
        self._advance()

    # -- events --------------------------------------------------------------------------

    def _event(self, container, type, reason, message):
        self.hooks.event(self, type, reason, message,
                         container.field_path if container is not None else None)
