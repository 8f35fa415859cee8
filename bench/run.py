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

Usage: python bench/run.py [--rounds 3] [--secs 8] [--objects 10000] [--json FILE]
Needs: the orchd package importable (pip install .), node, taskset (optional).
"""

import argparse
import base64
import http.client
import json
import os
import re
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TWISTD = "from twisted.scripts.twistd import run; run()"
BODY_KEYS = 10  # ten 180-byte values: a ~2 KB object


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pinned(core, argv):
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        return ["taskset", "-c", str(core), *argv]
    return argv


class Orchd:
    """A ``twistd orchd`` child process and the files a client needs."""

    def __init__(self, workdir):
        self.data = os.path.join(workdir, "orchd-data")
        self.port = free_port()
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.log = open(os.path.join(workdir, "orchd.log"), "wb")
        self.process = subprocess.Popen(
            pinned(0, [sys.executable, "-c", TWISTD, "--pidfile=", "-n", "orchd",
                       "--data-dir", self.data, "--secure-port", str(self.port)]),
            stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=workdir)
        self.url = f"https://127.0.0.1:{self.port}"
        self._wait_for_files()
        self.cert, self.key, self.ca = self._credentials(workdir)
        context = ssl.create_default_context(cafile=self.ca)
        context.load_cert_chain(self.cert, self.key)
        self.context = context
        self._wait_ready()

    def _wait_for_files(self):
        deadline = time.time() + 60
        while not os.path.exists(os.path.join(self.data, "admin.orchconfig")):
            if self.process.poll() is not None or time.time() > deadline:
                raise SystemExit("orchd did not start; see orchd.log")
            time.sleep(0.1)

    def _credentials(self, workdir):
        with open(os.path.join(self.data, "admin.orchconfig")) as f:
            config = yaml.safe_load(f)
        user = config["users"][0]["user"]
        cluster = config["clusters"][0]["cluster"]
        paths = []
        for name, data in (("admin.crt", user["client-certificate-data"]),
                           ("admin.key", user["client-key-data"]),
                           ("ca.crt", cluster["certificate-authority-data"])):
            path = os.path.join(workdir, name)
            with open(path, "wb") as f:
                f.write(base64.b64decode(data))
            paths.append(path)
        return paths

    def request(self, method, path, body=None, connection=None):
        conn = connection or http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=self.context, timeout=60)
        headers = {"content-type": "application/json"} if body is not None else {}
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers=headers)
        response = conn.getresponse()
        data = response.read()
        if connection is None:
            conn.close()
        return response.status, data

    def _wait_ready(self):
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if self.request("GET", "/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise SystemExit("orchd never became ready; see orchd.log")

    def stop(self):
        self.process.terminate()
        self.process.wait(30)
        self.log.close()


class Floor:
    """floor_server.py over the same serving certificate, with a one-key LevelDB."""

    def __init__(self, workdir, orchd, body):
        import plyvel

        db_path = os.path.join(workdir, "floor-db")
        db = plyvel.DB(db_path, create_if_missing=True)
        db.put(b"k", body)
        db.close()
        self.port = free_port()
        pki = os.path.join(orchd.data, "pki")
        self.process = subprocess.Popen(
            pinned(0, [sys.executable, os.path.join(HERE, "floor_server.py"),
                       "--port", str(self.port), "--cert", os.path.join(pki, "apiserver.crt"),
                       "--key", os.path.join(pki, "apiserver.key"), "--db", db_path]),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.process.stdout.readline()
        self.url = f"https://127.0.0.1:{self.port}"

    def stop(self):
        self.process.terminate()
        self.process.wait(30)


def hload(orchd, url, conns, secs, method="GET", body=None, gen_name=False):
    argv = ["node", os.path.join(HERE, "hload.js"), "--url", url, "--conns", str(conns),
            "--secs", str(secs), "--cert", orchd.cert, "--key", orchd.key, "--method", method]
    if body:
        argv += ["--body", body]
    if gen_name:
        argv.append("--gen-name")
    out = subprocess.run(pinned(1, argv), capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def make_body(workdir):
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bench"},
           "data": {f"key{i}": "v" * 180 for i in range(BODY_KEYS)}}
    path = os.path.join(workdir, "body.json")
    with open(path, "w") as f:
        json.dump(obj, f)
    return obj, path


def fill(orchd, namespace, count, template, threads=8):
    """Create ``count`` config maps in ``namespace`` (setup, not measured)."""
    orchd.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})

    def worker(start):
        conn = http.client.HTTPSConnection("127.0.0.1", orchd.port, context=orchd.context)
        for i in range(start, count, threads):
            body = dict(template, metadata={"name": f"cm-{i:06d}"})
            status, data = orchd.request(
                "POST", f"/api/v1/namespaces/{namespace}/configmaps", body, conn)
            if status != 201:
                raise SystemExit(f"setup create failed: {status} {data[:200]!r}")
        conn.close()

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def summarize(runs):
    return {
        "rps": statistics.median(r["rps"] for r in runs),
        "p50_ms": statistics.median(r["p50_ms"] for r in runs),
        "p99_ms": statistics.median(r["p99_ms"] for r in runs),
        "errors": sum(r["errors"] for r in runs),
        "non_2xx": sum(n for r in runs for code, n in r["codes"].items() if code[0] != "2"),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--secs", type=float, default=8)
    parser.add_argument("--objects", type=int, default=10000)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    if not shutil.which("node"):
        raise SystemExit("node (Node.js) is needed for the load generator")

    workdir = tempfile.mkdtemp(prefix="orchd-bench-")
    template, body_path = make_body(workdir)
    orchd = Orchd(workdir)
    floor = Floor(workdir, orchd, json.dumps(template).encode())
    try:
        orchd.request("POST", "/api/v1/namespaces/default/configmaps",
                      dict(template, metadata={"name": "bench-get"}))
        orchd.request("POST", "/api/v1/namespaces", {"metadata": {"name": "bench-post"}})
        print(f"setup: creating {args.objects} objects to list ...", file=sys.stderr)
        fill(orchd, "bench-list", args.objects, template)
        cases = {
            "get": (orchd.url + "/api/v1/namespaces/default/configmaps/bench-get",
                    floor.url + "/kv/k", "GET"),
            "create": (orchd.url + "/api/v1/namespaces/bench-post/configmaps",
                       floor.url + "/obj", "POST"),
        }
        results = {}
        for round_number in range(args.rounds):
            print(f"round {round_number + 1}/{args.rounds}", file=sys.stderr)
            for name, (orchd_url, floor_url, method) in cases.items():
                for conns in (16, 64):
                    post = method == "POST"
                    for who, url in (("orchd", orchd_url), ("floor", floor_url)):
                        run = hload(orchd, url, conns, args.secs, method,
                                    body_path if post else None, gen_name=post and who == "orchd")
                        results.setdefault(f"{name}-{conns}-{who}", []).append(run)
            run = hload(orchd, orchd.url + "/api/v1/namespaces/bench-list/configmaps", 1,
                        max(args.secs, 10))
            results.setdefault("list", []).append(run)
        report = {"rounds": args.rounds, "secs": args.secs, "objects": args.objects}
        for key, runs in results.items():
            report[key] = summarize(runs)
        for name in cases:
            for conns in (16, 64):
                mine, base = report[f"{name}-{conns}-orchd"], report[f"{name}-{conns}-floor"]
                report[f"{name}-{conns}-ratio"] = round(mine["rps"] / base["rps"], 3)
        report["list_seconds"] = round(report["list"]["p50_ms"] / 1000, 3)
    finally:
        floor.stop()
        orchd.stop()
    print_report(report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    shutil.rmtree(workdir, ignore_errors=True)


def print_report(report):
    print(f"orchd vs floor, medians of {report['rounds']} rounds of {report['secs']:g}s")
    print(f"{'case':<14}{'orchd req/s':>12}{'p50 ms':>9}{'p99 ms':>9}"
          f"{'floor req/s':>13}{'ratio':>8}{'errors':>8}")
    for name in ("get", "create"):
        for conns in (16, 64):
            mine = report[f"{name}-{conns}-orchd"]
            base = report[f"{name}-{conns}-floor"]
            print(f"{name + '@' + str(conns):<14}{mine['rps']:>12.0f}{mine['p50_ms']:>9.2f}"
                  f"{mine['p99_ms']:>9.2f}{base['rps']:>13.0f}"
                  f"{report[f'{name}-{conns}-ratio']:>8.2f}{mine['errors'] + mine['non_2xx']:>8}")
    print(f"LIST of {report['objects']} objects: {report['list_seconds']:.3f} s (median)")


if __name__ == "__main__":
    main()
