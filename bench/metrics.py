"""
The cost of metrics: a scrape of /metrics on a loaded server, and GET and
create throughput with metrics on against the same build started with
--enable-metrics=false, alternated over the rounds.
"""

import http.client
import json
import os
import statistics
import sys
import time

from common import Orchd, compare_servers, compared_server, create_get_rounds, fill

SCRAPE_NAMESPACE = "bench-scrape"
NAMESPACE = "bench-metrics"
CONFIGMAPS = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
GET_PATH = CONFIGMAPS + "/bench-get"
SERVERS = ("on", "off")
SCRAPES = 20


def open_watchers(orchd, count):
    """
    C{count} watches on the scrape namespace's config maps, one connection
    each, left open: idle watchers, from the listing's resourceVersion (from
    0 each would be sent every object first, which nothing here reads).
    """
    status, data = orchd.request("GET", f"/api/v1/namespaces/{SCRAPE_NAMESPACE}/configmaps"
                                        "?limit=1")
    if status != 200:
        raise SystemExit(f"metrics: the listing answered {status}")
    version = json.loads(data)["metadata"]["resourceVersion"]
    watchers = []
    for _ in range(count):
        conn = http.client.HTTPSConnection("127.0.0.1", orchd.port, context=orchd.context,
                                           timeout=60)
        conn.request("GET", f"/api/v1/namespaces/{SCRAPE_NAMESPACE}/configmaps"
                            f"?watch=true&allowWatchBookmarks=true&resourceVersion={version}")
        response = conn.getresponse()
        if response.status != 200:
            raise SystemExit(f"metrics: a watch answered {response.status}")
        watchers.append(conn)
    return watchers


def scrape_round(orchd, scrapes=SCRAPES):
    """C{scrapes} GETs of /metrics one after another on one connection: latencies and size."""
    conn = http.client.HTTPSConnection("127.0.0.1", orchd.port, context=orchd.context,
                                       timeout=60)
    latencies, size, series = [], 0, 0
    try:
        for _ in range(scrapes):
            began = time.perf_counter()
            conn.request("GET", "/metrics")
            response = conn.getresponse()
            body = response.read()
            latencies.append((time.perf_counter() - began) * 1000)
            if response.status != 200:
                raise SystemExit(f"metrics: /metrics answered {response.status}")
            size = len(body)
            series = sum(1 for line in body.split(b"\n") if line and not line.startswith(b"#"))
    finally:
        conn.close()
    latencies.sort()
    return {"p50_ms": statistics.median(latencies),
            "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
            "max_ms": latencies[-1], "bytes": size, "samples": series}


def scrape_case(workdir, args, template, report):
    """--objects config maps and --watchers open watches, then /metrics scraped."""
    print(f"metrics: scrape with {args.objects} objects and {args.watchers} watchers",
          file=sys.stderr)
    orchd = Orchd(workdir, "--no-orchlet")
    watchers = []
    try:
        fill(orchd, SCRAPE_NAMESPACE, args.objects, template)
        watchers = open_watchers(orchd, args.watchers)
        runs = [scrape_round(orchd) for _ in range(args.rounds)]
    finally:
        for conn in watchers:
            conn.close()
        orchd.stop()
    report["metrics-scrape"] = {
        "objects": args.objects, "watchers": args.watchers,
        "p50_ms": statistics.median(r["p50_ms"] for r in runs),
        "p99_ms": statistics.median(r["p99_ms"] for r in runs),
        "max_ms": max(r["max_ms"] for r in runs),
        "bytes": runs[-1]["bytes"], "samples": runs[-1]["samples"]}


def overhead_case(workdir, args, template, body_path, report):
    """create@16 and GET@16 of config maps on a server counting and one not, alternated."""
    print("metrics: on against --enable-metrics=false, create@16 and GET@16", file=sys.stderr)
    servers = {}
    try:
        for name in SERVERS:
            place = os.path.join(workdir, name)
            os.mkdir(place)
            flags = ["--enable-metrics=false"] if name == "off" else []
            servers[name] = compared_server(place, flags, NAMESPACE, CONFIGMAPS, template,
                                            "metrics")
        results = create_get_rounds(servers, args, CONFIGMAPS, GET_PATH, body_path,
                                    "metrics")
    finally:
        for orchd in servers.values():
            orchd.stop()
    report["metrics-overhead"] = compare_servers(results, "on", "off")


def metrics_cases(workdir, args, template, body_path, report):
    scrape = os.path.join(workdir, "scrape")
    os.mkdir(scrape)
    scrape_case(scrape, args, template, report)
    overhead_case(workdir, args, template, body_path, report)


def print_metrics(report):
    scrape = report.get("metrics-scrape")
    if scrape is not None:
        print(f"metrics scrape ({scrape['objects']} objects, {scrape['watchers']} watchers, "
              f"{SCRAPES} scrapes a round, medians): p50 {scrape['p50_ms']:.1f} ms, "
              f"p99 {scrape['p99_ms']:.1f} ms, max {scrape['max_ms']:.1f} ms; "
              f"{scrape['bytes']} bytes, {scrape['samples']} samples")
    overhead = report.get("metrics-overhead")
    if overhead is None:
        return
    print(f"metrics on / --enable-metrics=false (16 connections, ~2 KB config maps, medians "
          f"of {report['rounds']} rounds):")
    for verb in ("create", "get"):
        on, off = overhead[f"{verb}-on"], overhead[f"{verb}-off"]
        errors = sum(r["errors"] + r["non_2xx"] for r in (on, off))
        rounds = overhead[f"{verb}_ratio_rounds"]
        print(f"       {verb}@16: on {on['rps']:.0f}/s (p50 {on['p50_ms']:.2f} ms, "
              f"{on['cpu_us']:.0f} us CPU), off {off['rps']:.0f}/s (p50 {off['p50_ms']:.2f} "
              f"ms, {off['cpu_us']:.0f} us CPU): ratio {overhead[f'{verb}_ratio']:.3f} "
              f"(rounds {', '.join(f'{r:.3f}' for r in rounds)})"
              + (f"; errors {errors}" if errors else ""))
