# -*- test-case-name: tests.orchlet.test_simusage -*-
"""
What the simulated containers use: CPU time and memory, from a pod's
annotations (C{orchlet.orch.io/cpu-usage}, C{orchlet.orch.io/memory-usage}).

Nothing runs in a simulated container, yet C{kubectl top} and the
HorizontalPodAutoscaler read usage: the CPU counter of each running
container grows at the rate its pod's annotation sets (a quantity of cores,
C{250m}), and its working set is the memory annotation (C{64Mi}). The
defaults are small (L{DEFAULT_NANO_CORES}, L{DEFAULT_WORKING_SET}), so that
a test can drive an autoscaler's utilization up by annotating the pods and
down by taking the annotation off.

The counter is cumulative, as a real one: when the rate changes (the pod
object changed), the core-seconds used so far are kept and the new rate
applies from then on; a restarted container starts again from zero.
"""

from fractions import Fraction

from orchd.api.quantity import parse_quantity
from orchd.orchlet.behaviour import PREFIX

CPU_USAGE = PREFIX + "cpu-usage"
MEMORY_USAGE = PREFIX + "memory-usage"

#: Each running container burns one millicore without an annotation...
DEFAULT_NANO_CORES = 1_000_000
#: ... and holds 8 MiB.
DEFAULT_WORKING_SET = 8 * 1024 * 1024
#: Larger figures are refused: a simulated container uses at most 1024 cores or 1 TiB.
MAX_NANO_CORES = 1024 * 10**9
MAX_WORKING_SET = 1024**4


class Usage:
    """
    What each running container of one pod uses, from its annotations.

    @ivar nano_cores: CPU, in billionths of a core.
    @ivar working_set: memory, in bytes.
    @ivar problems: C{[(annotation, why)]} for the annotations ignored.
    """

    def __init__(self, annotations=None):
        annotations = annotations if isinstance(annotations, dict) else {}
        self.problems = []
        cores = self._amount(annotations, CPU_USAGE, MAX_NANO_CORES / 10**9)
        self.nano_cores = DEFAULT_NANO_CORES if cores is None else int(cores * 10**9)
        memory = self._amount(annotations, MEMORY_USAGE, MAX_WORKING_SET)
        self.working_set = DEFAULT_WORKING_SET if memory is None else int(memory)

    @classmethod
    def of(cls, pod):
        return cls((pod.get("metadata") or {}).get("annotations"))

    def _amount(self, annotations, key, limit):
        value = annotations.get(key)
        if value is None:
            return None
        try:
            amount = parse_quantity(value)
        except ValueError:
            amount = None
        if amount is None or amount < 0 or amount > Fraction(limit):
            self.problems.append((key, f"a quantity from 0 to {limit:g}"))
            return None
        return amount


class CPUCounter:
    """
    The cumulative CPU time of one container, at a rate that can change.

    @param started_at: when the container started (the counter's zero).
    @param nano_cores: the rate from then on.
    """

    __slots__ = ("started_at", "_since", "_used", "_rate")

    def __init__(self, started_at, nano_cores):
        self.started_at = started_at
        self._since = started_at
        self._used = 0.0            # core-nanoseconds up to _since
        self._rate = nano_cores

    def core_nano_seconds(self, now):
        """Core-nanoseconds used from the start until C{now}."""
        return int(self._used + self._rate * max(now - self._since, 0.0))

    def set_rate(self, now, nano_cores):
        """Use C{nano_cores} from C{now} on, keeping what was used so far."""
        if nano_cores == self._rate:
            return
        if now > self._since:
            self._used += self._rate * (now - self._since)
            self._since = now
        self._rate = nano_cores


class PodUsage:
    """The counters of one pod's containers and the usage its annotations set."""

    def __init__(self, usage):
        self.usage = usage
        self._counters = {}

    def update(self, now, usage):
        """The pod changed: its new annotations apply from C{now} on."""
        self.usage = usage
        for counter in self._counters.values():
            counter.set_rate(now, usage.nano_cores)

    def counter(self, name, started_at):
        """The counter of container C{name}, a new one when it started again."""
        counter = self._counters.get(name)
        if counter is None or counter.started_at != started_at:
            counter = self._counters[name] = CPUCounter(started_at, self.usage.nano_cores)
        return counter
