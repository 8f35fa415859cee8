"""
Workloads: how fast the scheduler places pods, and how long a large
Deployment takes to become available, on one orchd with simulated nodes.

- scheduling: durable pod creates per second (hload.js, pods that no
  scheduler takes); then --pods pods created while every node has a taint
  they do not tolerate (pending, each tried once), and the taints removed:
  pods bound per second from the removal to the last binding, and its
  ratio to the create rate of the same run (target >= 0.5);
- deployment: a Deployment of --replicas replicas from create to its
  Available condition with every replica available: seconds, and orchd's CPU
  as a share of one core over that time; --rounds rounds, median;
- daemonset: a DaemonSet from create to one available pod on every node
  (the simulated ones and the local one), then a rolling update of its
  image (default maxUnavailable 1) to every pod updated and available:
  seconds of each, --rounds rounds, median;
- jobs: durable pod creates per second (as in scheduling), then --jobs Jobs
  of one pod each created at once: Jobs completed per second from the first
  create to the last Complete condition, and its ratio to the create rate.
"""

import http.client
import json
import os
import statistics
import sys
import threading
import time

from common import Orchd, SimulatedNodes, cpu_seconds, hload, post_all

NAMESPACE = "bench-workloads"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
DAEMONSETS = f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets"
JOBS = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"


def pod(name, scheduler="default-scheduler", group="held"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "bench", "group": group}},
            "spec": {"schedulerName": scheduler,
                     "containers": [{"name": "c", "image": "registry.example/bench:1",
                                     "resources": {"requests": {"cpu": "10m",
                                                                "memory": "16Mi"}}}]}}


def deployment(name, replicas):
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{
                                      "name": "c", "image": "registry.example/bench:1",
                                      "resources": {"requests": {"cpu": "10m"}}}]}}}}


class WatchCounter:
    """
    A watch of C{collection} in a thread: counts the objects of this run's
    C{prefix} for which C{counts(obj)} holds, and when the last one did.
    """

    def __init__(self, orchd, collection, prefix, resource_version, counts):
        self.prefix = prefix
        self.counts = counts
        self.seen = set()
        self.times = []
        self.last = None
        self.target = None
        self.done = threading.Event()
        self._conn = http.client.HTTPSConnection("127.0.0.1", orchd.port, context=orchd.context,
                                                 timeout=600)
        self._conn.request("GET", f"{collection}?watch=true&resourceVersion={resource_version}")
        self._response = self._conn.getresponse()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self._response:
            obj = json.loads(line).get("object") or {}
            name = (obj.get("metadata") or {}).get("name", "")
            if name.startswith(self.prefix) and name not in self.seen and self.counts(obj):
                self.seen.add(name)
                self.last = time.monotonic()
                self.times.append(self.last)
                if self.target is not None and len(self.seen) >= self.target:
                    self.done.set()
                    return

    def close(self):
        self._conn.close()


def bound(pod_object):
    return bool((pod_object.get("spec") or {}).get("nodeName"))


def complete(job_object):
    return any(c.get("type") == "Complete" and c.get("status") == "True"
               for c in (job_object.get("status") or {}).get("conditions") or ())


def list_revision(orchd):
    status, data = orchd.request("GET", PODS + "?limit=1")
    return json.loads(data)["metadata"]["resourceVersion"]


#: The taint that holds the scheduling case's pods pending (a cordon would
#: bring the node lifecycle controller's own taint, removed only later).
HOLD = [{"key": "bench.orch.io/hold", "effect": "NoSchedule"}]


def set_taints(orchd, names, taints, threads=16):
    """Set the taints of every node of C{names} (None: none), C{threads} at a time."""
    post_all(orchd, ((f"/api/v1/nodes/{name}", {"spec": {"taints": taints}}) for name in names),
             threads=threads, method="PATCH", expect=200,
             content_type="application/merge-patch+json")


def node_names(orchd):
    status, data = orchd.request("GET", "/api/v1/nodes")
    return [node["metadata"]["name"] for node in json.loads(data)["items"]]


