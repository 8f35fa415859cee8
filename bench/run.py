#!/usr/bin/env python3
"""
orchd against the floor, measured in one run on one machine.

Starts orchd (a real ``twistd orchd`` with its LevelDB store and TLS) and the
floor server (a bare twisted.web resource over TLS, floor_server.py) on free
ports, pins each server to core 0 and the load generator (hload.js, Node.js)
to core 1, alternates them over several rounds, and prints the medians:

- GET of one object and durable create, at 16 and 64 keep-alive TLS
  connections: requests/s, p50 and p99 latency, and the ratio to the floor
  (GET reading one LevelDB value, POST of the same body with no storage);
- LIST of --objects config maps (seconds per full list).

Two cases have no floor. They run after those rounds on a second, fresh orchd
(the first stopped), each for --rounds rounds:

- watch: --watchers watches on the config maps of one namespace while
  --rate creates/s of ~2 KB config maps (--watch-object-bytes: another size)
  run for --watch-secs (watchload.js): delay from each 201 to each watcher's
  ADDED event (p50, p99), events missed, watchers failed, orchd's RSS during
  the run and with the watches open and idle (per watcher), and orchd's CPU
  per event delivered;
- pages: LIST of --page-objects config maps in --page-limit pages with
  continue tokens, --page-passes full passes a round on one keep-alive
  connection: per-page latency (p50, p99, max) and seconds per pass.

Five more compare orchd with itself: JSON against protobuf (encoding_cases
below), the default Node,RBAC against AlwaysAllow with --roles
ClusterRoles and --bindings bindings stored (authz.py), and Secret create
and GET with secrets encrypted at rest by aesgcm against no encryption
(encryption.py), custom resource create and GET against the same
calls on ConfigMaps (customresources.py), and config map create and GET
with a Metadata-level audit log written to a file against auditing off
(audit.py).

metrics (metrics.py): a scrape of /metrics with --objects config maps and
--watchers open watches (target under 100 ms), then create@16 and GET@16 on
a server counting metrics and the same build with --enable-metrics=false,
alternated over the rounds (target: ratio >= 0.9).

heartbeats (heartbeats.py, heartbeat_load.py): one orchd with --no-orchlet and
--nodes simulated nodes, each renewing its Lease every --renew-interval
seconds with its own client certificate over its own connection, measured for
--heartbeat-secs: orchd's CPU as a fraction of one core, renewal latency (p50,
p99), errors, and Nodes no longer Ready at the end.

cluster (heartbeats.py): the real simulated cluster brought up as README.rst
documents it: an API server with --no-orchlet on core 0 and a second process
(--orchlet-only --simulated-nodes --cluster-nodes, 5,000, with the admin's
orchconfig) on core 1. Once every node is Ready with its Lease, one interval
of warm-up, then --cluster-secs (600) measured: the API server's CPU as a
fraction of one core (target under 50%), the Lease renewal latency the nodes
saw (p50, p99 of their 30 s summaries; target p99 under 100 ms), renewals
done, nodes not Ready at the end and nodes the API server marked Unknown
(target 0), and both processes' RSS.

etcd (etcd.py, etcdload.js): a single-member etcd on loopback and two orchd
servers, one with --storage-backend=etcd on it and one on LevelDB: etcd's raw
put rate through its JSON gateway at 16 connections, then create@16 and
GET@16 on each orchd; requests/s and the ratio of creates through orchd on
etcd to raw etcd puts (target >= 0.6). Skipped, with a message, without an
etcd binary.

scheduling and deployment (workloads.py): one orchd and --sim-nodes
simulated nodes in a second process (as the cluster case): durable pod creates/s, then --pods pending pods bound by the
scheduler, as pods bound/s and its ratio to the creates (target >= 0.5); a
Deployment of --replicas replicas from create to Available, in seconds, with
orchd's CPU share of one core; a DaemonSet rolled out on every node and then
updated, in seconds; --jobs Jobs of one pod completing, as Jobs/s and its
ratio to the creates.

webhooks (webhooks.py, webhook_server.js): durable ConfigMap creates at 16
connections on one orchd with and without one ValidatingWebhookConfiguration
whose webhook, a minimal allowing HTTPS server in its own process on
loopback, matches them: requests/s and the ratio (target >= 0.5).

testing (testing_start.py): how fast orchd.testing gives a test a control
plane: the pytest session fixture's start in --start-runs fresh processes
(from ``import orchd.testing`` to the first served request; target under
1 s), --namespaces per-test namespaces (target under 20 ms each), and, for
comparison, ``twistd orchd`` from its spawn to its first /readyz 200.

bigstore (bigstore.py): --big-pods running pods bound to --big-nodes Nodes;
orchd restarted on that store (start-up seconds, RSS, memory per stored
object against its encoded size), then paged and resourceVersion=0 LISTs of
every pod in JSON and protobuf (seconds, page p50/p99, bytes).

--cases picks the cases (all by default).

--smoke runs every case once at a tiny size, in a minute or two: the figures
mean nothing, but a case that no longer runs fails it (tests/integration/
test_bench.py runs it in CI).

Usage: python bench/run.py [--smoke] [--rounds 3] [--secs 8] [--objects 10000] [--json FILE]
           [--cases get,create,list,watch,pages,encoding,authz,encryption,customresources,
                    metrics,audit,heartbeats,cluster,etcd,scheduling,deployment,daemonset,jobs,
                    webhooks,testing,bigstore]
           [--watchers 1000]
           [--rate 100] [--watch-secs 20] [--page-objects 50000] [--page-limit 500]
           [--page-passes 3] [--roles 1000] [--bindings 5000] [--nodes 1000]
           [--heartbeat-secs 300] [--renew-interval 10] [--sim-nodes 100] [--pods 1000]
           [--replicas 1000] [--jobs 1000] [--start-runs 10] [--namespaces 100]
           [--big-pods 150000] [--big-nodes 5000] [--big-namespaces 50] [--big-dir DIR]
Needs: the orchd package importable (pip install .), node (but for heartbeats
alone), taskset (optional), etcd (Debian's etcd-server, for the etcd case).
"""

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

