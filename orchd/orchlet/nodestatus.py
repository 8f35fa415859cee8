# -*- test-case-name: tests.orchlet.test_nodestatus -*-
"""
What the node says about itself: its Node object and its status reports.

The scheduler reads capacity and allocatable, the API server's node proxy
reads C{addresses} and C{daemonEndpoints}, the node lifecycle controller
reads the conditions. Figures come from the machine (C{os.cpu_count},
C{/proc/meminfo}, the root directory's file system). Status is patched when
a condition changes, checked every 10 s, and otherwise every 5 minutes: the
Lease is the frequent heartbeat, the status report the slow one.
"""

import os
import platform

from twisted.logger import Logger

from orchd import __version__
from orchd.api.meta import rfc3339
from orchd.orchlet.heartbeat import Repeater

#: Upstream's nodeStatusUpdateFrequency and nodeStatusReportFrequency.
CHECK_INTERVAL = 10.0
REPORT_INTERVAL = 300.0
MAX_PODS = "110"
#: Upstream's hard eviction thresholds: memory.available<100Mi, nodefs.available<10%.
MEMORY_RESERVE = 100 * 1024 * 1024
DISK_FREE_FRACTION = 0.10
PID_FULL_FRACTION = 0.90

_ARCHES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64",
           "armv7l": "arm", "i386": "386", "i686": "386", "ppc64le": "ppc64le",
           "s390x": "s390x", "riscv64": "riscv64"}

#: type: ((status, reason, message) when healthy, (...) when not).
CONDITIONS = {
    "Ready": (("True", "OrchletReady", "orchlet is posting ready status"),
              ("False", "OrchletNotReady", "orchlet is not ready")),
    "MemoryPressure": (("False", "OrchletHasSufficientMemory",
                        "orchlet has sufficient memory available"),
                       ("True", "OrchletHasInsufficientMemory",
                        "orchlet has insufficient memory available")),
    "DiskPressure": (("False", "OrchletHasNoDiskPressure", "orchlet has no disk pressure"),
                     ("True", "OrchletHasDiskPressure", "orchlet has disk pressure")),
    "PIDPressure": (("False", "OrchletHasSufficientPID", "orchlet has sufficient PID available"),
                    ("True", "OrchletHasInsufficientPID",
                     "orchlet has insufficient PID available")),
    "NetworkUnavailable": (("False", "OrchletNetworkReady", "orchlet network is ready"),
                           ("True", "OrchletNetworkNotReady", "orchlet network is not ready")),
}


def _meminfo():
    values = {}
    try:
        with open("/proc/meminfo", encoding="ascii") as stream:
            for line in stream:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if parts and parts[0].isdigit():
                    values[key] = int(parts[0]) * 1024
    except OSError:
        pass
    return values


def architecture():
    machine = platform.machine().lower()
    return _ARCHES.get(machine, machine or "unknown")


def operating_system():
    return platform.system().lower() or "unknown"


def _os_image():
    try:
        with open("/etc/os-release", encoding="utf-8") as stream:
            for line in stream:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.platform()


def _read_first_line(path):
    try:
        with open(path, encoding="ascii") as stream:
            return stream.readline().strip()
    except OSError:
        return ""


def capacity(root_dir):
    """cpu, memory, pods and ephemeral-storage of this machine, as quantities."""
    memory = _meminfo().get("MemTotal", 0)
    try:
        fs = os.statvfs(root_dir)
        storage = fs.f_blocks * fs.f_frsize
    except OSError:
        storage = 0
    return {"cpu": str(os.cpu_count() or 1), "ephemeral-storage": str(storage),
            "memory": f"{memory // 1024}Ki", "pods": MAX_PODS}


def node_info(runtime_name):
    """C{status.nodeInfo}; C{kubeletVersion} keeps its upstream name [COMPAT]."""
    machine_id = _read_first_line("/etc/machine-id")
    return {"machineID": machine_id, "systemUUID": machine_id,
            "bootID": _read_first_line("/proc/sys/kernel/random/boot_id"),
            "kernelVersion": platform.release(), "osImage": _os_image(),
            "containerRuntimeVersion": runtime_name, "kubeletVersion": f"v{__version__}",
            # Deprecated upstream and reported empty since 1.31, but the models require it.
            "kubeProxyVersion": "",
            "operatingSystem": operating_system(), "architecture": architecture()}


def node_labels(node_name):
    return {"orch.io/hostname": node_name, "orch.io/os": operating_system(),
            "orch.io/arch": architecture()}


