"""
A big store: --big-pods running pods bound to --big-nodes Nodes (150,000 on
5,000 at full size), listed in pages and in full from the watch cache, with
orchd's memory per stored object.

One orchd with --no-orchlet (nothing runs the pods) and a node monitor
grace period no run reaches (nothing heartbeats the Nodes, and they must
stay Ready: else the node lifecycle controller would rewrite every pod
while the lists are timed). Setup, not measured: --big-namespaces
namespaces, the Nodes (Ready, with a node's usual status), then each pod
created bound to its node (spec.nodeName, as the scheduler's binding leaves
it) and its status written as a running pod's (conditions, container
statuses, IPs), on 16 connections. The pods carry no owner (the garbage
collector would delete pods of a missing ReplicaSet) and tolerate
unreachable and not-ready nodes forever.

Then orchd is stopped, the stored pod records are read from its LevelDB
directly (their count and bytes), and orchd is started again on the same
data directory: start-up time to /readyz and to idle (orchd's CPU quiet)
with every object loaded, and orchd's RSS then, which holds nothing from
the creates. Measured on that server, for JSON and protobuf:

- a paged LIST of every pod (/api/v1/pods?limit=--page-limit, following
  continue tokens to the end, one keep-alive connection from this process):
  seconds per full pass, p50 and p99 of a page (request sent to last byte);
- a full LIST from the watch cache (resourceVersion=0): seconds and bytes.

Each --rounds times. Memory per stored object: (RSS of the loaded server -
RSS of the same server empty) / objects (pods and Nodes), against the mean
JSON size of a pod (as a GET returns it) and of its stored record.
"""

import http.client
import json
import os
import shutil
import statistics
import sys
import threading
import time
import urllib.parse

from common import PROTOBUF, ROOT, Orchd, cpu_seconds, post_all, rss_mb

FLAGS = ("--no-orchlet", "--node-monitor-grace-period=100000h")
#: Start-up with every object loaded may take minutes at full size.
READY_TIMEOUT = 1800
CONNECTIONS = 16
IMAGE = "registry.example.com/team/payments-api"


def node_name(i):
    return f"node-{i:05d}"


def make_node(i):
    name = node_name(i)
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "m5.2xlarge",
            "topology.kubernetes.io/zone": f"zone-{i % 3}",
            "topology.kubernetes.io/region": "region-1"}},
        "spec": {"podCIDR": f"10.{64 + i // 256}.{i % 256}.0/24",
                 "providerID": f"sim://{name}"},
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "7910m", "memory": "31Gi", "pods": "110"},
            "conditions": [{"type": t, "status": s, "reason": r, "message": r,
                            "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}
                           for t, s, r in (("MemoryPressure", "False", "OrchletHasSufficientMemory"),
                                           ("DiskPressure", "False", "OrchletHasNoDiskPressure"),
                                           ("PIDPressure", "False", "OrchletHasSufficientPID"),
                                           ("Ready", "True", "OrchletReady"))],
            "addresses": [{"type": "InternalIP", "address": f"10.0.{i // 256}.{i % 256}"},
                          {"type": "Hostname", "address": name}],
            "nodeInfo": {"machineID": f"{i:032x}", "systemUUID": f"{i:032x}",
                         "bootID": f"{i:032x}", "kernelVersion": "6.1.0-18-amd64",
                         "osImage": "Debian GNU/Linux 12 (bookworm)",
                         "containerRuntimeVersion": "containerd://1.7.13",
                         "kubeletVersion": "v1.30.0", "kubeProxyVersion": "v1.30.0",
                         "operatingSystem": "linux", "architecture": "amd64"},
        },
    }


def _container(name, port, i, full=True):
    container = {
        "name": name, "image": f"{IMAGE}-{name}:1.{i % 7}.3",
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "env": [{"name": "LOG_LEVEL", "value": "info"},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "UPSTREAM_URL", "value": "http://ledger.payments.svc:8080"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                      "limits": {"cpu": "500m", "memory": "256Mi"}},
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": port},
                           "periodSeconds": 10},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}],
    }
    if not full:
        del container["env"], container["readinessProbe"], container["volumeMounts"]
    return container


