# -*- test-case-name: tests.orchlet.test_simulated -*-
"""
A container runtime that runs nothing: the default runtime of the orchlet.

orchd has no container engine, yet the node agent's whole surface (pod
status, events, logs, statistics, checkpoints) must behave as if pods ran.
This runtime keeps a L{SimulatedPod} per pod, which walks it through
upstream's visible states on the reactor's clock (pulling, created,
started, ready, exited, stopped: see L{orchd.orchlet.simpod}, with the
timings of L{orchd.orchlet.behaviour}), writes a few log lines, derives
statistics from the clock alone (so tests with a C{Clock} get exact
numbers) and checkpoints into real tar archives holding the container's
spec and state. What changes by itself is told to the observer (the node
agent), which reports it.
"""

import io
import ipaddress
import json
import os
import tarfile

from twisted.internet.defer import Deferred, succeed
from zope.interface import implementer

from orchd.api.meta import rfc3339
from orchd.orchlet.runtime import CheckpointUnsupported, IRuntime, UnknownContainer
from orchd.orchlet.simpod import PodHooks, SimulatedPod
from orchd.orchlet.simusage import CPUCounter, PodUsage, Usage

#: Pod IPs come from this private range by default, one per pod.
POD_NETWORK = ipaddress.ip_network("10.88.0.0/16")
#: Synthetic usage (per container, from its pod's annotations) is L{orchd.orchlet.simusage}'s.
NODE_MEMORY = 8 * 1024 * 1024 * 1024
NODE_BASE_NANO_CORES = 50_000_000
NODE_BASE_WORKING_SET = 512 * 1024 * 1024


@implementer(PodHooks)
class _Hooks:
    """What the pods of one runtime tell it."""

    def __init__(self, runtime):
        self._runtime = runtime

    def changed(self, pod):
        self._runtime._changed(pod)

    def event(self, pod, type, reason, message, field_path):
        self._runtime._event(pod, type, reason, message, field_path)

    def log(self, pod, container, text):
        self._runtime._log(pod.key, container, pod.uid, text)

    def has_image(self, image):
        return image in self._runtime.images

    def add_image(self, image):
        self._runtime.images.add(image)


