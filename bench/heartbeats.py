"""
Heartbeats at scale: one orchd and --nodes simulated nodes renewing their
Leases every --renew-interval seconds.

orchd runs with --no-orchlet, so the simulated nodes are the only ones. Setup
(not measured) creates each Node with a Ready=True condition and its Lease,
as admin, and issues each node a client certificate from orchd's CA (CN
system:node:<name>, O system:nodes) so that every renewal goes through the
Node authorizer. heartbeat_load.py, a separate process on core 1, then
renews every Lease on its own keep-alive connection, warms up for one
interval and measures --heartbeat-secs. Reported: orchd's CPU over the
window as a fraction of one core (and its busiest interval), renewal latency
(p50, p99, max), renewals done against expected, errors, and the Nodes whose
Ready condition is not True at the end (falsely marked Unknown: target 0).

cluster_cases is the same question asked of the real simulated nodes
(orchd.orchlet.simnodes) brought up the documented way, in a second process.
"""

import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time

from common import (
    HERE, ROOT, Orchd, SimulatedNodes, cpu_seconds, issue_client_cert, ms_text, pinned, post_all,
    rss_mb,
)

LEASES = "/apis/coordination.orch.io/v1/namespaces/orch-node-lease/leases"


def node_body(name, now):
    condition = {"type": "Ready", "status": "True", "reason": "OrchletReady",
                 "message": "orchlet is posting ready status",
                 "lastHeartbeatTime": now, "lastTransitionTime": now}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"conditions": [condition]}}


def lease_body(name, renew_time):
    return {"apiVersion": "coordination.orch.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "orch-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                     "renewTime": renew_time}}


def setup(orchd, workdir, count):
    """Nodes, their Leases and certificates; the file heartbeat_load.py reads."""
    sys.path.insert(0, ROOT)
    from orchd.orchlet.heartbeat import micro_time
    from orchd.api.meta import rfc3339

    names = [f"hb-node-{i:05d}" for i in range(count)]
    now = rfc3339(time.time())
    created = []       # the create drops the status: set it with a PUT of nodes/status
    post_all(orchd, (("/api/v1/nodes", node_body(name, now)) for name in names),
             created=lambda path, body, data: created.append(json.loads(data)))
    post_all(orchd, ((f"/api/v1/nodes/{node['metadata']['name']}/status",
                      dict(node, status=node_body("", now)["status"])) for node in created),
             method="PUT", expect=200)
    status, data = orchd.request("GET", "/api/v1/nodes")
    ready = sum(1 for node in json.loads(data)["items"] if ready_status(node) == "True")
    if ready != count:
        raise SystemExit(f"setup: {ready} of {count} nodes are Ready after create")
    leases = {}

    def keep(path, body, data):
        leases[body["metadata"]["name"]] = json.loads(data)

    post_all(orchd, ((LEASES, lease_body(name, micro_time(time.time()))) for name in names),
             created=keep)
    nodes = []
    for name in names:
        cert, key = issue_client_cert(orchd, f"system:node:{name}", ["system:nodes"])
        nodes.append({"name": name, "cert": cert, "key": key, "lease": leases[name]})
    path = os.path.join(workdir, "nodes.json")
    with open(path, "w") as f:
        json.dump(nodes, f)
    return path


def ready_status(node):
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status")
    return None