def wait_tried(orchd, prefix, count, timeout=300):
    """Until C{count} pods of C{prefix} carry the scheduler's PodScheduled=False."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, data = orchd.request("GET", f"{PODS}?labelSelector=group%3D{prefix}")
        tried = sum(1 for item in json.loads(data)["items"]
                    if any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                            and c.get("reason") == "Unschedulable"
                            for c in (item.get("status") or {}).get("conditions") or ()))
        if tried >= count:
            return
        time.sleep(0.5)
    raise SystemExit(f"the scheduler did not try all {count} pending pods")


def settle(orchd, share=0.1, timeout=120):
    """Until orchd's CPU over a second is under C{share} of a core (the last round's pods
    finished starting), so that rounds do not overlap."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = cpu_seconds(orchd.process.pid)
        time.sleep(1)
        if cpu_seconds(orchd.process.pid) - before < share:
            return


def pod_creates(orchd, args, workdir):
    """hload.js's durable pod creates/s, of pods no scheduler takes: the runs' yardstick."""
    body_path = os.path.join(workdir, "held-pod.json")
    with open(body_path, "w") as f:
        json.dump(pod("held", scheduler="bench-nobody"), f)
    return hload(orchd, orchd.url + PODS, 16, args.secs, method="POST", body=body_path,
                 gen_name=True)


def scheduling_round(orchd, args, workdir, round_number):
    settle(orchd)
    creates = pod_creates(orchd, args, workdir)
    # The pods are pending before the clock starts: created while every node
    # has a taint they do not tolerate, and tried by the scheduler. Taints
    # come off one node at a time, and pods tried while only some nodes are
    # free fill those and then wait out a backoff (as upstream's queue has
    # them do), so the bench lines the pods up first: a label written on one
    # node moves every pod to be tried again at once (failing again: backoff
    # 2 s), the taints come off meanwhile (within the backoff), and when it
    # ends every pod meets every node free. The clock runs from the first
    # binding to the last.
    nodes = node_names(orchd)
    set_taints(orchd, nodes, HOLD)
    prefix = f"s{round_number}"
    post_all(orchd, ((PODS, pod(f"{prefix}{i:05d}", group=prefix)) for i in range(args.pods)),
             threads=16)
    wait_tried(orchd, prefix, args.pods)
    time.sleep(1.5)                 # past the first failure's backoff (1 s)
    counter = WatchCounter(orchd, PODS, prefix, list_revision(orchd), bound)
    counter.target = args.pods
    orchd.request("PATCH", f"/api/v1/nodes/{nodes[0]}",
                  {"metadata": {"labels": {"bench.orch.io/round": prefix}}},
                  content_type="application/merge-patch+json")
    time.sleep(0.3)                 # every pod tried again
    started = time.monotonic()
    set_taints(orchd, nodes, None, threads=len(nodes))
    opened = time.monotonic()
    while not counter.times and time.monotonic() - started < 60:
        time.sleep(0.001)
    cpu_before = cpu_seconds(orchd.process.pid)
    if not counter.done.wait(600):
        raise SystemExit(f"only {len(counter.seen)} of {args.pods} pods were bound")
    # orchd's CPU from the first binding to the last (read when the watch saw
    # it): scheduler, bindings, and the nodes starting the pods meanwhile.
    cpu = cpu_seconds(orchd.process.pid) - cpu_before
    counter.close()
    bind_secs = counter.last - counter.times[0]
    binds = args.pods / bind_secs
    return {"creates_per_s": creates["rps"], "binds_per_s": binds,
            "ratio": binds / creates["rps"], "open_secs": opened - started,
            "first_bind_secs": counter.times[0] - started, "bind_secs": bind_secs,
            "cpu_ms_per_pod": cpu * 1000 / args.pods}


