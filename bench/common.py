"""
What the benchmark cases share: orchd and the floor as child processes,
the load generator, setup writes, and summaries of runs.
"""

import base64
import concurrent.futures
import functools
import http.client
import json
import os
import resource
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import threading
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TWISTD = "from twisted.scripts.twistd import run; run()"
BODY_KEYS = 10  # ten 180-byte values: a ~2 KB object
PROTOBUF = "application/vnd.kubernetes.protobuf"


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

    def __init__(self, workdir, *flags, ready_timeout=60):
        self.data = os.path.join(workdir, "orchd-data")
        self.port = free_port()
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.log = open(os.path.join(workdir, "orchd.log"), "wb")
        self.process = subprocess.Popen(
            pinned(0, [sys.executable, "-c", TWISTD, "--pidfile=", "-n", "orchd",
                       "--data-dir", self.data, "--secure-port", str(self.port),
                       # Free ports, so that servers run side by side (authz, etcd).
                       "--orchlet-port", "0", "--scheduler-port", "0",
                       "--controller-manager-port", "0", *flags]),
            stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=workdir)
        self.url = f"https://127.0.0.1:{self.port}"
        self._wait_for_files()
        self.cert, self.key, self.ca = self._credentials(workdir)
        context = ssl.create_default_context(cafile=self.ca)
        context.load_cert_chain(self.cert, self.key)
        self.context = context
        self._wait_ready(ready_timeout)

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

    def request(self, method, path, body=None, connection=None, content_type="application/json"):
        conn = connection or http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=self.context, timeout=60)
        headers = {"content-type": content_type} if body is not None else {}
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers=headers)
        response = conn.getresponse()
        data = response.read()
        if connection is None:
            conn.close()
        return response.status, data

    def _wait_ready(self, timeout):
        deadline = time.time() + timeout
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


def hload(orchd, url, conns, secs, method="GET", body=None, gen_name=False, media=None,
          identity=None):
    """
    One hload.js run; C{identity} is a C{(cert path, key path)} pair, by
    default orchd's admin.
    """
    cert, key = identity or (orchd.cert, orchd.key)
    argv = ["node", os.path.join(HERE, "hload.js"), "--url", url, "--conns", str(conns),
            "--secs", str(secs), "--cert", cert, "--key", key, "--method", method]
    if body:
        argv += ["--body", body]
    if gen_name:
        argv.append("--gen-name")
    if media:
        argv += ["--accept", media, "--ctype", media]
    for _ in range(3):
        out = subprocess.run(pinned(1, argv), capture_output=True, text=True, check=True).stdout
        run = json.loads(out.strip().splitlines()[-1])
        if run["p50_ms"] is not None:
            return run
        # No request completed in the window (tiny --smoke windows on a busy
        # machine, where 64 handshakes can take longer): a longer one.
        secs *= 2
        argv[argv.index("--secs") + 1] = str(secs)
    return run


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
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    post_all(orchd, ((path, dict(template, metadata={"name": f"cm-{i:06d}"}))
                     for i in range(count)), threads)


def post_all(orchd, writes, threads=8, created=None, method="POST", expect=201,
             content_type="application/json"):
    """
    POST every ``(path, body)`` of ``writes`` on ``threads`` connections; each
    must be 201. ``created(path, body, answer bytes)``, if given, is called
    for each (from the worker threads). ``method``, ``expect`` and
    ``content_type`` send another method expecting another code (PUT, 200;
    PATCH with a merge patch).
    """
    writes = list(writes)

    def worker(start):
        conn = http.client.HTTPSConnection("127.0.0.1", orchd.port, context=orchd.context)
        for path, body in writes[start::threads]:
            status, data = orchd.request(method, path, body, conn, content_type)
            if status != expect:
                raise SystemExit(f"setup create failed: {status} {data[:200]!r}")
            if created is not None:
                created(path, body, data)
        conn.close()

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def issue_client_cert(orchd, common_name, organizations=()):
    """
    A client certificate from ``orchd``'s CA (pki/ca.key) for user
    ``common_name`` in groups ``organizations``: ``(cert PEM, key PEM)`` as text.
    """
    sys.path.insert(0, ROOT)
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    from orchd.tls.certs import certificate_pem, issue_certificate, private_key_pem

    ca = getattr(orchd, "_ca", None)
    if ca is None:
        pki = os.path.join(orchd.data, "pki")
        with open(os.path.join(pki, "ca.crt"), "rb") as f:
            certificate = x509.load_pem_x509_certificate(f.read())
        with open(os.path.join(pki, "ca.key"), "rb") as f:
            key = serialization.load_pem_private_key(f.read(), None)
        ca = orchd._ca = (certificate, key)
    cert, key = issue_certificate(*ca, common_name, list(organizations), client=True)
    return tuple(pem if isinstance(pem, str) else pem.decode()
                 for pem in (certificate_pem(cert), private_key_pem(key)))


