"""
Custom resources against ConfigMaps on one orchd: create and GET of a
custom resource holding the same ~2 KB of data as the config map, at 16
connections, alternated over the rounds; requests/s, orchd's CPU time per
request, and the ratio of the custom resource's requests/s to the config
map's (target >= 0.8 for both).

The custom resource's version has a structural schema (its data a map of
strings, a defaulted integer, a status subresource), so each create is
pruned, defaulted and validated by it, and each GET defaulted, as any
custom resource is.
"""

import json
import os
import statistics
import sys

from common import Orchd, cpu_seconds, hload, summarize

NAMESPACE = "bench-crs"
GROUP = "bench.example.com"
CRD = {
    "apiVersion": "apiextensions.orch.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"benchwidgets.{GROUP}"},
    "spec": {
        "group": GROUP, "scope": "Namespaced",
        "names": {"plural": "benchwidgets", "kind": "BenchWidget"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                    "replicas": {"type": "integer", "minimum": 0, "default": 1},
                    "data": {"type": "object", "additionalProperties": {"type": "string"}},
                }},
                "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
            }}},
        }],
    },
}
KINDS = {
    "configmap": f"/api/v1/namespaces/{NAMESPACE}/configmaps",
    "customresource": f"/apis/{GROUP}/v1/namespaces/{NAMESPACE}/benchwidgets",
}


def _bodies(workdir, template):
    """The config map and the custom resource, the same data in each, and their files."""
    objects = {
        "configmap": dict(template, metadata={"name": "bench-get"}),
        "customresource": {"apiVersion": f"{GROUP}/v1", "kind": "BenchWidget",
                           "metadata": {"name": "bench-get"},
                           "spec": {"data": template["data"]}},
    }
    paths = {}
    for kind, obj in objects.items():
        paths[kind] = os.path.join(workdir, f"{kind}.json")
        with open(paths[kind], "w") as f:
            json.dump(dict(obj, metadata={"name": "bench"}), f)
    return objects, paths


def customresource_cases(workdir, args, template, report):
    """create@16 and GET@16 of custom resources and config maps, alternated over the rounds."""
    print("customresources: custom resource against ConfigMap, create@16 and GET@16",
          file=sys.stderr)
    objects, paths = _bodies(workdir, template)
    orchd = Orchd(workdir, "--no-orchlet")
    results = {}
    try:
        orchd.request("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        status, data = orchd.request("POST", "/apis/apiextensions.orch.io/v1/"
                                             "customresourcedefinitions", CRD)
        if status != 201:
            raise SystemExit(f"customresources setup failed: {status} {data[:200]!r}")
        for kind, path in KINDS.items():
            status, data = orchd.request("POST", path, objects[kind])
            if status != 201:
                raise SystemExit(f"customresources setup failed: {status} {data[:200]!r}")
        for round_number in range(args.rounds):
            print(f"customresources {round_number + 1}/{args.rounds}", file=sys.stderr)
            order = list(KINDS.items())
            if round_number % 2:
                # The store grows with every create run: alternate who goes first.
                order.reverse()
            for kind, path in order:
                for verb, url, method, body in (
                        ("create", orchd.url + path, "POST", paths[kind]),
                        ("get", orchd.url + path + "/bench-get", "GET", None)):
                    before = cpu_seconds(orchd.process.pid)
                    run = hload(orchd, url, 16, args.secs, method, body,
                                gen_name=method == "POST")
                    spent = cpu_seconds(orchd.process.pid) - before
                    run["cpu_us"] = spent / max(run["requests"], 1) * 1e6
                    results.setdefault(f"{verb}-{kind}", []).append(run)
    finally:
        orchd.stop()
    summary = {key: dict(summarize(runs), cpu_us=statistics.median(r["cpu_us"] for r in runs))
               for key, runs in results.items()}
    for verb in ("create", "get"):
        mine, base = results[f"{verb}-customresource"], results[f"{verb}-configmap"]
        summary[f"{verb}_ratio"] = round(summary[f"{verb}-customresource"]["rps"]
                                         / summary[f"{verb}-configmap"]["rps"], 3)
        summary[f"{verb}_ratio_rounds"] = [round(a["rps"] / b["rps"], 3)
                                           for a, b in zip(mine, base)]
    report["customresources"] = summary


def print_customresources(report):
    if "customresources" not in report:
        return
    c = report["customresources"]
    print(f"custom resources against ConfigMaps (16 connections, ~2 KB, medians of "
          f"{report['rounds']} rounds):")
    for verb in ("create", "get"):
        cr, cm = c[f"{verb}-customresource"], c[f"{verb}-configmap"]
        errors = sum(r["errors"] + r["non_2xx"] for r in (cr, cm))
        rounds = c[f"{verb}_ratio_rounds"]
        print(f"       {verb}@16: custom resource {cr['rps']:.0f}/s (p50 {cr['p50_ms']:.2f} ms, "
              f"p99 {cr['p99_ms']:.2f} ms, {cr['cpu_us']:.0f} us CPU), ConfigMap "
              f"{cm['rps']:.0f}/s (p50 {cm['p50_ms']:.2f} ms, p99 {cm['p99_ms']:.2f} ms, "
              f"{cm['cpu_us']:.0f} us CPU): ratio {c[f'{verb}_ratio']:.3f} (rounds "
              f"{', '.join(f'{r:.3f}' for r in rounds)}; target >= 0.8)"
              + (f"; errors {errors}" if errors else ""))