def wait_until(orchd, path, done, what, timeout=900):
    """Poll C{path} until C{done(object)}; the time it first held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, data = orchd.request("GET", path)
        if status == 200 and done(json.loads(data)):
            return time.monotonic()
        time.sleep(0.2)
    raise SystemExit(f"{what} did not happen in {timeout}s")


def available(replicas):
    """Whether a Deployment is Available with C{replicas} available, as of its generation."""
    def done(obj):
        state = obj.get("status") or {}
        return (any(c.get("type") == "Available" and c.get("status") == "True"
                    for c in state.get("conditions") or ())
                and state.get("availableReplicas") == replicas
                and state.get("observedGeneration") == obj["metadata"]["generation"])
    return done


def rolled_out(obj):
    """Whether a DaemonSet has every desired pod updated and available."""
    state = obj.get("status") or {}
    desired = state.get("desiredNumberScheduled")
    return bool(desired and state.get("observedGeneration") == obj["metadata"]["generation"]
                and state.get("updatedNumberScheduled") == desired
                and state.get("numberAvailable") == desired
                and not state.get("numberUnavailable"))


def deployment_round(orchd, args, round_number):
    settle(orchd)
    name = f"bench-{round_number}"
    cpu_before = cpu_seconds(orchd.process.pid)
    started = time.monotonic()
    status, data = orchd.request("POST", DEPLOYMENTS, deployment(name, args.replicas))
    if status != 201:
        raise SystemExit(f"deployment create failed: {status} {data[:200]!r}")
    finished = wait_until(orchd, f"{DEPLOYMENTS}/{name}", available(args.replicas),
                          f"deployment {name} becoming available")
    cpu = cpu_seconds(orchd.process.pid) - cpu_before
    seconds = finished - started
    orchd.request("DELETE", f"{DEPLOYMENTS}/{name}?propagationPolicy=Foreground")
    wait_gone(orchd, name)
    return {"seconds": seconds, "cpu_share": cpu / seconds}


def wait_gone(orchd, name, timeout=600):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, data = orchd.request("GET", f"{PODS}?labelSelector=app%3D{name}&limit=1")
        if not json.loads(data).get("items"):
            return
        time.sleep(0.5)
    raise SystemExit(f"the pods of {name} were not deleted in {timeout}s")


def daemonset(name, image):
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{
                                      "name": "c", "image": image,
                                      "resources": {"requests": {"cpu": "10m"}}}]}}}}


def daemonset_round(orchd, args, round_number):
    settle(orchd)
    name = f"bench-ds-{round_number}"
    started = time.monotonic()
    # Images of this round: every node pulls them (1 s each in the simulated runtime).
    image = f"registry.example/bench-ds-{round_number}"
    status, data = orchd.request("POST", DAEMONSETS, daemonset(name, f"{image}:1"))
    if status != 201:
        raise SystemExit(f"daemonset create failed: {status} {data[:200]!r}")
    created = wait_until(orchd, f"{DAEMONSETS}/{name}", rolled_out,
                         f"daemonset {name} rolling out") - started
    started = time.monotonic()
    status, data = orchd.request(
        "PATCH", f"{DAEMONSETS}/{name}",
        {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": f"{image}:2"}]}}}},
        content_type="application/strategic-merge-patch+json")
    if status != 200:
        raise SystemExit(f"daemonset update failed: {status} {data[:200]!r}")
    updated = wait_until(orchd, f"{DAEMONSETS}/{name}", rolled_out,
                         f"daemonset {name} rolling its update out") - started
    orchd.request("DELETE", f"{DAEMONSETS}/{name}?propagationPolicy=Foreground")
    wait_gone(orchd, name)
    return {"rollout_secs": created, "update_secs": updated}


def job(name):
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"metadata": {"labels": {"group": "jobs"}},
                                  "spec": {"restartPolicy": "Never", "containers": [{
                                      "name": "c", "image": "registry.example/bench:1",
                                      "resources": {"requests": {"cpu": "10m"}}}]}}}}


def jobs_round(orchd, args, workdir, round_number):
    settle(orchd)
    creates = pod_creates(orchd, args, workdir)
    settle(orchd)
    prefix = f"j{round_number}-"
    status, data = orchd.request("GET", JOBS + "?limit=1")
    counter = WatchCounter(orchd, JOBS, prefix, json.loads(data)["metadata"]["resourceVersion"],
                           complete)
    counter.target = args.jobs
    started = time.monotonic()
    post_all(orchd, ((JOBS, job(f"{prefix}{i:05d}")) for i in range(args.jobs)), threads=16)
    if not counter.done.wait(900):
        raise SystemExit(f"only {len(counter.seen)} of {args.jobs} jobs completed")
    counter.close()
    completed = args.jobs / (counter.last - started)
    return {"creates_per_s": creates["rps"], "jobs_per_s": completed,
            "ratio": completed / creates["rps"], "secs": counter.last - started}


def workload_cases(workdir, args, report, selected):
    """
    The workload cases on one orchd (with its own node) and --sim-nodes
    simulated nodes in a process of their own, as a cluster's nodes are
    not in the API server's process.
    """
    print(f"workloads: one orchd and {args.sim_nodes} simulated nodes", file=sys.stderr)
    orchd = Orchd(workdir)
    sim = None
    try:
        sim = SimulatedNodes(orchd, workdir, args.sim_nodes)
        orchd.request("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        wait_nodes(orchd, args.sim_nodes + 1)
        cases = {"scheduling": lambda n: scheduling_round(orchd, args, workdir, n),
                 "deployment": lambda n: deployment_round(orchd, args, n),
                 "daemonset": lambda n: daemonset_round(orchd, args, n),
                 "jobs": lambda n: jobs_round(orchd, args, workdir, n)}
        for case, one_round in cases.items():
            if case not in selected:
                continue
            runs = []
            for round_number in range(args.rounds):
                print(f"{case} {round_number + 1}/{args.rounds}", file=sys.stderr)
                runs.append(one_round(round_number))
            report[case] = runs
    finally:
        if sim is not None:
            sim.stop(timeout=30)
        orchd.stop()


def wait_nodes(orchd, count, timeout=300):
    """Until at least C{count} Nodes are Ready."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, data = orchd.request("GET", "/api/v1/nodes")
        ready = sum(1 for node in json.loads(data).get("items", ())
                    if any(c.get("type") == "Ready" and c.get("status") == "True"
                           for c in (node.get("status") or {}).get("conditions") or ()))
        if ready >= count:
            return
        time.sleep(0.5)
    raise SystemExit(f"fewer than {count} nodes became Ready")