def raise_file_limit(needed):
    """Raise this process's open-file limit (inherited by orchd and the load) to ``needed``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            raise SystemExit(f"open-file limit {hard} is below the {needed} this run needs")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def rss_mb(pid):
    """Resident set size of ``pid`` in MB (VmRSS of /proc/<pid>/status), or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def summarize(runs):
    return {
        "rps": statistics.median(r["rps"] for r in runs),
        "p50_ms": statistics.median(r["p50_ms"] for r in runs),
        "p99_ms": statistics.median(r["p99_ms"] for r in runs),
        "errors": sum(r["errors"] for r in runs),
        "non_2xx": sum(n for r in runs for code, n in r["codes"].items() if code[0] != "2"),
    }


class SimulatedNodes:
    """
    C{nodes} simulated nodes in a process of their own on core 1, brought up
    as README.rst documents it: C{twistd orchd --orchlet-only
    --simulated-nodes N} with C{orchd}'s admin orchconfig (identities
    through CSRs), nodes named C{<name>-sim-<i>}. Its log is
    C{simulated.log} in C{workdir}.
    """

    def __init__(self, orchd, workdir, nodes, name="bench"):
        self.log_path = os.path.join(workdir, "simulated.log")
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                pinned(1, [sys.executable, "-c", TWISTD, "--pidfile=", "-n", "orchd",
                           "--orchlet-only", "--simulated-nodes", str(nodes),
                           "--orchconfig", os.path.join(orchd.data, "admin.orchconfig"),
                           "--hostname-override", name, "--orchlet-port", "0",
                           "--data-dir", os.path.join(workdir, "sim-data"),
                           "--root-dir", os.path.join(workdir, "sim-root")]),
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir)

    @property
    def pid(self):
        return self.process.pid

    def running(self):
        return self.process.poll() is None

    def stop(self, timeout=120):
        """Stop it as an operator would (it logs its last summary as it stops)."""
        if self.running():
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()


def ms_text(ms):
    """A latency in milliseconds as the reports print it ("-" when none was measured)."""
    return "-" if ms is None else f"{ms:.1f}"


