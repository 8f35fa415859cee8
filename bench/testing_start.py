#!/usr/bin/env python3
"""
How fast orchd.testing gives a test a control plane (bench/README.rst, "orchd.testing").

- session fixture: --runs fresh Python processes, each importing
  orchd.testing, starting a ControlPlane with the pytest fixture's defaults
  and making one HTTPS request (GET /readyz, 200). Reported: from
  ``import orchd.testing`` to that first served request, and from the
  process's spawn (the interpreter's own start included) to it. Target for
  the first: median under 1 s.
- per-test namespace: --namespaces ``create_namespace()`` calls in one of
  those processes (and the ``delete_namespace()`` after each), the
  ``orchd_namespace`` fixture's work. Target: median under 20 ms.
- for comparison: ``twistd orchd`` (LevelDB, PKI written to disk, controllers,
  the node agent off as in the tests) as a subprocess, from its spawn to
  its first ``/readyz`` 200, --runs times.

Usage: python bench/testing_start.py [--smoke] [--runs 10] [--namespaces 100] [--json FILE]
   or: python bench/run.py --cases testing [--start-runs 10] [--namespaces 100]

--smoke: one run of each and 5 namespaces; the figures mean nothing, it
checks that the script still runs.
"""

import argparse
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def child(namespaces):
    """One fresh process: import, start, first request; then the namespaces."""
    imported = time.monotonic()
    sys.path.insert(0, ROOT)
    from orchd.testing import ControlPlane
    # The orchd fixture's defaults (orchd/testing/pytest_plugin.py DEFAULTS).
    plane = ControlPlane(upstream_group_names=True)
    plane.start()
    context = ssl.create_default_context(cafile=str(plane.ca_path))
    with urllib.request.urlopen(plane.url + "/readyz", context=context, timeout=30) as answer:
        assert answer.status == 200, answer.status
    served = time.monotonic()
    creates, deletes = [], []
    for _ in range(namespaces):
        began = time.perf_counter()
        name = plane.create_namespace()
        created = time.perf_counter()
        plane.delete_namespace(name)
        deletes.append(time.perf_counter() - created)
        creates.append(created - began)
    plane.stop()
    print(json.dumps({"imported": imported, "served": served,
                      "creates": creates, "deletes": deletes}))


def fixture_runs(runs, namespaces):
    """The session fixture's start in fresh processes; namespaces timed in the first."""
    starts, spawns, creates, deletes = [], [], [], []
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for index in range(runs):
        spawned = time.monotonic()
        output = subprocess.run(
            [sys.executable, __file__, "--child", str(namespaces if index == 0 else 0)],
            capture_output=True, text=True, env=env, timeout=120, check=True).stdout
        result = json.loads(output.strip().splitlines()[-1])
        starts.append(result["served"] - result["imported"])
        spawns.append(result["served"] - spawned)
        creates += result["creates"]
        deletes += result["deletes"]
    return starts, spawns, creates, deletes


def twistd_runs(runs):
    """``twistd orchd`` from its spawn to its first /readyz 200, in a fresh data dir each run."""
    sys.path.insert(0, HERE)
    from common import TWISTD, free_port

    unverified = ssl.create_default_context()
    unverified.check_hostname = False
    unverified.verify_mode = ssl.CERT_NONE     # the CA is written by the server being timed
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as workdir:
            port = free_port()
            spawned = time.monotonic()
            process = subprocess.Popen(
                [sys.executable, "-c", TWISTD, "--pidfile=", "-n", "orchd",
                 "--data-dir", os.path.join(workdir, "data"), "--secure-port", str(port),
                 "--no-orchlet", "--orchlet-port", "0", "--scheduler-port", "0",
                 "--controller-manager-port", "0"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=workdir)
            try:
                deadline = spawned + 60
                while True:
                    try:
                        with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz",
                                                    context=unverified, timeout=5) as answer:
                            if answer.status == 200:
                                break
                    except OSError:
                        pass
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit("twistd orchd did not become ready")
                    time.sleep(0.01)
                times.append(time.monotonic() - spawned)
            finally:
                process.terminate()
                process.wait(30)
    return times


def testing_case(runs, namespaces):
    """The figures of all three measurements, as bench/run.py reports them ("testing")."""
    starts, spawns, creates, deletes = fixture_runs(runs, namespaces)
    twistd = twistd_runs(runs)
    return {"runs": runs, "namespaces": namespaces,
            "fixture_import_to_first_request_s": statistics.median(starts),
            "fixture_spawn_to_first_request_s": statistics.median(spawns),
            "namespace_create_ms": statistics.median(creates) * 1000 if creates else None,
            "namespace_delete_ms": statistics.median(deletes) * 1000 if deletes else None,
            "twistd_spawn_to_readyz_s": statistics.median(twistd)}


def print_testing(report):
    """The "testing" figures of a report, if it has them."""
    figures = report.get("testing")
    if not figures:
        return
    runs, namespaces = figures["runs"], figures["namespaces"]

    def ms(value):
        return "-" if value is None else f"{value:.1f} ms"
    print(f"orchd.testing session fixture, import to first served request "
          f"(median of {runs} processes): "
          f"{ms(figures['fixture_import_to_first_request_s'] * 1000)}  (target < 1000 ms)")
    print(f"  the same from process spawn (interpreter start included): "
          f"{ms(figures['fixture_spawn_to_first_request_s'] * 1000)}")
    print(f"per-test namespace, create_namespace() (median of {namespaces}): "
          f"{ms(figures['namespace_create_ms'])}  (target < 20 ms); "
          f"delete_namespace(): {ms(figures['namespace_delete_ms'])}")
    print(f"twistd orchd subprocess, spawn to first /readyz 200 (median of {runs}): "
          f"{ms(figures['twistd_spawn_to_readyz_s'] * 1000)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="fresh processes per start figure")
    parser.add_argument("--namespaces", type=int, default=100,
                        help="create_namespace() calls timed")
    parser.add_argument("--smoke", action="store_true", help="one run, 5 namespaces")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        return child(args.child)
    if args.smoke:
        args.runs, args.namespaces = 1, 5
    report = {"testing": testing_case(args.runs, args.namespaces)}
    print_testing(report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
