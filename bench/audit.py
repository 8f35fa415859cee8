"""
The cost of observing: config map create and GET on two orchd servers, one
counting metrics (the default) and auditing every request at Metadata level
into a log file, the other with both off (--enable-metrics=false, no
policy), alternated over the rounds, then loaded at the same moment over
as many rounds again, then loaded at the same moment taking turns on the
core (L{common.create_get_rounds}), each way on a fresh pair. Both write
the request log. The metrics case measures metrics alone.
"""

import os
import statistics
import sys

from common import TURN, compare_servers, compared_server, create_get_rounds

NAMESPACE = "bench-audit"
CONFIGMAPS = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
GET_PATH = CONFIGMAPS + "/bench-get"
SERVERS = ("metadata", "off")
#: What published policies start with: no RequestReceived stage, Metadata for the rest.
POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
"""


def audit_flags(place):
    """The flags of the auditing server: the policy above and a log file beside orchd's."""
    policy = os.path.join(place, "audit-policy.yaml")
    with open(policy, "w") as f:
        f.write(POLICY)
    return ["--audit-policy-file", policy, "--audit-log-path", os.path.join(place, "audit.log")]


def audit_lines(place):
    try:
        with open(os.path.join(place, "audit.log"), "rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


#: The ways both servers are loaded (L{common.create_get_rounds}' keywords).
WAYS = (("one_after", {}), ("at_once", {"at_once": True}), ("turns", {"turns": True}))


def audit_cases(workdir, args, template, body_path, report):
    """
    create@16 and GET@16 of config maps on both servers, in each of the
    L{WAYS}, each way on a fresh pair of servers: what one way stored (some
    100,000 config maps) makes compactions and collections that would land
    in the next way's runs, in one server's rather than both.
    """
    print("audit: metrics and a Metadata-level audit log against both off, create@16 and "
          "GET@16", file=sys.stderr)
    ways, lines = {}, 0
    for way, loading in WAYS:
        servers, places = {}, {}
        try:
            for name in SERVERS:
                place = places[name] = os.path.join(workdir, f"{way}-{name}")
                os.mkdir(place)
                flags = audit_flags(place) if name == "metadata" else ["--enable-metrics=false"]
                servers[name] = compared_server(place, flags, NAMESPACE, CONFIGMAPS, template,
                                                "audit")
            label = "audit" + {"at_once": ", loaded at once",
                               "turns": ", taking turns"}.get(way, "")
            ways[way] = create_get_rounds(servers, args, CONFIGMAPS, GET_PATH, body_path, label,
                                          **loading)
        finally:
            for orchd in servers.values():
                orchd.stop()
        # Every answered request of the auditing server is one ResponseComplete
        # line (the stop drains the writer's queue first).
        lines += audit_lines(places["metadata"])
    summary = compare_servers(ways["one_after"], "metadata", "off")
    # At once, and taking turns, each round's two runs saw the same machine:
    # the median of the rounds' ratios is the figure.
    for way in ("at_once", "turns"):
        compared = compare_servers(ways[way], "metadata", "off")
        for verb in ("create", "get"):
            rounds = summary[f"{verb}_{way}_rounds"] = compared[f"{verb}_ratio_rounds"]
            summary[f"{verb}_{way}_ratio"] = _median(rounds)
    summary["audit_lines"] = lines
    summary["requests"] = sum(r["requests"] for runs in ways.values()
                              for verb in ("create", "get") for r in runs[f"{verb}-metadata"])
    report["audit"] = summary


def _median(ratios):
    known = [r for r in ratios if r is not None]
    return round(statistics.median(known), 3) if known else None


def _ms(value):
    return "-" if value is None else f"{value:.2f}"


def _r(value):
    return "-" if value is None else f"{value:.3f}"


def print_audit(report):
    if "audit" not in report:
        return
    a = report["audit"]
    print(f"metrics and audit log (Metadata level to a file) against both off (16 "
          f"connections, ~2 KB config maps, medians of {report['rounds']} rounds):")
    for verb in ("create", "get"):
        on, off = a[f"{verb}-metadata"], a[f"{verb}-off"]
        errors = sum(r["errors"] + r["non_2xx"] for r in (on, off))
        rounds = a[f"{verb}_ratio_rounds"]
        print(f"       {verb}@16: observed {on['rps']:.0f}/s (p50 {_ms(on['p50_ms'])} ms, "
              f"p99 {_ms(on['p99_ms'])} ms, {on['cpu_us']:.0f} us CPU), off "
              f"{off['rps']:.0f}/s (p50 {_ms(off['p50_ms'])} ms, p99 {_ms(off['p99_ms'])} "
              f"ms, {off['cpu_us']:.0f} us CPU): ratio {_r(a[f'{verb}_ratio'])} (rounds "
              f"{', '.join(_r(r) for r in rounds)}), CPU ratio {_r(a[f'{verb}_cpu_ratio'])}; "
              f"target >= 0.9"
              + (f"; errors {errors}" if errors else ""))
        print(f"         loaded at once: ratio {_r(a[f'{verb}_at_once_ratio'])} (median of rounds "
              f"{', '.join(_r(r) for r in a[f'{verb}_at_once_rounds'])})")
        print(f"         taking turns every {TURN * 1000:.0f} ms: ratio "
              f"{_r(a[f'{verb}_turns_ratio'])} (median of rounds "
              f"{', '.join(_r(r) for r in a[f'{verb}_turns_rounds'])})")
    print(f"       audit file: {a['audit_lines']} events for {a['requests']} measured "
          f"requests (plus setup)")