def print_workloads(report):
    runs = report.get("scheduling")
    if runs:
        med = {key: statistics.median(run[key] for run in runs)
               for key in ("creates_per_s", "binds_per_s", "ratio", "cpu_ms_per_pod")}
        print(f"scheduling ({len(runs)} rounds, medians): pod creates {med['creates_per_s']:.0f}/s, "
              f"pods bound {med['binds_per_s']:.0f}/s: ratio {med['ratio']:.3f}, "
              f"orchd CPU {med['cpu_ms_per_pod']:.2f} ms per bound pod "
              f"(rounds {', '.join(format(run['ratio'], '.3f') for run in runs)}; target >= 0.5)")
    runs = report.get("deployment")
    if runs:
        seconds = statistics.median(run["seconds"] for run in runs)
        share = statistics.median(run["cpu_share"] for run in runs)
        print(f"deployment to Available ({len(runs)} rounds, medians): {seconds:.1f} s, "
              f"orchd CPU {share:.0%} of a core "
              f"(rounds {', '.join(format(run['seconds'], '.1f') for run in runs)} s)")
    runs = report.get("daemonset")
    if runs:
        rollout = statistics.median(run["rollout_secs"] for run in runs)
        update = statistics.median(run["update_secs"] for run in runs)
        print(f"daemonset ({len(runs)} rounds, medians): rolled out {rollout:.1f} s, "
              f"rolling update {update:.1f} s (rounds "
              f"{', '.join(format(run['rollout_secs'], '.1f') for run in runs)} / "
              f"{', '.join(format(run['update_secs'], '.1f') for run in runs)} s)")
    runs = report.get("jobs")
    if runs:
        med = {key: statistics.median(run[key] for run in runs)
               for key in ("creates_per_s", "jobs_per_s", "ratio")}
        print(f"jobs ({len(runs)} rounds, medians): pod creates {med['creates_per_s']:.0f}/s, "
              f"jobs completed {med['jobs_per_s']:.1f}/s: ratio {med['ratio']:.3f} "
              f"(rounds {', '.join(format(run['ratio'], '.3f') for run in runs)})")