def make_pod(i, nodes, namespaces):
    app = f"app-{i % 97}"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"{app}-{i:06d}", "namespace": f"ns-{i % namespaces:03d}",
            "labels": {"app": app, "pod-template-hash": f"{i % 97:08x}", "tier": "backend"},
            "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "8080"}},
        "spec": {
            "nodeName": node_name(i % nodes),
            "containers": [_container("api", 8080, i), _container("sidecar", 9090, i, full=False)],
            "volumes": [{"name": "config", "configMap": {"name": "app-config"}}],
            "automountServiceAccountToken": False,
            "tolerations": [{"key": f"node.kubernetes.io/{taint}", "operator": "Exists",
                             "effect": "NoExecute"} for taint in ("not-ready", "unreachable")],
        },
    }


def running_status(pod, i):
    """A running pod's status, as its node agent writes it."""
    started = "2026-01-01T00:00:00Z"
    containers = pod["spec"]["containers"]
    return {
        "phase": "Running", "qosClass": "Burstable",
        "hostIP": f"10.0.{(i // 256) % 256}.{i % 256}", "podIP": f"10.64.{(i // 256) % 256}.{i % 256}",
        "podIPs": [{"ip": f"10.64.{(i // 256) % 256}.{i % 256}"}], "startTime": started,
        "conditions": [{"type": t, "status": "True", "lastProbeTime": None,
                        "lastTransitionTime": started}
                       for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
        "containerStatuses": [{
            "name": c["name"], "ready": True, "restartCount": 0, "started": True,
            "image": c["image"], "imageID": f"{c['image']}@sha256:{i:064x}",
            "containerID": f"containerd://{i:060x}{n:04x}",
            "state": {"running": {"startedAt": started}}, "lastState": {}}
            for n, c in enumerate(containers)],
    }


def fill_pods(orchd, args):
    """Create each pod bound to its node and write its running status (setup)."""
    pods = args.big_pods
    failures = []

    def worker(start):
        conn = http.client.HTTPSConnection("127.0.0.1", orchd.port, context=orchd.context,
                                           timeout=120)
        try:
            for i in range(start, pods, CONNECTIONS):
                pod = make_pod(i, args.big_nodes, args.big_namespaces)
                path = f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods"
                status, data = orchd.request("POST", path, pod, conn)
                if status != 201:
                    raise RuntimeError(f"pod create: {status} {data[:200]!r}")
                created = json.loads(data)
                created["status"] = running_status(created, i)
                status, data = orchd.request(
                    "PUT", f"{path}/{pod['metadata']['name']}/status", created, conn)
                if status != 200:
                    raise RuntimeError(f"pod status: {status} {data[:200]!r}")
                if start == 0 and i and i % (CONNECTIONS * 5000) == 0:
                    print(f"  {i} pods", file=sys.stderr)
        except Exception as e:  # reported by the caller, not lost in a thread
            failures.append(e)
        finally:
            conn.close()

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(CONNECTIONS)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if failures:
        raise SystemExit(f"setup failed: {failures[0]}")


def setup(orchd, args):
    namespaces = [f"ns-{n:03d}" for n in range(args.big_namespaces)]
    post_all(orchd, (("/api/v1/namespaces", {"metadata": {"name": ns}}) for ns in namespaces),
             CONNECTIONS)
    post_all(orchd, (("/api/v1/nodes", make_node(i)) for i in range(args.big_nodes)),
             CONNECTIONS)
    fill_pods(orchd, args)


def wait_idle(pid, quiet=0.15, seconds=3, timeout=READY_TIMEOUT):
    """Wait until orchd uses under C{quiet} of a core for C{seconds} running seconds."""
    deadline = time.time() + timeout
    calm = 0
    last = cpu_seconds(pid)
    while time.time() < deadline and calm < seconds:
        time.sleep(1)
        now = cpu_seconds(pid)
        calm = calm + 1 if now - last < quiet else 0
        last = now


def stored_pods(data_dir):
    """The count and total bytes of the pods' current records in orchd's LevelDB."""
    import plyvel

    db = plyvel.DB(os.path.join(data_dir, "store"))
    try:
        count = size = 0
        for key, value in db.iterator(prefix=b"c/"):
            if b"/pods/" in key:
                count += 1
                size += len(value)
        return count, size
    finally:
        db.close()


def _protobuf_list(data):
    """
    The item count and continue token of a protobuf PodList, read from the
    messages alone (converting 150,000 pods to dicts takes minutes here).
    """
    sys.path.insert(0, ROOT)
    from orchd.api.proto.envelope import MAGIC, codec

    pb = codec()
    envelope = pb._unknown.FromString(data[len(MAGIC):])
    message = pb._schema.kind_message("v1", "PodList").FromString(envelope.raw)
    return len(message.items), getattr(message.metadata, "continue")


def list_pass(orchd, conn, media, limit):
    """
    LIST every pod in pages of C{limit} (0: one LIST at resourceVersion=0):
    (seconds of each page, pods seen, seconds in all, bytes in all). The
    seconds are the pages' own, from request sent to last byte in: decoding
    a page here for its continue token (slow for protobuf in Python) is not
    counted.
    """
    path = f"/api/v1/pods?limit={limit}" if limit else "/api/v1/pods?resourceVersion=0"
    token, times, items, size = None, [], 0, 0
    headers = {"accept": media}
    while True:
        url = path + (f"&continue={urllib.parse.quote(token, safe='')}" if token else "")
        start = time.perf_counter()
        conn.request("GET", url, headers=headers)
        response = conn.getresponse()
        data = response.read()
        times.append(time.perf_counter() - start)
        if response.status != 200:
            raise SystemExit(f"LIST of pods failed: {response.status} {data[:200]!r}")
        size += len(data)
        if media == PROTOBUF:
            count, token = _protobuf_list(data)
        else:
            page = json.loads(data)
            count, token = len(page.get("items") or ()), page["metadata"].get("continue")
        items += count
        if not limit or not token:
            return times, items, sum(times), size


def list_round(orchd, args, results):
    """One paged pass and one full LIST in each format, on one connection pinned to core 1."""
    affinity = os.sched_getaffinity(0)
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})
    conn = http.client.HTTPSConnection("127.0.0.1", orchd.port, context=orchd.context,
                                       timeout=600)
    try:
        for media, name in (("application/json", "json"), (PROTOBUF, "protobuf")):
            for limit, kind in ((args.page_limit, "paged"), (0, "full")):
                before = cpu_seconds(orchd.process.pid)
                run = list_pass(orchd, conn, media, limit)
                cpu = cpu_seconds(orchd.process.pid) - before
                if run[1] != args.big_pods:
                    raise SystemExit(f"{kind} LIST ({name}) saw {run[1]} pods, "
                                     f"not {args.big_pods}")
                results.setdefault(f"{kind}-{name}", []).append(run + (cpu,))
    finally:
        conn.close()
        os.sched_setaffinity(0, affinity)