def heartbeat_cases(workdir, args, report):
    """One orchd, --nodes simulated nodes, one measured window of --heartbeat-secs."""
    print(f"heartbeats: setting up {args.nodes} nodes ...", file=sys.stderr)
    orchd = Orchd(workdir, "--no-orchlet")
    try:
        nodes_file = setup(orchd, workdir, args.nodes)
        pid = orchd.process.pid
        print(f"heartbeats: {args.nodes} nodes renewing every {args.renew_interval:g}s, "
              f"one interval of warm-up, then {args.heartbeat_secs:g}s measured",
              file=sys.stderr)
        argv = [sys.executable, os.path.join(HERE, "heartbeat_load.py"), "--url", orchd.url,
                "--ca", orchd.ca, "--nodes-file", nodes_file,
                "--interval", str(args.renew_interval), "--secs", str(args.heartbeat_secs)]
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        load = subprocess.Popen(pinned(1, argv), stdout=subprocess.PIPE, text=True, env=env)
        if load.stdout.readline().strip() != "measuring":
            load.kill()
            raise SystemExit("heartbeat_load.py failed before measuring")
        # orchd's CPU over the window, and over each interval of it (the busiest).
        samples = [(time.monotonic(), cpu_seconds(pid))]
        while load.poll() is None and time.monotonic() - samples[0][0] < args.heartbeat_secs:
            time.sleep(min(args.renew_interval,
                           max(0.0, samples[0][0] + args.heartbeat_secs - time.monotonic())))
            samples.append((time.monotonic(), cpu_seconds(pid)))
        out, _ = load.communicate()
        if load.returncode != 0:
            raise SystemExit(f"heartbeat_load.py failed ({load.returncode})")
        run = json.loads(out.strip().splitlines()[-1])
        # Right after the last renewals (well within the grace period).
        _, data = orchd.request("GET", "/api/v1/nodes")
        not_ready = [node["metadata"]["name"] for node in json.loads(data)["items"]
                     if ready_status(node) != "True"]
        # orchd idle with the same nodes: the share that is not the renewals'.
        idle_before = cpu_seconds(pid)
        time.sleep(5)
        idle = (cpu_seconds(pid) - idle_before) / 5
    finally:
        orchd.stop()
    (t0, c0), (t1, c1) = samples[0], samples[-1]
    shares = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(samples, samples[1:])]
    run.update(
        orchd_cpu=round((c1 - c0) / (t1 - t0), 3), orchd_cpu_max=round(max(shares), 3),
        orchd_cpu_idle=round(idle, 3), not_ready=len(not_ready),
        not_ready_names=not_ready[:10],
        cpu_us_per_renewal=round((c1 - c0) / max(run["renewed"], 1) * 1e6))
    report["heartbeats"] = run


def print_heartbeats(report):
    if "heartbeats" not in report:
        return
    h = report["heartbeats"]
    print(f"heartbeats: {h['nodes']} nodes every {h['interval']:g}s for {h['secs']:.0f}s: "
          f"orchd CPU {h['orchd_cpu']:.1%} of a core (busiest {h['interval']:g}s "
          f"{h['orchd_cpu_max']:.1%}, idle {h['orchd_cpu_idle']:.1%}; "
          f"{h['cpu_us_per_renewal']} us a renewal); renewal p50 {ms_text(h['p50_ms'])} ms, "
          f"p99 {ms_text(h['p99_ms'])} ms, max {ms_text(h['max_ms'])} ms; renewed {h['renewed']} of "
          f"{h['expected']} (skipped {h['skipped']}), errors {h['errors']}"
          + (f" {h['failures']}" if h["failures"] else "")
          + f"; not Ready at the end {h['not_ready']}; load CPU {h['load_cpu']:.2f} cores")


# -- the simulated cluster ------------------------------------------------------------------

#: The sim process's summary of its nodes' Lease renewals (orchd.orchlet.simnodes).
SUMMARY = re.compile(r"^(\S+) \[orchd\.orchlet\.simnodes\.SimulatedNodes#info\] Simulated nodes: "
                     r"(\d+) Lease renewals in the last \d+ s, latency p50 ([\d.]+) ms, "
                     r"p99 ([\d.]+) ms, max ([\d.]+) ms")
#: Seconds each summary covers (orchd.orchlet.simnodes.REPORT_INTERVAL).
SUMMARY_SECS = 30
MARKED_UNKNOWN = "stopped posting status; marked Unknown"
#: A request-log line's status field (server/requestlog.py) when the in-flight limit refused it.
TOO_MANY = " 429 "


