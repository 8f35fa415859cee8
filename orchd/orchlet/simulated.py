# -*- test-case-name: tests.orchlet.test_simulated -*-
"""
A container runtime that runs nothing: the default runtime of the orchlet.

orchd has no container engine, yet the node agent's whole surface (pod
status, logs, statistics, checkpoints) must behave as if pods ran. This
runtime keeps a record per pod, reports it Running as soon as it is synced,
writes a few log lines, derives statistics from the clock alone (so tests
with a C{Clock} get exact numbers) and checkpoints into real tar archives
holding the container's spec and state.
"""

import hashlib
import io
import ipaddress
import json
import os
import tarfile

from zope.interface import implementer

from orchd.api.meta import rfc3339
from orchd.orchlet.runtime import CheckpointUnsupported, IRuntime, UnknownContainer

#: Pod IPs come from this private range, one per running pod.
POD_NETWORK = ipaddress.ip_network("10.88.0.0/16")
#: Synthetic usage: each container burns this much CPU and holds this much memory.
CONTAINER_NANO_CORES = 1_000_000          # one millicore
CONTAINER_WORKING_SET = 8 * 1024 * 1024
NODE_MEMORY = 8 * 1024 * 1024 * 1024
NODE_BASE_NANO_CORES = 50_000_000
NODE_BASE_WORKING_SET = 512 * 1024 * 1024
_READY_CONDITIONS = ("Initialized", "Ready", "ContainersReady", "PodScheduled")


def _digest(*parts):
    return hashlib.sha256("/".join(parts).encode("utf-8")).hexdigest()


class _Pod:
    """One pod the runtime runs: its object, start time, IP and containers."""

    def __init__(self, pod, started, ip):
        self.pod = pod
        self.started = started
        self.ip = ip
        self.containers = {}       # name -> (container spec, start time)

    @property
    def uid(self):
        return self.pod.get("metadata", {}).get("uid", "")


@implementer(IRuntime)
class SimulatedRuntime:
    """
    Pods as records; see the module docstring.

    @param clock: an C{IReactorTime}; every time it reports comes from here.
    @param root: the orchlet root directory; when given, container logs are
        also written under C{<root>/logs/pods/<ns>_<pod>_<uid>/<container>/0.log}.
    @ivar supports_checkpoint: set False to act as a runtime without checkpoints.
    """

    name = "simulated://1.0"
    default_checkpoint_timeout = 120
    supports_checkpoint = True

    def __init__(self, clock, root=None):
        self._clock = clock
        self._root = root
        self._started = clock.seconds()
        self._pods = {}            # (namespace, name) -> _Pod
        self._logs = {}            # (namespace, name, container) -> bytearray

    # Lifecycle

    def sync_pod(self, pod):
        metadata = pod.get("metadata", {})
        key = (metadata.get("namespace", "default"), metadata.get("name", ""))
        now = self._clock.seconds()
        record = self._pods.get(key)
        if record is not None and record.uid != metadata.get("uid", ""):
            self.kill_pod(*key)
            record = None
        if record is None:
            record = self._pods[key] = _Pod(pod, now, self._allocate_ip())
        record.pod = pod
        for container in pod.get("spec", {}).get("containers", []):
            name = container.get("name", "")
            if name not in record.containers:
                record.containers[name] = (container, now)
                self._log(key, name, record.uid,
                          f"container {name} started from image {container.get('image', '')}")
            else:
                record.containers[name] = (container, record.containers[name][1])

    def kill_pod(self, namespace, name):
        record = self._pods.pop((namespace, name), None)
        if record is None:
            return
        for container in record.containers:
            self._logs.pop((namespace, name, container), None)

    def _allocate_ip(self):
        used = {record.ip for record in self._pods.values()}
        for address in POD_NETWORK.hosts():
            if address.packed[-1] in (0, 1, 255):
                continue
            if str(address) not in used:
                return str(address)
        raise RuntimeError("pod network exhausted")

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
        if container not in record.containers:
            raise UnknownContainer("container", container)
        return record, record.containers[container]

    # Status

    def pods(self):
        return [(record.pod, self._status(record)) for record in self._pods.values()]

    def _status(self, record):
        started = rfc3339(record.started)
        return {
            "phase": "Running",
            "conditions": [{"type": kind, "status": "True", "lastProbeTime": None,
                            "lastTransitionTime": started} for kind in _READY_CONDITIONS],
            "podIP": record.ip,
            "podIPs": [{"ip": record.ip}],
            "startTime": started,
            "containerStatuses": [self._container_status(record, name)
                                  for name in record.containers],
        }

    def _container_status(self, record, name):
        spec, started = record.containers[name]
        image = spec.get("image", "")
        metadata = record.pod.get("metadata", {})
        return {
            "name": name,
            "state": {"running": {"startedAt": rfc3339(started)}},
            "lastState": {},
            "ready": True,
            "started": True,
            "restartCount": 0,
            "image": image,
            "imageID": f"{image}@sha256:{_digest(image)}",
            "containerID": "simulated://" + _digest(metadata.get("namespace", ""),
                                                     metadata.get("name", ""), record.uid, name),
        }

    # Statistics

    def stats(self):
        now = self._clock.seconds()
        stamp = rfc3339(now)
        pods, total_cores, total_memory = [], NODE_BASE_NANO_CORES, NODE_BASE_WORKING_SET
        for (namespace, name), record in self._pods.items():
            containers = []
            for container, (_, started) in record.containers.items():
                containers.append({
                    "name": container, "startTime": rfc3339(started),
                    "cpu": _cpu(stamp, CONTAINER_NANO_CORES, now - started),
                    "memory": _memory(stamp, CONTAINER_WORKING_SET),
                })
            count = len(containers)
            total_cores += CONTAINER_NANO_CORES * count
            total_memory += CONTAINER_WORKING_SET * count
            pods.append({
                "podRef": {"name": name, "namespace": namespace, "uid": record.uid},
                "startTime": rfc3339(record.started),
                "containers": containers,
                "cpu": _cpu(stamp, CONTAINER_NANO_CORES * count, (now - record.started) * count),
                "memory": _memory(stamp, CONTAINER_WORKING_SET * count),
                "network": {"time": stamp, "name": "eth0", "rxBytes": 0, "rxErrors": 0,
                            "txBytes": 0, "txErrors": 0},
            })
        node = {
            "startTime": rfc3339(self._started),
            "cpu": _cpu(stamp, total_cores, now - self._started),
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
        record, (spec, started) = self._container(namespace, pod, container)
        if not self.supports_checkpoint:
            raise CheckpointUnsupported(f"runtime {self.name} does not support checkpoints")
        members = {
            "spec.json": spec,
            "state.json": self._container_status(record, container),
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