from audit import audit_cases, print_audit
from bigstore import bigstore_cases, print_bigstore
from authz import authz_cases, print_authz
from customresources import customresource_cases, print_customresources
from encryption import encryption_cases, print_encryption
from etcd import etcd_cases, print_etcd
from heartbeats import cluster_cases, heartbeat_cases, print_cluster, print_heartbeats
from metrics import metrics_cases, print_metrics
from testing_start import print_testing, testing_case
from webhooks import print_webhooks, webhook_cases
from workloads import print_workloads, workload_cases
from common import (
    HERE, PROTOBUF, ROOT, Floor, Orchd, cpu_seconds, fill, hload, make_body, pinned,
    ms_text, raise_file_limit, rss_mb, summarize,
)

CASES = ("get", "create", "list", "watch", "pages", "encoding", "authz", "encryption",
         "customresources", "metrics", "audit", "heartbeats", "cluster", "etcd", "scheduling",
         "deployment", "daemonset", "jobs", "webhooks", "testing", "bigstore")


#: The sizes of --smoke (options given on the command line still win).
SMOKE = dict(rounds=1, secs=1, objects=50, watchers=5, rate=20, watch_secs=2,
             page_objects=100, page_limit=20, page_passes=1, roles=10, bindings=20,
             nodes=5, heartbeat_secs=2, renew_interval=1, cluster_nodes=3, cluster_secs=2,
             sim_nodes=3, pods=20, replicas=5, jobs=5, start_runs=1, namespaces=5,
             big_pods=60, big_nodes=4, big_namespaces=3)


#: Seconds the watches stay open and idle before the writes, for the RSS
#: (and so the memory per idle watcher) to be read.
WATCH_IDLE_SECS = 2.0


