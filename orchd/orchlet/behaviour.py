# -*- test-case-name: tests.orchlet.test_behaviour -*-
"""
What a pod asks of the simulated runtime: timings and failures, read from
annotations of ours (C{orchlet.orch.io/...}) and from the pod's spec.

Nothing runs in a simulated container, so the timings a real node would
show (an image pull, a readiness delay, a program that exits) come from
here. Tests and demos set them per pod; the defaults look like a quick
node: a pulled image takes L{PULL_SECONDS}, one already present none.

A Job's pod (controlled by a Job, restart policy C{Never} or
C{OnFailure}) runs for L{JOB_RUN_SECONDS} unless its annotations say
otherwise, then exits with its exit code (0 by default): as kwok's
C{pod-complete} stage, nothing runs in it that could end by itself, and a
Job whose pods never end never completes. Other pods run until stopped.

Durations are Go's (C{"500ms"}, C{"5s"}, C{"1m30s"}), as kubectl and kwok
write them. An annotation that cannot be read is ignored (its default
applies) and named in L{Behaviour.problems}, for the runtime to report.
"""

import re

PREFIX = "orchlet.orch.io/"
START_AFTER = PREFIX + "start-after"
READY_AFTER = PREFIX + "ready-after"
EXIT_AFTER = PREFIX + "exit-after"
EXIT_CODE = PREFIX + "exit-code"
STOP_AFTER = PREFIX + "stop-after"

#: Seconds a Job's pod runs before its containers exit, without C{exit-after}.
JOB_RUN_SECONDS = 1.0

#: Seconds a simulated image pull takes.
PULL_SECONDS = 1.0
#: An image whose name contains this cannot be pulled (ErrImagePull, then ImagePullBackOff).
INVALID_IMAGE_MARK = "invalid"
#: Simulated image sizes, for the Pulled event's message.
IMAGE_BYTES = 50 * 1024 * 1024

_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0,
          "m": 60.0, "h": 3600.0}
_TERM = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
#: Longer delays are refused: a timer set for centuries is a typo.
MAX_SECONDS = 366 * 24 * 3600


def parse_duration(text):
    """
    Seconds of a Go duration string (C{time.ParseDuration}), not negative.

    @raise ValueError: for anything else, or a duration over a year.
    """
    if not isinstance(text, str) or not text:
        raise ValueError("a duration such as 5s, 500ms or 1m30s")
    if text == "0":
        return 0.0
    position, total = 0, 0.0
    while position < len(text):
        match = _TERM.match(text, position)
        if match is None or match.group(1) in ("", "."):
            raise ValueError(f"invalid duration {text!r}: a duration such as 5s, 500ms or 1m30s")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if total > MAX_SECONDS:
        raise ValueError(f"duration {text!r} is longer than a year")
    return total


def format_duration(seconds):
    """
    A duration as Go prints a C{time.Duration} truncated to milliseconds
    (C{1.2s}, C{500ms}, C{1m30.5s}, C{0s}): the kubelet's event messages.
    """
    millis = int(round(seconds * 1000))
    if millis == 0:
        return "0s"
    if millis < 1000:
        return f"{millis}ms"
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs = f"{rest // 1000}.{rest % 1000:03d}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{secs}"
    if minutes:
        return f"{minutes}m{secs}"
    return secs


def pull_policy(container):
    """The container's C{imagePullPolicy}, defaulted as upstream (Always for :latest or no tag)."""
    policy = container.get("imagePullPolicy")
    if policy in ("Always", "IfNotPresent", "Never"):
        return policy
    image = container.get("image") or ""
    name = image.rsplit("/", 1)[-1]
    if "@" in name:
        return "IfNotPresent"
    if ":" not in name or name.rsplit(":", 1)[1] == "latest":
        return "Always"
    return "IfNotPresent"


def pullable(image):
    """False for the images the simulation cannot pull (see L{INVALID_IMAGE_MARK})."""
    return INVALID_IMAGE_MARK not in (image or "")


def readiness_delay(container):
    """Seconds to readiness from a readiness probe's C{initialDelaySeconds} (0 without one)."""
    probe = container.get("readinessProbe")
    if not isinstance(probe, dict):
        return 0.0
    delay = probe.get("initialDelaySeconds")
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay < 0:
        return 0.0
    return float(min(delay, MAX_SECONDS))


def runs_to_completion(pod):
    """
    True for a pod that a Job controls and that is not restarted when it
    ends well (restart policy C{Never} or C{OnFailure}): its containers end
    after L{JOB_RUN_SECONDS} by default.
    """
    policy = (pod.get("spec") or {}).get("restartPolicy")
    if policy not in ("Never", "OnFailure"):
        return False
    return any(isinstance(ref, dict) and ref.get("kind") == "Job" and ref.get("controller") is True
               for ref in (pod.get("metadata") or {}).get("ownerReferences") or ())


class Behaviour:
    """
    The simulated timings of one pod, from its annotations.

    @ivar start_after: seconds from the pod's arrival until its containers
        run (replacing the pull times), or None for the simulated pulls.
    @ivar ready_after: seconds from a container's start to its readiness,
        or None for its readiness probe's initial delay (0 without one).
    @ivar exit_after: seconds a container runs before it exits, or None (never).
    @ivar exit_code: the code it exits with.
    @ivar stop_after: seconds a container takes to stop when asked; past
        the grace period it is killed (exit code 137).
    @ivar problems: C{[(annotation, why)]} for the annotations ignored.
    """

    def __init__(self, annotations=None):
        annotations = annotations if isinstance(annotations, dict) else {}
        self.problems = []
        self.start_after = self._duration(annotations, START_AFTER)
        self.ready_after = self._duration(annotations, READY_AFTER)
        self.exit_after = self._duration(annotations, EXIT_AFTER)
        self.stop_after = self._duration(annotations, STOP_AFTER) or 0.0
        self.exit_code = 0
        code = annotations.get(EXIT_CODE)
        if code is not None:
            if isinstance(code, str) and re.fullmatch(r"[0-9]{1,3}", code) and int(code) < 256:
                self.exit_code = int(code)
            else:
                self.problems.append((EXIT_CODE, "an exit code from 0 to 255"))

    @classmethod
    def of(cls, pod):
        meta = pod.get("metadata") or {}
        behaviour = cls(meta.get("annotations"))
        if behaviour.exit_after is None and runs_to_completion(pod):
            behaviour.exit_after = JOB_RUN_SECONDS
        return behaviour

    def _duration(self, annotations, key):
        value = annotations.get(key)
        if value is None:
            return None
        try:
            return parse_duration(value)
        except ValueError as e:
            self.problems.append((key, str(e)))
            return None

    def ready_delay(self, container):
        """Seconds from the start of C{container} (a spec) until it is ready."""
        if self.ready_after is not None:
            return self.ready_after
        return readiness_delay(container)
