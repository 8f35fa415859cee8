"""
orchd with etcd as its store, against orchd on LevelDB and against etcd itself.

One single-member etcd (loopback, free ports, a data dir under the run's
work dir) and two orchd servers, one started with --storage-backend=etcd on
that etcd and one on its own LevelDB store, alternated over the rounds:

- put: etcd's raw put rate through its JSON gateway (POST /v3/kv/put of
  unique keys and the ~2 KB config map body as value, 16 keep-alive
  connections: etcdload.js), the rate the target is measured against
  (orchd itself calls etcd's gRPC API);
- create@16 and GET@16 on each orchd, as the core cases do (hload.js).

Reported: requests/s, p50 and p99 of each, and the ratio of creates through
orchd on etcd to etcd's raw puts (target >= 0.6), and of orchd on etcd to
orchd on LevelDB. Without an etcd binary the case is skipped with a message.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request

from common import HERE, Orchd, free_port, hload, pinned, summarize

ETCD = shutil.which("etcd")
GET_PATH = "/api/v1/namespaces/default/configmaps/bench-get"
POST_PATH = "/api/v1/namespaces/bench-post/configmaps"


def etcd_core():
    """
    etcd's core: its own (2) on three cores or more, else the load
    generators' core 1. orchd (core 0) should not pay for etcd's CPU, as it
    would not on separate machines; etcd shares with the load in both
    measurements alike (raw puts and creates through orchd).
    """
    return 2 if (os.cpu_count() or 1) >= 3 else 1


class Etcd:
    """A single-member etcd child process on loopback."""

    def __init__(self, workdir):
        self.data = os.path.join(workdir, "etcd-data")
        client, peer = free_port(), free_port()
        self.url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        self.log = open(os.path.join(workdir, "etcd.log"), "wb")
        self.process = subprocess.Popen(
            pinned(etcd_core(), [
                ETCD, "--name", "bench", "--data-dir", self.data,
                "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                "--initial-cluster", f"bench={peer_url}", "--initial-cluster-state", "new",
                "--quota-backend-bytes", str(8 << 30), "--log-level", "error",
                "--logger", "zap"]),
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.time() + 30
        while True:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as answer:
                    if b"true" in answer.read():
                        return
            except OSError:
                pass
            if self.process.poll() is not None or time.time() > deadline:
                self.stop()
                raise SystemExit(f"etcd did not start; see {workdir}/etcd.log")
            time.sleep(0.1)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)
        self.log.close()


def etcd_put(etcd, value_path, conns, secs):
    """One etcdload.js run against C{etcd}'s gateway."""
    argv = ["node", os.path.join(HERE, "etcdload.js"), "--url", etcd.url, "--value",
            value_path, "--conns", str(conns), "--secs", str(secs)]
    out = subprocess.run(pinned(1, argv), capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _prepare(orchd, template):
    status, data = orchd.request("POST", "/api/v1/namespaces/default/configmaps",
                                 dict(template, metadata={"name": "bench-get"}))
    if status != 201:
        raise SystemExit(f"setup create failed: {status} {data[:200]!r}")
    orchd.request("POST", "/api/v1/namespaces", {"metadata": {"name": "bench-post"}})


def etcd_cases(workdir, args, template, body_path, report):
    """Raw etcd puts, then create@16 and GET@16 on orchd over etcd and over LevelDB."""
    if ETCD is None:
        message = "no etcd binary (Debian package etcd-server): the etcd case is skipped"
        print(f"etcd: {message}", file=sys.stderr)
        report["etcd"] = {"skipped": message}
        return
    value_path = os.path.join(workdir, "value.json")
    with open(value_path, "w") as f:
        json.dump(template, f)
    etcd, servers = None, {}
    try:
        etcd = Etcd(workdir)
        for backend, flags in (("etcd", ("--storage-backend=etcd",
                                          f"--etcd-servers={etcd.url}")),
                               ("leveldb", ())):
            place = os.path.join(workdir, backend)
            os.mkdir(place)
            try:
                orchd = servers[backend] = Orchd(place, *flags)
            except SystemExit as error:
                with open(os.path.join(place, "orchd.log"), errors="replace") as f:
                    last = (f.read().strip().splitlines() or [""])[-1]
                raise SystemExit(f"orchd on {backend} did not start ({error}): {last}") from None
            _prepare(orchd, template)
        results = {}
        for round_number in range(args.rounds):
            print(f"etcd {round_number + 1}/{args.rounds}", file=sys.stderr)
            results.setdefault("put", []).append(etcd_put(etcd, value_path, 16, args.secs))
            order = list(servers.items())
            if round_number % 2:
                order.reverse()
            for backend, orchd in order:
                run = hload(orchd, orchd.url + POST_PATH, 16, args.secs, "POST", body_path,
                            gen_name=True)
                results.setdefault(f"create-{backend}", []).append(run)
                run = hload(orchd, orchd.url + GET_PATH, 16, args.secs)
                results.setdefault(f"get-{backend}", []).append(run)
    finally:
        for orchd in servers.values():
            orchd.stop()
        if etcd is not None:
            etcd.stop()
    summary = {key: summarize(runs) for key, runs in results.items()}
    summary["create_vs_put"] = round(summary["create-etcd"]["rps"] / summary["put"]["rps"], 3)
    summary["create_vs_put_rounds"] = [round(c["rps"] / p["rps"], 3) for c, p in
                                       zip(results["create-etcd"], results["put"])]
    for verb in ("create", "get"):
        summary[f"{verb}_etcd_vs_leveldb"] = round(
            summary[f"{verb}-etcd"]["rps"] / summary[f"{verb}-leveldb"]["rps"], 3)
    summary["etcd_core"] = etcd_core()
    report["etcd"] = summary


def print_etcd(report):
    e = report.get("etcd")
    if e is None:
        return
    if "skipped" in e:
        print(f"etcd: skipped ({e['skipped']})")
        return
    shared = " (with the load generators)" if e["etcd_core"] == 1 else ""
    print(f"etcd store, 16 connections, medians of {report['rounds']} rounds of "
          f"{report['secs']:g}s; etcd on core {e['etcd_core']}{shared}")
    print(f"{'case':<22}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}")
    for key, label in (("put", "etcd raw put"), ("create-etcd", "create orchd/etcd"),
                       ("create-leveldb", "create orchd/leveldb"), ("get-etcd", "GET orchd/etcd"),
                       ("get-leveldb", "GET orchd/leveldb")):
        r = e[key]
        print(f"{label:<22}{r['rps']:>10.0f}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}"
              f"{r['errors'] + r['non_2xx']:>8}")
    print(f"creates through orchd / raw etcd puts: {e['create_vs_put']:.3f} (target >= 0.6; "
          f"rounds {', '.join(f'{r:.3f}' for r in e['create_vs_put_rounds'])}; median "
          f"{statistics.median(e['create_vs_put_rounds']):.3f}); orchd on etcd / on LevelDB: "
          f"create {e['create_etcd_vs_leveldb']:.3f}, GET {e['get_etcd_vs_leveldb']:.3f}")