def probe_machine(root_dir):
    """C{{condition type: healthy?}} from the machine, with upstream's eviction thresholds."""
    memory = _meminfo()
    memory_ok = memory.get("MemAvailable", MEMORY_RESERVE) >= MEMORY_RESERVE
    try:
        fs = os.statvfs(root_dir)
        disk_ok = fs.f_blocks == 0 or fs.f_bavail / fs.f_blocks >= DISK_FREE_FRACTION
    except OSError:
        disk_ok = True
    pid_ok = True
    pid_max = _read_first_line("/proc/sys/kernel/pid_max")
    if pid_max.isdigit():
        try:
            running = sum(1 for entry in os.listdir("/proc") if entry.isdigit())
            pid_ok = running < int(pid_max) * PID_FULL_FRACTION
        except OSError:
            pass
    return {"Ready": True, "MemoryPressure": memory_ok, "DiskPressure": disk_ok,
            "PIDPressure": pid_ok, "NetworkUnavailable": True}


def conditions(health, now, previous=()):
    """
    The five conditions for C{health} (C{{type: healthy?}}) at time C{now}
    (RFC 3339); C{lastTransitionTime} is kept from C{previous} when the
    status did not change.
    """
    before = {c.get("type"): c for c in previous or ()}
    result = []
    for kind, states in CONDITIONS.items():
        status, reason, message = states[0] if health.get(kind, True) else states[1]
        old = before.get(kind)
        since = old["lastTransitionTime"] if old and old.get("status") == status else now
        result.append({"type": kind, "status": status, "lastHeartbeatTime": now,
                       "lastTransitionTime": since, "reason": reason, "message": message})
    return result



class NodeStatus:
    """
    The node's description and its reports.

    @param probe: C{probe() -> {type: healthy?}}; L{probe_machine} by default.
    @param port: C{port() -> int}, the endpoint's real port (read at each report).
    @param capacity: C{{resource: quantity}} reported as capacity and
        allocatable, or None for this machine's (L{capacity}).
    @param labels: labels added to L{node_labels}.
    @param report_phase: None, or where in a common cycle of C{report_interval}
        seconds the periodic reports come: simulated nodes that registered
        within a minute would otherwise report together every 5 minutes,
        in a burst (L{orchd.orchlet.simnodes} spreads them as it spreads
        the Lease renewals).
    """

    log = Logger()

    def __init__(self, clock, api, node_name, address, runtime_name, root_dir, port,
                 probe=None, check_interval=CHECK_INTERVAL, report_interval=REPORT_INTERVAL,
                 capacity=None, labels=None, report_phase=None):
        self.clock = clock
        self.api = api
        self.node_name = node_name
        self.address = address
        self.runtime_name = runtime_name
        self.root_dir = root_dir
        self.port = port
        self.probe = probe or (lambda: probe_machine(root_dir))
        self.capacity = capacity
        self.extra_labels = dict(labels or {})
        self.report_interval = report_interval
        self.report_phase = report_phase
        self.reported = None            # (health, time) of the last accepted report
        self.conditions = []
        self.posts = 0
        self.repeater = Repeater(clock, self.check, check_interval, "Reporting node status")

    def status(self, health):
        now = rfc3339(self.clock.seconds())
        self.conditions = conditions(health, now, self.conditions)
        allocatable = dict(self.capacity) if self.capacity is not None else capacity(self.root_dir)
        return {"capacity": dict(allocatable), "allocatable": allocatable,
                "conditions": self.conditions,
                "addresses": [{"type": "InternalIP", "address": self.address},
                              {"type": "Hostname", "address": self.node_name}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": int(self.port())}},
                "nodeInfo": node_info(self.runtime_name)}

    def labels(self):
        """The Node's labels: L{node_labels} and the extra ones."""
        return dict(node_labels(self.node_name), **self.extra_labels)

    def node(self):
        """The Node to create at registration."""
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": self.node_name, "labels": self.labels()},
                "spec": {}, "status": self.status(self.probe())}

    def start(self, delay=0):
        self.repeater.start(delay)

    def stop(self):
        return self.repeater.stop()

    async def check(self):
        """Post the status if a condition changed or the report is due; True unless it failed."""
        health = self.probe()
        if self.reported is not None:
            last_health, last_time = self.reported
            due = self.clock.seconds() >= self.next_report(last_time)
            if health == last_health and not due:
                return True
        return await self.post(health)

    def next_report(self, last_time):
        """
        When the periodic report after one at C{last_time} is due: an
        interval later, or with a C{report_phase}, at the first moment after
        it at that phase of the common cycle (that starts at the epoch).
        """
        if self.report_phase is None:
            return last_time + self.report_interval
        return last_time + ((self.report_phase - last_time) % self.report_interval
                            or self.report_interval)

    async def post(self, health=None):
        health = self.probe() if health is None else health
        status = self.status(health)
        code, body = await self.api.request(
            "PATCH", f"/api/v1/nodes/{self.node_name}/status", {"status": status},
            content_type="application/merge-patch+json")
        if code != 200:
            self.log.warn("Cannot post node status: {code} {body}", code=code, body=body)
            return False
        self.reported = (health, self.clock.seconds())
        self.posts += 1
        return True