def count_ready(orchd, prefix):
    """(Nodes named prefix*, how many of them are Ready, how many have a Lease)."""
    _, data = orchd.request("GET", "/api/v1/nodes")
    nodes = [n for n in json.loads(data)["items"] if n["metadata"]["name"].startswith(prefix)]
    _, data = orchd.request("GET", LEASES)
    leases = [x for x in json.loads(data)["items"] if x["metadata"]["name"].startswith(prefix)]
    return len(nodes), sum(1 for n in nodes if ready_status(n) == "True"), len(leases)


#: One bucket of the API server's request latency histogram for Lease updates.
LEASE_PUT_BUCKET = re.compile(
    r'apiserver_request_duration_seconds_bucket\{(?=[^}]*verb="PUT")(?=[^}]*resource="leases")'
    r'[^}]*le="([^"]+)"\} (\S+)')


def lease_put_buckets(orchd):
    """The API server's cumulative latency buckets of Lease PUTs: {upper bound: count}."""
    _, data = orchd.request("GET", "/metrics")
    buckets = {}
    for match in LEASE_PUT_BUCKET.finditer(data.decode()):
        bound = float(match.group(1))
        buckets[bound] = buckets.get(bound, 0) + float(match.group(2))
    return buckets


def bucket_quantile(before, after, q):
    """The upper bound of the bucket holding quantile q of what was counted between two scrapes."""
    counts = sorted((bound, after[bound] - before.get(bound, 0)) for bound in after)
    if not counts or counts[-1][1] <= 0:
        return None
    wanted = q * counts[-1][1]
    return next(bound for bound, count in counts if count >= wanted) * 1000


def summaries(path, since, until):
    """The sim process's renewal summaries logged within [since, until] (epoch seconds)."""
    found = []
    with open(path, errors="replace") as f:
        for line in f:
            match = SUMMARY.match(line)
            if not match:
                continue
            stamp = datetime.datetime.fromisoformat(match.group(1)).timestamp()
            if since <= stamp <= until:
                found.append((int(match.group(2)), float(match.group(3)),
                              float(match.group(4)), float(match.group(5))))
    return found


def next_summary(path, timeout=40.0):
    """Wait for the sim process to log its next renewal summary (at most C{timeout} seconds)."""
    deadline = time.monotonic() + timeout
    with open(path, errors="replace") as f:
        f.seek(0, os.SEEK_END)
        line = ""
        while time.monotonic() < deadline:
            line += f.readline()
            if not line.endswith("\n"):
                time.sleep(0.2)
                continue
            if SUMMARY.match(line):
                return
            line = ""


