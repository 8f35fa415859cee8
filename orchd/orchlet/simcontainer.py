# -*- test-case-name: tests.orchlet.test_simpod -*-
"""
One container of a simulated pod: where it is in its life, and how the
API shows it (C{state}, C{lastState}, C{ready}, C{started}, IDs).

The steps that move it are its pod's (L{orchd.orchlet.simpod}); this
module only holds a container's state and turns it into a
C{containerStatus}.
"""

import hashlib

from orchd.api.meta import rfc3339

#: Upstream's container back-off: 10 s, doubling, at most 300 s.
BACKOFF_START = 10.0
BACKOFF_CAP = 300.0
#: The exit code of a container killed at the end of its grace period (SIGKILL).
KILLED = 137

# Where a container is in its life (not API states: several map to "waiting").
QUEUED = "queued"           # waiting for its turn to start
PULLING = "pulling"         # its image is being pulled
PULL_FAILED = "pull-failed"  # ErrImagePull, until the next sync shows the back-off
PULL_BACKOFF = "pull-backoff"  # ImagePullBackOff, until the next pull
RUNNING = "running"
CRASH_BACKOFF = "crash-backoff"  # CrashLoopBackOff, until the restart
EXITED = "exited"           # terminated, not to be restarted
STOPPING = "stopping"       # asked to stop, not yet stopped


def earliest(*times):
    """The first of the times that are not None, or None."""
    times = [t for t in times if t is not None]
    return min(times) if times else None


def next_backoff(delay):
    """The back-off after C{delay} (None: the first one)."""
    return BACKOFF_START if delay is None else min(delay * 2, BACKOFF_CAP)


def digest(*parts):
    """A stable hex digest of C{parts}: container and image IDs."""
    return hashlib.sha256("/".join(parts).encode("utf-8")).hexdigest()


class SimContainer:
    """One container of a simulated pod."""

    def __init__(self, spec, init):
        self.spec = spec
        self.name = spec.get("name", "")
        self.image = spec.get("image", "")
        self.init = init
        self.sidecar = init and spec.get("restartPolicy") == "Always"
        self.field_path = (f"spec.initContainers{{{self.name}}}" if init
                           else f"spec.containers{{{self.name}}}")
        self.where = QUEUED
        self.due = None              # when the next step is due, or None
        self.waiting = ("PodInitializing", None)
        self.started_at = None
        self.terminated = None       # the API's terminated state, once exited
        self.last_state = {}
        self.ready = False
        self.ready_at = None
        self.exit_at = None
        self.restarts = 0
        self.backoff = None          # the next back-off delay once one was used
        self.pull_backoff = None
        self.pull_error = None
        self.pull_started = None
        self.pull_failed_at = None
        self.fetch = False           # whether the current pull fetches the image
        self.killed = False
        self.container_id = ""
        self.image_id = ""

    @property
    def running(self):
        """Whether a process runs (stopping included): C{started} in the API."""
        return self.where in (RUNNING, STOPPING)

    def state(self):
        """The API's C{state}: running, terminated or waiting (with reason)."""
        if self.where in (RUNNING, STOPPING):
            return {"running": {"startedAt": rfc3339(self.started_at)}}
        if self.terminated is not None and self.where in (EXITED, PULLING):
            # Between an exit and the restart, the last instance is what there is.
            return {"terminated": dict(self.terminated)}
        reason, message = self.waiting
        waiting = {"reason": reason}
        if message:
            waiting["message"] = message
        return {"waiting": waiting}

    def status(self):
        """The API's C{containerStatus}."""
        status = {"name": self.name, "state": self.state(), "lastState": dict(self.last_state),
                  "ready": self.ready, "restartCount": self.restarts, "image": self.image,
                  "imageID": self.image_id}
        if self.container_id:
            status["containerID"] = self.container_id
        status["started"] = self.running
        return status