def summarize_lists(results):
    summary = {}
    for key, runs in results.items():
        pages = sorted(t * 1000 for times, *_ in runs for t in times)
        summary[key] = {
            "seconds": round(statistics.median(r[2] for r in runs), 3),
            "seconds_max": round(max(r[2] for r in runs), 3),
            "orchd_cpu_seconds": round(statistics.median(r[4] for r in runs), 3),
            "bytes": runs[0][3],
            "pages": len(runs[0][0]),
            "page_p50_ms": round(statistics.median(pages), 2),
            "page_p99_ms": round(pages[min(len(pages) - 1, int(0.99 * len(pages)))], 2),
        }
    return summary


def fill_store(workdir, args, result):
    """
    Fill a fresh orchd's store (the figures of the filled server, and the
    pods' JSON and stored sizes, into C{result}).
    """
    orchd = Orchd(workdir, *FLAGS)
    try:
        pid = orchd.process.pid
        print(f"setup: {args.big_nodes} nodes, {args.big_pods} running pods ...",
              file=sys.stderr)
        began = time.time()
        setup(orchd, args)
        result["fill_seconds"] = round(time.time() - began, 1)
        wait_idle(pid, timeout=120)
        result["rss_filled_mb"] = rss_mb(pid)
        status, data = orchd.request("GET", f"/api/v1/namespaces/ns-000/pods/"
                                     f"{make_pod(0, 1, 1)['metadata']['name']}")
        sample = len(data)
    finally:
        orchd.stop()
    count, stored = stored_pods(orchd.data)
    if count != args.big_pods:
        raise SystemExit(f"the store holds {count} pods, not {args.big_pods}")
    result.update(pod_json_bytes=sample, pod_stored_bytes=round(stored / count))
    return result