def cluster_cases(workdir, args, report):
    """
    The simulated cluster the documented way: an API server (core 0) and a
    second process (core 1) running --cluster-nodes simulated nodes with
    --orchlet-only --simulated-nodes, identities asked for with the admin's
    orchconfig. Once every node is Ready with its Lease, one interval of
    warm-up, then --cluster-secs measured: the API server's CPU, the nodes'
    own renewal latencies (their 30 s summaries), nodes marked Unknown.
    """
    nodes = args.cluster_nodes
    print(f"cluster: starting the API server and {nodes} simulated nodes ...", file=sys.stderr)
    orchd = Orchd(workdir, "--no-orchlet")
    sim = None
    try:
        sim = SimulatedNodes(orchd, workdir, nodes)
        began = time.monotonic()
        deadline = began + 120 + nodes * 0.2
        while True:
            count, ready, leases = count_ready(orchd, "bench-sim-")
            if count == ready == leases == nodes:
                break
            if not sim.running() or time.monotonic() > deadline:
                raise SystemExit(f"cluster: {ready} of {nodes} nodes Ready, {leases} Leases "
                                 f"after {time.monotonic() - began:.0f}s; see {sim.log_path}")
            time.sleep(1)
        start_up = time.monotonic() - began
        print(f"cluster: {nodes} nodes Ready in {start_up:.0f}s; one interval of warm-up, "
              f"then {args.cluster_secs:g}s measured", file=sys.stderr)
        time.sleep(10)
        # A window of several summaries starts as the nodes log one: each
        # covers the 30 s before it, so those counted are of the window alone.
        aligned = args.cluster_secs >= 2 * SUMMARY_SECS
        if aligned:
            next_summary(sim.log_path)
        pid = orchd.process.pid
        t0, c0, s0, w0 = time.monotonic(), cpu_seconds(pid), cpu_seconds(sim.pid), time.time()
        served0 = lease_put_buckets(orchd)
        time.sleep(args.cluster_secs)
        t1, c1, s1 = time.monotonic(), cpu_seconds(pid), cpu_seconds(sim.pid)
        served1 = lease_put_buckets(orchd)
        rss = rss_mb(pid), rss_mb(sim.pid)
        # It logs a last summary as it stops: of the workload alone, so the
        # nodes are counted (two lists of every Node and Lease) after it.
        sim.stop()
        w1 = time.time()
        # Well within the grace period: a node Ready at the stop still is.
        count, ready, leases = count_ready(orchd, "bench-sim-")
    finally:
        if sim is not None:
            sim.stop(timeout=0)
        orchd.stop()
    found = summaries(sim.log_path, w0 + 1 if aligned else w0, w1 + 1)
    renewed = sum(n for n, *_ in found)
    unknown = refused = 0
    with open(os.path.join(workdir, "orchd.log"), errors="replace") as f:
        for line in f:
            if MARKED_UNKNOWN in line:
                unknown += 1
            elif TOO_MANY in line:
                refused += 1
    report["cluster"] = {
        "nodes": nodes, "secs": round(t1 - t0, 1), "start_up_secs": round(start_up, 1),
        "apiserver_cpu": round((c1 - c0) / (t1 - t0), 3),
        "simulated_cpu": round((s1 - s0) / (t1 - t0), 3),
        "cpu_us_per_renewal": round((c1 - c0) / max(renewed, 1) * 1e6),
        # Summaries cover 30 s each, the window's own (the last one, logged
        # as the nodes stop, the rest of it): the median of their p50s, the worst p99.
        "renewed": renewed, "expected": round(nodes * (w1 - w0) / 10),
        "p50_ms": statistics.median(p50 for _, p50, _, _ in found) if found else None,
        "p99_ms": max(p99 for _, _, p99, _ in found) if found else None,
        "max_ms": max(most for *_, most in found) if found else None,
        "p99s_ms": [p99 for _, _, p99, _ in found],
        # As the API server saw them (its histogram's bucket bounds, so "at most").
        "served_p50_ms": bucket_quantile(served0, served1, 0.5),
        "served_p99_ms": bucket_quantile(served0, served1, 0.99),
        "not_ready": count - ready, "marked_unknown": unknown, "refused_429": refused,
        "apiserver_rss_mb": rss[0], "simulated_rss_mb": rss[1],
    }


def print_cluster(report):
    if "cluster" not in report:
        return
    c = report["cluster"]
    print(f"cluster: {c['nodes']} simulated nodes (second process), ready in "
          f"{c['start_up_secs']:.0f}s, measured {c['secs']:.0f}s: API server CPU "
          f"{c['apiserver_cpu']:.1%} of a core ({c['cpu_us_per_renewal']} us a renewal), "
          f"simulated nodes {c['simulated_cpu']:.1%}; renewal p50 {ms_text(c['p50_ms'])} ms, "
          f"p99 {ms_text(c['p99_ms'])} ms, max {ms_text(c['max_ms'])} ms; renewed {c['renewed']} of "
          f"~{c['expected']}; not Ready at the end {c['not_ready']}, marked Unknown "
          f"{c['marked_unknown']}; RSS API server {c['apiserver_rss_mb']:.0f} MB, "
          f"simulated nodes {c['simulated_rss_mb']:.0f} MB; requests answered 429 over the "
          f"whole run {c['refused_429']}; p99 of each 30 s summary "
          f"{', '.join(ms_text(p) for p in c['p99s_ms'])} ms; as the API server served them "
          f"(its histogram's buckets): p50 <= {ms_text(c['served_p50_ms'])} ms, "
          f"p99 <= {ms_text(c['served_p99_ms'])} ms")