@implementer(IRuntime)
class SimulatedRuntime:
    """
    Pods as records; see the module docstring.

    @param clock: an C{IReactorTime}; every time it reports comes from here.
    @param root: the orchlet root directory; when given, container logs are
        also written under C{<root>/logs/pods/<ns>_<pod>_<uid>/<container>/0.log}.
    @param host_ip: the node's address, reported as each pod's C{hostIP}.
    @param network: the C{ipaddress} network pod IPs come from.
    @ivar supports_checkpoint: set False to act as a runtime without checkpoints.
    @ivar images: the images this node has pulled.
    """

    name = "simulated://1.0"
    default_checkpoint_timeout = 120
    supports_checkpoint = True

    def __init__(self, clock, root=None, host_ip="127.0.0.1", network=POD_NETWORK):
        self._clock = clock
        self._root = root
        self._host_ip = host_ip
        self._network = network
        self._started = clock.seconds()
        self._pods = {}            # (namespace, name) -> SimulatedPod
        self._usage = {}           # (namespace, name) -> PodUsage
        # The node's counter: its own base rate plus its running containers',
        # as last seen (the rate changes at each stats() call).
        self._node_cpu = CPUCounter(self._started, NODE_BASE_NANO_CORES)
        self._logs = {}            # (namespace, name, container) -> bytearray
        self._ips = set()
        self._next_ip = 0
        self._hooks = _Hooks(self)
        self._observer = None
        self.images = set()

    def observe(self, observer):
        self._observer = observer

    # Lifecycle

    def sync_pod(self, pod):
        metadata = pod.get("metadata", {})
        key = (metadata.get("namespace", "default"), metadata.get("name", ""))
        record = self._pods.get(key)
        if record is not None and record.uid != metadata.get("uid", ""):
            self.kill_pod(*key)
            record = None
        if record is None:
            stored = (pod.get("status") or {}).get("podIP")
            record = self._pods[key] = SimulatedPod(pod, self._clock, self._hooks,
                                                    self._host_ip, self._allocate_ip(stored))
            record.start()
            usage = self._usage[key] = PodUsage(Usage.of(pod))
            self._usage_problems(record, usage.usage.problems, [])
        else:
            usage = self._usage.setdefault(key, PodUsage(Usage.of(pod)))
            self._count(record, usage)      # what ran so far, at the old rate
            record.update(pod)
            before = usage.usage.problems
            usage.update(self._clock.seconds(), Usage.of(pod))
            self._usage_problems(record, usage.usage.problems, before)

    def _usage_problems(self, record, problems, before):
        """A C{FailedSimulation} event for each usage annotation newly ignored."""
        for key, why in problems:
            if (key, why) not in before:
                self._event(record, "Warning", "FailedSimulation",
                            f"annotation {key} ignored: {why}", None)

    def stop_pod(self, namespace, name, grace):
        record = self._pods.get((namespace, name))
        if record is None:
            return succeed(None)
        stopped = Deferred()
        record.stop(max(grace, 0), lambda: stopped.called or stopped.callback(None))
        return stopped

    def kill_pod(self, namespace, name):
        record = self._pods.pop((namespace, name), None)
        if record is None:
            return
        record.kill()
        self._usage.pop((namespace, name), None)
        self._ips.discard(record.ip)
        for container in record.containers:
            self._logs.pop((namespace, name, container.name), None)

    def close(self):
        for record in self._pods.values():
            record.pause()

    def _allocate_ip(self, preferred=None):
        """A free pod IP: C{preferred} (the pod's stored one, after a restart) if it can be."""
        try:
            wanted = ipaddress.ip_address(preferred) if preferred else None
        except ValueError:
            wanted = None
        if wanted is not None and wanted in self._network and str(wanted) not in self._ips \
                and wanted.packed[-1] not in (0, 1, 255):
            self._ips.add(str(wanted))
            return str(wanted)
        hosts = self._network.num_addresses
        base = int(self._network.network_address)
        for _ in range(hosts):
            offset = self._next_ip % hosts
            self._next_ip += 1
            address = ipaddress.ip_address(base + offset)
            if address.packed[-1] in (0, 1, 255) or str(address) in self._ips:
                continue
            self._ips.add(str(address))
            return str(address)
        raise RuntimeError("pod network exhausted")

    def _changed(self, record):
        if self._observer is not None and self._pods.get(record.key) is record:
            self._observer.pod_changed(*record.key)

    def _event(self, record, type, reason, message, field_path):
        if self._observer is not None:
            self._observer.pod_event(record.pod, type, reason, message, field_path)

    # Logs

    def _log(self, key, container, uid, text):
        line = f"{rfc3339(self._clock.seconds())} {text}\n".encode("utf-8")
        self._logs.setdefault(key + (container,), bytearray()).extend(line)
        if self._root is None:
            return
        directory = os.path.join(self._root, "logs", "pods", f"{key[0]}_{key[1]}_{uid}",
                                 container)
        try:
            os.makedirs(directory, exist_ok=True)
            with open(os.path.join(directory, "0.log"), "ab") as stream:
                stream.write(line)
        except OSError:
            pass        # the in-memory log stays authoritative

    def print_line(self, namespace, pod, container, text):
        """What a program in the container would print: one more log line."""
        record, _ = self._container(namespace, pod, container)
        self._log((namespace, pod), container, record.uid, text)

    def container_logs(self, namespace, pod, container):
        self._container(namespace, pod, container)
        return bytes(self._logs.get((namespace, pod, container), b""))

    def _container(self, namespace, pod, container):
        record = self._pods.get((namespace, pod))
        if record is None:
            raise UnknownContainer("pod", f"{namespace}/{pod}")
        found = record.container(container)
        if found is None:
            raise UnknownContainer("container", container)
        return record, found

    # Status

    def pod_status(self, namespace, name):
        record = self._pods.get((namespace, name))
        return None if record is None else record.status()

    def pods(self):
        return [(record.pod, record.status()) for record in self._pods.values()]

    # Statistics

    def _count(self, record, usage):
        """C{[(container, counter)]} of C{record}'s running containers."""
        return [(container, usage.counter(container.name, container.started_at))
                for container in record.containers if container.running]

    def stats(self):
        # To the millisecond, as the resource metrics stamp it: rates between
        # two readings are then exact.
        now = round(self._clock.seconds(), 3)
        stamp = rfc3339(now)
        pods, total_cores, total_memory = [], NODE_BASE_NANO_CORES, NODE_BASE_WORKING_SET
        for (namespace, name), record in self._pods.items():
            usage = self._usage.setdefault((namespace, name), PodUsage(Usage.of(record.pod)))
            rate, working_set = usage.usage.nano_cores, usage.usage.working_set
            containers, used = [], 0
            for container, counter in self._count(record, usage):
                seconds = counter.core_nano_seconds(now)
                used += seconds
                containers.append({
                    "name": container.name, "startTime": rfc3339(container.started_at),
                    "cpu": {"time": stamp, "usageNanoCores": rate,
                            "usageCoreNanoSeconds": seconds},
                    "memory": _memory(stamp, working_set),
                })
            count = len(containers)
            total_cores += rate * count
            total_memory += working_set * count
            pods.append({
                "podRef": {"name": name, "namespace": namespace, "uid": record.uid},
                "startTime": rfc3339(record.arrived),
                "containers": containers,
                "cpu": {"time": stamp, "usageNanoCores": rate * count,
                        "usageCoreNanoSeconds": used},
                "memory": _memory(stamp, working_set * count),
                "network": {"time": stamp, "name": "eth0", "rxBytes": 0, "rxErrors": 0,
                            "txBytes": 0, "txErrors": 0},
            })
        node_cpu = {"time": stamp, "usageNanoCores": total_cores,
                    "usageCoreNanoSeconds": self._node_cpu.core_nano_seconds(now)}
        self._node_cpu.set_rate(now, total_cores)
        node = {
            "startTime": rfc3339(self._started),
            "cpu": node_cpu,
            "memory": dict(_memory(stamp, total_memory),
                           availableBytes=NODE_MEMORY - total_memory),
            "systemContainers": [
                {"name": "orchlet", "startTime": rfc3339(self._started),
                 "cpu": _cpu(stamp, NODE_BASE_NANO_CORES, now - self._started),
                 "memory": _memory(stamp, NODE_BASE_WORKING_SET)},
            ],
        }
        return {"node": node, "pods": pods}

    # Checkpoints

    def checkpoint(self, namespace, pod, container, path, timeout):
        record, found = self._container(namespace, pod, container)
        if not self.supports_checkpoint:
            raise CheckpointUnsupported(f"runtime {self.name} does not support checkpoints")
        members = {
            "spec.json": found.spec,
            "state.json": found.status(),
            "pod.json": {"metadata": record.pod.get("metadata", {}), "podIP": record.ip},
        }
        stamp = self._clock.seconds()
        with tarfile.open(path, "w") as archive:
            for name, content in members.items():
                data = json.dumps(content, indent=2, sort_keys=True).encode("utf-8")
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mtime = int(stamp)
                info.mode = 0o600
                archive.addfile(info, io.BytesIO(data))
            log = self._logs.get((namespace, pod, container), b"")
            info = tarfile.TarInfo("container.log")
            info.size, info.mtime, info.mode = len(log), int(stamp), 0o600
            archive.addfile(info, io.BytesIO(bytes(log)))


def _cpu(stamp, nano_cores, seconds):
    return {"time": stamp, "usageNanoCores": int(nano_cores),
            "usageCoreNanoSeconds": int(nano_cores * max(seconds, 0))}


def _memory(stamp, working_set):
    return {"time": stamp, "usageBytes": int(working_set), "workingSetBytes": int(working_set),
            "rssBytes": int(working_set // 2), "pageFaults": 0, "majorPageFaults": 0}