def bigstore_cases(workdir, args, report):
    if args.big_dir:
        # A store filled by an earlier run with the same sizes is used as it is.
        workdir = args.big_dir
        os.makedirs(workdir, exist_ok=True)
    result = {"pods": args.big_pods, "nodes": args.big_nodes,
              "namespaces": args.big_namespaces, "page_limit": args.page_limit}
    marker = os.path.join(workdir, "bigstore.json")
    if os.path.exists(marker):
        with open(marker) as f:
            filled = json.load(f)
        if [filled[k] for k in ("pods", "nodes", "namespaces")] != [
                result[k] for k in ("pods", "nodes", "namespaces")]:
            raise SystemExit(f"{workdir} holds a store of other sizes: {filled}")
        print(f"using the store filled in {workdir}", file=sys.stderr)
    else:
        filled = fill_store(workdir, args, dict(result))
        with open(marker, "w") as f:
            json.dump(filled, f)
    result.update(filled)
    # The same build with nothing stored, for the memory an object costs.
    empty = os.path.join(workdir, "empty")
    shutil.rmtree(empty, ignore_errors=True)
    os.makedirs(empty)
    orchd = Orchd(empty, *FLAGS)
    try:
        wait_idle(orchd.process.pid, seconds=2, timeout=60)
        result["rss_empty_mb"] = rss_mb(orchd.process.pid)
    finally:
        orchd.stop()
        shutil.rmtree(empty, ignore_errors=True)

    print("restart on the filled store ...", file=sys.stderr)
    began = time.time()
    orchd = Orchd(workdir, *FLAGS, ready_timeout=READY_TIMEOUT)
    try:
        pid = orchd.process.pid
        result["start_ready_seconds"] = round(time.time() - began, 1)
        wait_idle(pid)
        result["start_idle_seconds"] = round(time.time() - began, 1)
        result["start_cpu_seconds"] = round(cpu_seconds(pid), 1)
        result["rss_loaded_mb"] = rss_mb(pid)
        results = {}
        for round_number in range(args.rounds):
            print(f"bigstore lists {round_number + 1}/{args.rounds}", file=sys.stderr)
            list_round(orchd, args, results)
        result["rss_after_lists_mb"] = rss_mb(pid)
        result["lists"] = summarize_lists(results)
    finally:
        orchd.stop()
    objects = args.big_pods + args.big_nodes
    result["bytes_per_object"] = round(
        (result["rss_loaded_mb"] - result["rss_empty_mb"]) * 2**20 / objects)
    report["bigstore"] = result


def print_bigstore(report):
    b = report.get("bigstore")
    if not b:
        return
    print(f"bigstore: {b['pods']} pods on {b['nodes']} nodes in {b['namespaces']} namespaces "
          f"(filled in {b['fill_seconds']:.0f} s); restart: ready in "
          f"{b['start_ready_seconds']:.1f} s, idle in {b['start_idle_seconds']:.1f} s "
          f"({b['start_cpu_seconds']:.1f} s CPU)")
    print(f"  orchd RSS: empty {b['rss_empty_mb']:.0f} MB, filled {b['rss_filled_mb']:.0f} MB, "
          f"restarted {b['rss_loaded_mb']:.0f} MB, after lists {b['rss_after_lists_mb']:.0f} MB; "
          f"{b['bytes_per_object']} bytes per stored object against a pod's "
          f"{b['pod_json_bytes']} bytes of JSON and {b['pod_stored_bytes']} stored "
          f"({b['bytes_per_object'] / b['pod_stored_bytes']:.1f} times)")
    for key, s in b["lists"].items():
        kind, media = key.split("-")
        shape = (f"{s['pages']} pages of {b['page_limit']}: page p50 {s['page_p50_ms']:.1f} ms, "
                 f"p99 {s['page_p99_ms']:.1f} ms; " if kind == "paged" else "resourceVersion=0: ")
        print(f"  LIST {kind} {media}: {shape}{s['seconds']:.2f} s (max {s['seconds_max']:.2f}), "
              f"{s['orchd_cpu_seconds']:.2f} s orchd CPU, {s['bytes'] / 2**20:.1f} MB")