def cpu_seconds(pid):
    """User plus system CPU time a process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def compared_server(place, flags, namespace, collection, template, case):
    """
    One of the servers L{create_get_rounds} compares: orchd (C{--no-orchlet}
    and C{flags}) in C{place}, holding C{namespace} and the object of
    C{template} named C{bench-get} in C{collection}; stopped again if that
    setup fails.
    """
    orchd = Orchd(place, "--no-orchlet", *flags)
    try:
        orchd.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
        status, data = orchd.request("POST", collection,
                                     dict(template, metadata={"name": "bench-get"}))
        if status != 201:
            raise SystemExit(f"{case} setup failed: {status} {data[:200]!r}")
    except BaseException:
        orchd.stop()
        raise
    return orchd


#: Seconds each server runs alone in its turn (L{create_get_rounds}' C{turns}).
TURN = 0.1
#: A server is settled once it uses under this share of a core (L{_settle}).
IDLE = 0.05


def create_get_rounds(servers, args, collection, get_path, body_path, label, at_once=False,
                      turns=False):
    """
    create@16 (unique names) and GET@16 of C{get_path} on each of C{servers}
    (name -> Orchd) for C{--secs} each over C{--rounds}, each verb on the
    servers one after the other, their order alternating:
    C{{"<verb>-<name>": [runs]}}, each run with orchd's CPU time per request
    (C{cpu_us}). Before each verb's runs, the servers are left to finish
    what the last runs started (L{_settle}: compactions after the creates,
    collections), so that it lands in no one's measure.

    With C{at_once}, each verb's load runs on every server at the same
    moment instead (the servers sharing core 0, the loads on core 1): a
    machine whose speed drifts from one moment to the next then slows them
    alike, and the ratio of a round holds steady. Each server also finds
    the core's caches as the other left them, every few milliseconds, so
    the server that reaches more memory pays for refilling them more often
    than it would running alone.

    With C{turns}, the loads run at the same moment too, but the servers
    take turns on the core: each runs alone for L{TURN} seconds while the
    others are stopped (C{SIGSTOP}, C{SIGCONT}). Each is measured as it
    runs by itself, and the machine's drift, over seconds, meets them alike.
    """
    results = {}
    verbs = (("create", collection, "POST", body_path), ("get", get_path, "GET", None))
    for round_number in range(args.rounds):
        print(f"{label} {round_number + 1}/{args.rounds}", file=sys.stderr)
        order = list(servers.items())
        if round_number % 2:
            order.reverse()
        pids = [orchd.process.pid for _, orchd in order]
        for verb, path, method, body in verbs:
            loads = [functools.partial(_measured_load, orchd, orchd.url + path, args.secs, method,
                                       body) for _, orchd in order]
            _settle(pids)
            if turns:
                runs = _taking_turns(loads, pids)
            elif at_once:
                runs = _all_at_once(loads)
            else:
                runs = [load() for load in loads]
            for (name, _), run in zip(order, runs):
                results.setdefault(f"{verb}-{name}", []).append(run)
    return results


def _settle(pids, window=0.5, most=20.0):
    """
    Wait until each of the processes C{pids} has used under L{IDLE} of a
    core over C{window} seconds, or C{most} seconds have passed.
    """
    deadline = time.monotonic() + most
    while time.monotonic() < deadline:
        before = [cpu_seconds(pid) for pid in pids]
        time.sleep(window)
        if all(cpu_seconds(pid) - b < IDLE * window for pid, b in zip(pids, before)):
            return


def _measured_load(orchd, url, secs, method, body):
    """One hload run at 16 connections, with orchd's CPU time per request (C{cpu_us})."""
    before = cpu_seconds(orchd.process.pid)
    run = hload(orchd, url, 16, secs, method, body, gen_name=method == "POST")
    spent = cpu_seconds(orchd.process.pid) - before
    run["cpu_us"] = spent / max(run["requests"], 1) * 1e6
    return run


def _all_at_once(calls):
    """Each of C{calls} on a thread of its own, at once: their results, in order."""
    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(lambda call: call(), calls))


def _taking_turns(calls, pids):
    """
    L{_all_at_once}, the processes C{pids} running one at a time, the first
    first, each for L{TURN} seconds, until every call has returned; every
    process is continued whatever happens.
    """
    for pid in pids[1:]:
        os.kill(pid, signal.SIGSTOP)
    try:
        with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
            futures = [pool.submit(call) for call in calls]
            running = 0
            while not all(f.done() for f in futures):
                time.sleep(TURN)
                os.kill(pids[running], signal.SIGSTOP)
                running = (running + 1) % len(pids)
                os.kill(pids[running], signal.SIGCONT)
            return [f.result() for f in futures]
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def compare_servers(results, mine, base):
    """
    The medians of L{create_get_rounds}' runs, and for each verb the ratio
    C{mine} / C{base} of requests/s, as medians and per round (None where
    C{base} answered nothing), and C{base}'s CPU per request over C{mine}'s
    (steadier on a shared machine than requests/s: a round of either
    server can be slowed by whatever else runs).
    """
    summary = {key: dict(summarize(runs), cpu_us=statistics.median(r["cpu_us"] for r in runs))
               for key, runs in results.items()}
    for verb in ("create", "get"):
        summary[f"{verb}_ratio"] = _ratio(summary[f"{verb}-{mine}"]["rps"],
                                          summary[f"{verb}-{base}"]["rps"])
        summary[f"{verb}_ratio_rounds"] = [
            _ratio(a["rps"], b["rps"])
            for a, b in zip(results[f"{verb}-{mine}"], results[f"{verb}-{base}"])]
        summary[f"{verb}_cpu_ratio"] = _ratio(summary[f"{verb}-{base}"]["cpu_us"],
                                              summary[f"{verb}-{mine}"]["cpu_us"])
    return summary


def _ratio(mine, base):
    return round(mine / base, 3) if base else None