def watch_round(orchd, args, body_path=None):
    """
    One run of watchload.js against orchd, with orchd's RSS sampled every
    0.25 s meanwhile: its JSON result plus rss_start_mb, rss_idle_mb (every
    watch open, before the writes), idle_watcher_kb (the difference per
    watcher), rss_peak_mb (the largest sample), rss_end_mb (once the load
    has closed its watches), and orchd's CPU over the writes and the drain
    (server_cpu_s, server_cores, server_us_per_event: per event received).
    """
    argv = ["node", os.path.join(HERE, "watchload.js"), "--url", orchd.url,
            "--namespace", "bench-watch", "--watchers", str(args.watchers),
            "--rate", str(args.rate), "--secs", str(args.watch_secs),
            "--idle", str(WATCH_IDLE_SECS), "--cert", orchd.cert, "--key", orchd.key,
            # The writes wait for every watch to be open: 10,000 TLS
            # handshakes take a minute or more on a busy machine.
            "--open-timeout", str(max(60, args.watchers // 25))]
    if body_path:
        argv += ["--body", body_path]
    pid = orchd.process.pid  # twistd -n runs in this process (taskset execs it)
    start = rss_mb(pid)
    samples = [start]
    marks = {}      # phase -> (time, orchd's CPU seconds, RSS)
    errors = []

    def phases(stream):
        for line in stream:
            phase = line.strip()
            if phase in ("open", "writing", "drained"):
                marks[phase] = (time.monotonic(), cpu_seconds(pid), rss_mb(pid))
            else:
                errors.append(line)

    load = subprocess.Popen(pinned(1, argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    reader = threading.Thread(target=phases, args=(load.stderr,), daemon=True)
    reader.start()
    while load.poll() is None:
        samples.append(rss_mb(pid))
        time.sleep(0.25)
    out = load.stdout.read()
    reader.join()
    if load.returncode != 0:
        raise SystemExit(f"watchload.js failed ({load.returncode}): {''.join(errors).strip()}")
    run = json.loads(out.strip().splitlines()[-1])
    run.update(rss_start_mb=start, rss_peak_mb=max(filter(None, samples)), rss_end_mb=rss_mb(pid))
    if "writing" in marks:
        idle = marks["writing"][2]
        run.update(rss_idle_mb=idle,
                   idle_watcher_kb=round((idle - start) * 1024 / max(1, args.watchers), 1))
    if "writing" in marks and "drained" in marks:
        (t0, cpu0, _), (t1, cpu1, _) = marks["writing"], marks["drained"]
        run.update(server_cpu_s=round(cpu1 - cpu0, 2),
                   server_cores=round((cpu1 - cpu0) / max(t1 - t0, 1e-6), 2),
                   server_us_per_event=round((cpu1 - cpu0) * 1e6 / max(1, run["events_received"]),
                                             1))
    return run


def watch_body(workdir, size):
    """
    The path of a config map of about C{size} bytes as JSON (one data value
    filling what the rest leaves), or None for watchload.js's own ~2 KB.
    """
    if size is None:
        return None
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "data": {"v": ""}}
    obj["data"]["v"] = "v" * max(0, size - len(json.dumps(obj, separators=(",", ":"))))
    path = os.path.join(workdir, f"watch-body-{size}.json")
    with open(path, "w") as f:
        json.dump(obj, f, separators=(",", ":"))
    return path


def summarize_watch(runs):
    """Delays as medians over rounds; counts summed; RSS and load CPU at their worst."""
    failures = {}
    for r in runs:
        for reason, n in r["failures"].items():
            failures[reason] = failures.get(reason, 0) + n

    def median(key):
        values = [r[key] for r in runs if r.get(key) is not None]
        return round(statistics.median(values), 3) if values else None

    return {
        "delay_p50_ms": median("delay_p50_ms"),
        "delay_p99_ms": median("delay_p99_ms"),
        "delay_max_ms": max((r["delay_max_ms"] for r in runs if r["delay_max_ms"] is not None),
                            default=None),
        "write_p50_ms": median("write_p50_ms"),
        "write_p99_ms": median("write_p99_ms"),
        "writes_acked": sum(r["writes_acked"] for r in runs),
        # Creates/s achieved: below --rate when the 201s came too slowly for
        # the writer's bound on creates in flight (writes_late counts those).
        "write_rate": round(statistics.median(r["writes_acked"] / r["secs"] for r in runs), 1),
        "writes_late": sum(r["writes_late"] for r in runs),
        "write_errors": sum(r["write_errors"] + sum(n for code, n in r["write_codes"].items()
                                                    if code != "201") for r in runs),
        "events_expected": sum(r["events_expected"] for r in runs),
        "events_received": sum(r["events_received"] for r in runs),
        "missed": sum(r["missed"] for r in runs),
        "watchers_failed": sum(r["watchers_failed"] for r in runs),
        "failures": failures,
        "open_seconds": median("open_seconds"),
        "rss_start_mb": round(runs[0]["rss_start_mb"] or 0, 1),
        "rss_peak_mb": round(max(r["rss_peak_mb"] for r in runs), 1),
        "rss_end_mb": round(runs[-1]["rss_end_mb"] or 0, 1),
        "load_cpu": max(r["load_cpu"] for r in runs),
        "rss_idle_mb": round(max(r.get("rss_idle_mb") or 0 for r in runs), 1),
        "idle_watcher_kb": median("idle_watcher_kb"),
        "server_cores": median("server_cores"),
        "server_us_per_event": median("server_us_per_event"),
    }


def page_pass(orchd, conn, namespace, limit):
    """
    LIST ``namespace`` to the end in pages of ``limit``, following continue
    tokens: (seconds of each page, items seen, seconds in all). A page's time
    runs from sending the request to the last byte of the answer; parsing it
    for the next token is not counted.
    """
    path = f"/api/v1/namespaces/{namespace}/configmaps?limit={limit}"
    token, times, items = None, [], 0
    began = time.perf_counter()
    while True:
        url = path + (f"&continue={urllib.parse.quote(token, safe='')}" if token else "")
        start = time.perf_counter()
        status, data = orchd.request("GET", url, connection=conn)
        times.append(time.perf_counter() - start)
        if status != 200:
            raise SystemExit(f"LIST page failed: {status} {data[:200]!r}")
        page = json.loads(data)
        # Only fill()'s maps: the namespace also holds the root CA config map.
        items += sum(item["metadata"]["name"].startswith("cm-") for item in page["items"])
        token = page["metadata"].get("continue")
        if not token:
            return times, items, time.perf_counter() - began


def pages_round(orchd, args):
    """--page-passes full paged LISTs on one connection, this thread pinned to core 1."""
    affinity = os.sched_getaffinity(0)
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})  # the calling thread: only it runs now
    conn = http.client.HTTPSConnection("127.0.0.1", orchd.port, context=orchd.context,
                                       timeout=60)
    try:
        passes = [page_pass(orchd, conn, "bench-pages", args.page_limit)
                  for _ in range(args.page_passes)]
    finally:
        conn.close()
        os.sched_setaffinity(0, affinity)
    for _, items, _ in passes:
        if items != args.page_objects:
            raise SystemExit(f"paged LIST saw {items} objects, not {args.page_objects}")
    return passes


def summarize_pages(passes):
    """
    Page latencies over every page of every pass; pass times as median and
    max; the first and the last page of a pass (medians), which differ when a
    page's cost grows with the objects before or after it.
    """
    pages = sorted(t * 1000 for times, _, _ in passes for t in times)
    seconds = [total for _, _, total in passes]
    return {
        "passes": len(passes),
        "pages_per_pass": len(passes[0][0]),
        "page_p50_ms": round(statistics.median(pages), 3),
        "page_p99_ms": round(pages[min(len(pages) - 1, int(0.99 * len(pages)))], 3),
        "page_max_ms": round(pages[-1], 3),
        "page_first_ms": round(statistics.median(times[0] * 1000 for times, _, _ in passes), 3),
        "page_last_ms": round(statistics.median(times[-1] * 1000 for times, _, _ in passes), 3),
        "pass_seconds": round(statistics.median(seconds), 3),
        "pass_seconds_max": round(max(seconds), 3),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--secs", type=float, default=8)
    parser.add_argument("--objects", type=int, default=10000)
    parser.add_argument("--cases", default=",".join(CASES),
                        help="comma list of: " + ", ".join(CASES))
    parser.add_argument("--watchers", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=100, help="creates/s in the watch case")
    parser.add_argument("--watch-secs", type=float, default=20)
    parser.add_argument("--watch-object-bytes", type=int, default=None,
                        help="size of the watch case's config maps (default: the ~2 KB body)")
    parser.add_argument("--page-objects", type=int, default=50000)
    parser.add_argument("--page-limit", type=int, default=500)
    parser.add_argument("--page-passes", type=int, default=3, help="full passes a round")
    parser.add_argument("--roles", type=int, default=1000, help="ClusterRoles in the authz case")
    parser.add_argument("--bindings", type=int, default=5000, help="bindings in the authz case")
    parser.add_argument("--nodes", type=int, default=1000,
                        help="simulated nodes in the heartbeats case")
    parser.add_argument("--heartbeat-secs", type=float, default=300,
                        help="measured window of the heartbeats case")
    parser.add_argument("--renew-interval", type=float, default=10,
                        help="seconds between a node's Lease renewals")
    parser.add_argument("--cluster-nodes", type=int, default=5000,
                        help="simulated nodes of the cluster case (a second process)")
    parser.add_argument("--cluster-secs", type=float, default=600,
                        help="measured window of the cluster case")
    parser.add_argument("--sim-nodes", type=int, default=100,
                        help="simulated nodes in the scheduling and deployment cases")
    parser.add_argument("--pods", type=int, default=1000,
                        help="pending pods to bind in the scheduling case")
    parser.add_argument("--replicas", type=int, default=1000,
                        help="replicas of the Deployment in the deployment case")
    parser.add_argument("--jobs", type=int, default=1000,
                        help="Jobs of one pod each in the jobs case")
    parser.add_argument("--start-runs", type=int, default=10,
                        help="fresh processes per start figure in the testing case")
    parser.add_argument("--namespaces", type=int, default=100,
                        help="create_namespace() calls timed in the testing case")
    parser.add_argument("--big-pods", type=int, default=150000,
                        help="running pods in the bigstore case")
    parser.add_argument("--big-nodes", type=int, default=5000,
                        help="Nodes the bigstore case's pods are bound to")
    parser.add_argument("--big-namespaces", type=int, default=50,
                        help="namespaces the bigstore case's pods are spread over")
    parser.add_argument("--big-dir", help="the bigstore case's work directory, kept: a "
                        "store filled there by an earlier run of the same sizes is reused")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--smoke", action="store_true",
                        help="every size tiny and one short round: checks that the cases "
                             "run (CI does), the figures mean nothing")
    if "--smoke" in sys.argv[1:]:
        parser.set_defaults(**SMOKE)
    args = parser.parse_args()
    selected = [c for c in args.cases.split(",") if c]
    unknown = set(selected) - set(CASES)
    if unknown or not selected:
        parser.error(f"--cases: choose from {', '.join(CASES)}")
    if set(selected) - {"heartbeats", "cluster", "testing"} and not shutil.which("node"):
        raise SystemExit("node (Node.js) is needed for the load generator")
    if "watch" in selected or "metrics" in selected:
        # One descriptor per watch in orchd and in the load generator.
        raise_file_limit(args.watchers + 1024)
    if "heartbeats" in selected:
        # One connection per node in orchd and in the load generator.
        raise_file_limit(args.nodes + 1024)
    if "cluster" in selected:
        # Per node: a listener, its API connection, the API server's scrape connection.
        raise_file_limit(3 * args.cluster_nodes + 1024)

    workdir = tempfile.mkdtemp(prefix="orchd-bench-")
    template, body_path = make_body(workdir)
    report = {"rounds": args.rounds, "secs": args.secs, "objects": args.objects,
              "cases": selected}
    if {"get", "create", "list"} & set(selected):
        floor_cases(workdir, args, selected, template, body_path, report)
    if {"watch", "pages"} & set(selected):
        # A fresh orchd, after the first has stopped: these figures (orchd's
        # RSS above all) then do not depend on the objects and the memory the
        # cases above left behind, nor on which of them ran.
        fresh = os.path.join(workdir, "fresh")
        os.mkdir(fresh)
        own_cases(fresh, args, selected, template, report)
    # The cases that start servers of their own, each in a folder of its own:
    # (cases that select it, run(folder)).
    own_servers = (
        (("encoding",), lambda d: encoding_cases(d, args, template, report)),
        (("authz",), lambda d: authz_cases(d, args, template, report)),
        (("encryption",), lambda d: encryption_cases(d, args, report)),
        (("customresources",), lambda d: customresource_cases(d, args, template, report)),
        (("metrics",), lambda d: metrics_cases(d, args, template, body_path, report)),
        (("audit",), lambda d: audit_cases(d, args, template, body_path, report)),
        (("heartbeats",), lambda d: heartbeat_cases(d, args, report)),
        (("cluster",), lambda d: cluster_cases(d, args, report)),
        (("etcd",), lambda d: etcd_cases(d, args, template, body_path, report)),
        (("webhooks",), lambda d: webhook_cases(d, args, body_path, report)),
        (("bigstore",), lambda d: bigstore_cases(d, args, report)),
        (("scheduling", "deployment", "daemonset", "jobs"),
         lambda d: workload_cases(d, args, report, selected)),
    )
    for names, run in own_servers:
        if set(names) & set(selected):
            folder = os.path.join(workdir, names[0] if len(names) == 1 else "workloads")
            os.mkdir(folder)
            run(folder)
    if "testing" in selected:
        report["testing"] = testing_case(args.start_runs, args.namespaces)
    print_report(report)
    print_authz(report)
    print_encryption(report)
    print_customresources(report)
    print_metrics(report)
    print_audit(report)
    print_heartbeats(report)
    print_cluster(report)
    print_etcd(report)
    print_workloads(report)
    print_webhooks(report)
    print_testing(report)
    print_bigstore(report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    shutil.rmtree(workdir, ignore_errors=True)


def floor_cases(workdir, args, selected, template, body_path, report):
    """get, create (each against the floor) and list, alternated over the rounds."""
    orchd = Orchd(workdir)
    floor = None
    try:
        cases = {
            "get": ("/api/v1/namespaces/default/configmaps/bench-get", "/kv/k", "GET"),
            "create": ("/api/v1/namespaces/bench-post/configmaps", "/obj", "POST"),
        }
        cases = {name: case for name, case in cases.items() if name in selected}
        if cases:
            floor = Floor(workdir, orchd, json.dumps(template).encode())
            orchd.request("POST", "/api/v1/namespaces/default/configmaps",
                          dict(template, metadata={"name": "bench-get"}))
            orchd.request("POST", "/api/v1/namespaces", {"metadata": {"name": "bench-post"}})
        if "list" in selected:
            print(f"setup: creating {args.objects} objects to list ...", file=sys.stderr)
            fill(orchd, "bench-list", args.objects, template)
        results = {}
        for round_number in range(args.rounds):
            print(f"round {round_number + 1}/{args.rounds}", file=sys.stderr)
            for name, (orchd_path, floor_path, method) in cases.items():
                for conns in (16, 64):
                    post = method == "POST"
                    for who, server, url in (("orchd", orchd, orchd.url + orchd_path),
                                             ("floor", floor, floor.url + floor_path)):
                        before = cpu_seconds(server.process.pid)
                        run = hload(orchd, url, conns, args.secs, method,
                                    body_path if post else None, gen_name=post and who == "orchd")
                        # CPU time per request: on a shared, busy machine the
                        # servers' requests/s say more of the load than of them.
                        run["cpu_us"] = ((cpu_seconds(server.process.pid) - before)
                                         / max(run["requests"], 1) * 1e6)
                        results.setdefault(f"{name}-{conns}-{who}", []).append(run)
            if "list" in selected:
                run = hload(orchd, orchd.url + "/api/v1/namespaces/bench-list/configmaps", 1,
                            max(args.secs, 10))
                results.setdefault("list", []).append(run)
    finally:
        if floor:
            floor.stop()
        orchd.stop()
    for key, runs in results.items():
        report[key] = summarize(runs)
        if "cpu_us" in runs[0]:
            report[key]["cpu_us"] = round(statistics.median(r["cpu_us"] for r in runs), 1)
    for name in cases:
        for conns in (16, 64):
            mine, base = report[f"{name}-{conns}-orchd"], report[f"{name}-{conns}-floor"]
            report[f"{name}-{conns}-ratio"] = round(mine["rps"] / base["rps"], 3)
            # The floor's CPU per request over orchd's: the ratio requests/s
            # would have were both servers held back by nothing but their CPU.
            report[f"{name}-{conns}-cpu_ratio"] = (
                round(base["cpu_us"] / mine["cpu_us"], 3) if mine["cpu_us"] else None)
    if "list" in selected:
        report["list_seconds"] = round(report["list"]["p50_ms"] / 1000, 3)


def own_cases(workdir, args, selected, template, report):
    """watch, then pages (so that the watch's RSS is not that of the pages' objects)."""
    orchd = Orchd(workdir)
    try:
        if "watch" in selected:
            body_path = watch_body(workdir, args.watch_object_bytes)
            runs = []
            for round_number in range(args.rounds):
                print(f"watch {round_number + 1}/{args.rounds}: {args.watchers} watchers, "
                      f"{args.rate:g} creates/s for {args.watch_secs:g}s", file=sys.stderr)
                runs.append(watch_round(orchd, args, body_path))
            report.update(watchers=args.watchers, rate=args.rate, watch_secs=args.watch_secs,
                          watch_object_bytes=args.watch_object_bytes)
            report["watch"] = summarize_watch(runs)
        if "pages" in selected:
            print(f"setup: creating {args.page_objects} objects to page through ...",
                  file=sys.stderr)
            fill(orchd, "bench-pages", args.page_objects, template)
            passes = []
            for round_number in range(args.rounds):
                print(f"pages {round_number + 1}/{args.rounds}", file=sys.stderr)
                passes += pages_round(orchd, args)
            report.update(page_objects=args.page_objects, page_limit=args.page_limit)
            report["pages"] = summarize_pages(passes)
    finally:
        orchd.stop()


def encoding_cases(workdir, args, template, report):
    """
    JSON against protobuf on one orchd: GET and create of the same ~2 KB
    object at 16 connections, alternated over the rounds; requests/s and
    orchd's CPU time per request.
    """
    sys.path.insert(0, ROOT)
    from orchd.api.proto.envelope import codec

    orchd = Orchd(workdir)
    try:
        orchd.request("POST", "/api/v1/namespaces/default/configmaps",
                      dict(template, metadata={"name": "bench-enc"}))
        orchd.request("POST", "/api/v1/namespaces", {"metadata": {"name": "bench-enc"}})
        created = dict(template, metadata={"generateName": "enc-"})
        bodies = {"json": os.path.join(workdir, "enc.json"),
                  "protobuf": os.path.join(workdir, "enc.pb")}
        with open(bodies["json"], "w") as f:
            json.dump(created, f)
        with open(bodies["protobuf"], "wb") as f:
            f.write(codec().encode(created))
        get = orchd.url + "/api/v1/namespaces/default/configmaps/bench-enc"
        post = orchd.url + "/api/v1/namespaces/bench-enc/configmaps"
        pid = orchd.process.pid
        results = {}
        for round_number in range(args.rounds):
            print(f"encoding {round_number + 1}/{args.rounds}", file=sys.stderr)
            encodings = (("json", "application/json"), ("protobuf", PROTOBUF))
            if round_number % 2:
                # The store grows with every create run: alternate who goes first.
                encodings = encodings[::-1]
            for name, url, method in (("get", get, "GET"), ("create", post, "POST")):
                for encoding, media in encodings:
                    before = cpu_seconds(pid)
                    run = hload(orchd, url, 16, args.secs, method,
                                bodies[encoding] if method == "POST" else None, media=media)
                    spent = cpu_seconds(pid) - before
                    run["cpu_us"] = spent / max(run["requests"], 1) * 1e6
                    results.setdefault(f"{name}-{encoding}", []).append(run)
    finally:
        orchd.stop()
    report["encoding"] = {
        key: dict(summarize(runs), cpu_us=statistics.median(r["cpu_us"] for r in runs))
        for key, runs in results.items()}


def print_report(report):
    compared = [name for name in ("get", "create") if name in report["cases"]]
    if compared or "list" in report["cases"]:
        print(f"orchd vs floor, medians of {report['rounds']} rounds of {report['secs']:g}s")
    if compared:
        print(f"{'case':<14}{'orchd req/s':>12}{'p50 ms':>9}{'p99 ms':>9}"
              f"{'floor req/s':>13}{'ratio':>8}{'errors':>8}"
              f"{'orchd CPU us':>14}{'floor CPU us':>14}{'CPU ratio':>11}")
    for name in compared:
        for conns in (16, 64):
            mine = report[f"{name}-{conns}-orchd"]
            base = report[f"{name}-{conns}-floor"]
            cpu_ratio = report[f"{name}-{conns}-cpu_ratio"]
            print(f"{name + '@' + str(conns):<14}{mine['rps']:>12.0f}{mine['p50_ms']:>9.2f}"
                  f"{mine['p99_ms']:>9.2f}{base['rps']:>13.0f}"
                  f"{report[f'{name}-{conns}-ratio']:>8.2f}{mine['errors'] + mine['non_2xx']:>8}"
                  f"{mine['cpu_us']:>14.0f}{base['cpu_us']:>14.0f}"
                  + (f"{cpu_ratio:>11.2f}" if cpu_ratio is not None else f"{'-':>11}"))
    if "list" in report["cases"]:
        print(f"LIST of {report['objects']} objects: {report['list_seconds']:.3f} s (median)")
    if "watch" in report:
        w = report["watch"]
        print(f"watch: {report['watchers']} watchers, {report['rate']:g} creates/s for "
              f"{report['watch_secs']:g}s, {report['rounds']} rounds: delay 201->ADDED "
              f"p50 {ms_text(w['delay_p50_ms'])} ms, p99 {ms_text(w['delay_p99_ms'])} ms "
              f"(max {ms_text(w['delay_max_ms'])}); missed {w['missed']} of "
              f"{w['events_expected']}; watchers failed {w['watchers_failed']}"
              + (f" {w['failures']}" if w["failures"] else ""))
        print(f"       creates {w['write_rate']:g}/s, acked {w['writes_acked']} "
              f"(errors {w['write_errors']}), p50 {ms_text(w['write_p50_ms'])} ms, "
              f"p99 {ms_text(w['write_p99_ms'])} ms; "
              f"orchd RSS {w['rss_start_mb']:.0f} MB before, peak {w['rss_peak_mb']:.0f} MB, "
              f"end {w['rss_end_mb']:.0f} MB; "
              f"load CPU {w['load_cpu']:.2f} cores")
        print(f"       watches opened in {ms_text(w['open_seconds'])} s; "
              f"orchd RSS with the watches open and idle {w['rss_idle_mb']:.0f} MB "
              f"({ms_text(w['idle_watcher_kb'])} KB a watcher); orchd CPU over the writes "
              f"{w['server_cores'] or 0:.2f} cores, {ms_text(w['server_us_per_event'])} us an event "
              f"delivered"
              + (f"; objects of {report['watch_object_bytes']} bytes"
                 if report.get("watch_object_bytes") else ""))
    if "encoding" in report:
        e = report["encoding"]
        print("encoding (16 connections):" + "".join(
            f" {key} {e[key]['rps']:.0f}/s {e[key]['cpu_us']:.0f} us CPU;"
            for key in ("get-json", "get-protobuf", "create-json", "create-protobuf")
            if key in e))
    if "pages" in report:
        p = report["pages"]
        print(f"pages: LIST of {report['page_objects']} objects, limit={report['page_limit']} "
              f"({p['pages_per_pass']} pages, {p['passes']} passes): page p50 "
              f"{p['page_p50_ms']:.1f} ms, p99 {p['page_p99_ms']:.1f} ms, max "
              f"{p['page_max_ms']:.1f} ms (first {p['page_first_ms']:.1f}, last "
              f"{p['page_last_ms']:.1f}); {p['pass_seconds']:.2f} s a pass "
              f"(max {p['pass_seconds_max']:.2f})")


if __name__ == "__main__":
    main()
