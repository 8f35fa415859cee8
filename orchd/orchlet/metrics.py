# -*- test-case-name: tests.orchlet.test_endpoint -*-
"""
The orchlet's usage reports: the stats Summary and the Prometheus resource metrics.

Both come from the one C{runtime.stats()} answer, so the metrics server
(which reads C{/metrics/resource}) and C{stats/summary} readers never see
different figures. Names, help texts and types follow upstream's resource
metrics endpoint, which the metrics server parses by name.
"""

import calendar
import os
import platform
import time

from orchd.api.meta import rfc3339

PROMETHEUS_TYPE = b"text/plain; version=0.0.4; charset=utf-8"

_METRICS = (
    ("container_cpu_usage_seconds_total", "counter",
     "Cumulative cpu time consumed by the container in core-seconds"),
    ("container_memory_working_set_bytes", "gauge",
     "Current working set of the container in bytes"),
    ("container_start_time_seconds", "gauge",
     "Start time of the container since unix epoch in seconds"),
    ("node_cpu_usage_seconds_total", "counter",
     "Cumulative cpu time consumed by the node in core-seconds"),
    ("node_memory_working_set_bytes", "gauge", "Current working set of the node in bytes"),
    ("pod_cpu_usage_seconds_total", "counter",
     "Cumulative cpu time consumed by the pod in core-seconds"),
    ("pod_memory_working_set_bytes", "gauge", "Current working set of the pod in bytes"),
    ("resource_scrape_error", "gauge",
     "1 if there was an error while getting container metrics, 0 otherwise"),
    # [COMPAT] the older name, still served beside the stable one (ALPHA upstream).
    ("scrape_error", "gauge",
     "1 if there was an error while getting container metrics, 0 otherwise"),
)


def summary(stats, node_name):
    """The Summary of REFERENCE section 10: the runtime's figures with C{nodeName}."""
    node = dict(stats.get("node") or {})
    node = {"nodeName": node_name, **node}
    return {"node": node, "pods": list(stats.get("pods") or [])}


def _seconds(stamp):
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


def _labels(**labels):
    inner = ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items())
    return "{" + inner + "}"


def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value):
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def resource_metrics(stats, read_at=None):
    """
    The Prometheus text exposition of C{/metrics/resource}, as bytes.

    @param read_at: when C{stats} were read (seconds since the epoch), or
        None. The stats' times have a second's precision; a sample stamped
        in that same second is stamped C{read_at} to the millisecond, as the
        kubelet's are, so that rates over a scrape interval are exact.
    """
    samples = {name: [] for name, _, _ in _METRICS}

    def add(name, labels, value, stamp):
        millis = ""
        if stamp:
            when = _seconds(stamp)
            if read_at is not None and int(read_at) == when:
                when = read_at
            millis = f" {int(round(when * 1000))}"
        samples[name].append(f"{name}{labels} {_number(value)}{millis}")

    node = stats.get("node") or {}
    cpu, memory = node.get("cpu") or {}, node.get("memory") or {}
    if "usageCoreNanoSeconds" in cpu:
        add("node_cpu_usage_seconds_total", "", cpu["usageCoreNanoSeconds"] / 1e9, cpu["time"])
    if "workingSetBytes" in memory:
        add("node_memory_working_set_bytes", "", memory["workingSetBytes"], memory["time"])
    for pod in stats.get("pods") or []:
        ref = pod.get("podRef") or {}
        pod_labels = dict(namespace=ref.get("namespace", ""), pod=ref.get("name", ""))
        for container in pod.get("containers") or []:
            labels = _labels(container=container.get("name", ""), **pod_labels)
            cpu, memory = container.get("cpu") or {}, container.get("memory") or {}
            if "usageCoreNanoSeconds" in cpu:
                add("container_cpu_usage_seconds_total", labels,
                    cpu["usageCoreNanoSeconds"] / 1e9, cpu["time"])
            if "workingSetBytes" in memory:
                add("container_memory_working_set_bytes", labels, memory["workingSetBytes"],
                    memory["time"])
            if container.get("startTime"):
                add("container_start_time_seconds", labels, _seconds(container["startTime"]),
                    None)
        labels = _labels(**pod_labels)
        cpu, memory = pod.get("cpu") or {}, pod.get("memory") or {}
        if "usageCoreNanoSeconds" in cpu:
            add("pod_cpu_usage_seconds_total", labels, cpu["usageCoreNanoSeconds"] / 1e9,
                cpu["time"])
        if "workingSetBytes" in memory:
            add("pod_memory_working_set_bytes", labels, memory["workingSetBytes"],
                memory["time"])
    add("resource_scrape_error", "", 0, None)
    add("scrape_error", "", 0, None)
    lines = []
    for name, kind, help_text in _METRICS:
        stability = "ALPHA" if name == "scrape_error" else "STABLE"
        lines.append(f"# HELP {name} [{stability}] {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(samples[name])
    return ("\n".join(lines) + "\n").encode("utf-8")


def machine_info(node_name, clock):
    """The C{/spec/} answer: cAdvisor's MachineInfo for this host, in short."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = 0
    machine_id = _read_first("/etc/machine-id") or _read_first("/var/lib/dbus/machine-id")
    cores = os.cpu_count() or 1
    return {
        "timestamp": rfc3339(clock.seconds()),
        "num_cores": cores, "num_physical_cores": cores, "num_sockets": 1,
        "cpu_frequency_khz": 0, "memory_capacity": memory, "memory_by_type": {},
        "machine_id": machine_id, "system_uuid": machine_id,
        "boot_id": _read_first("/proc/sys/kernel/random/boot_id"),
        "filesystems": [], "disk_map": {}, "network_devices": [], "topology": [],
        "cloud_provider": "Unknown", "instance_type": "Unknown", "instance_id": "None",
        "hostname": node_name, "architecture": platform.machine(),
    }


def _read_first(path):
    try:
        with open(path, encoding="ascii", errors="replace") as stream:
            return stream.read().strip()
    except OSError:
        return ""
