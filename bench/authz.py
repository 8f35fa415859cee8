"""
The cost of authorization with a large RBAC policy.

- decisions: the policy index alone, in this process: decisions/s for a
  request the user's bindings allow and for one nothing allows, with
  --roles ClusterRoles and --bindings bindings stored besides the
  bootstrap policy, walking the index each time and repeated (answered
  from what the authorizer remembers);
- GET of one object as a user that is not an administrator (its own
  certificate; RBAC allows it through a RoleBinding) on two orchd servers
  holding the same policy, one with the default Node,RBAC and one with
  AlwaysAllow: requests/s and the ratio of the two.
"""

import os
import statistics
import sys
import time

from common import ROOT, Orchd, hload, issue_client_cert, post_all, summarize

RBAC = "rbac.authorization.orch.io"
CLUSTER_ROLES = f"/apis/{RBAC}/v1/clusterroles"
CLUSTER_BINDINGS = f"/apis/{RBAC}/v1/clusterrolebindings"
ROLE_BINDINGS = f"/apis/{RBAC}/v1/namespaces/default/rolebindings"
USER, GROUP = "bench-user", "bench-group"
GET_PATH = "/api/v1/namespaces/default/configmaps/bench-get"


def _subject(kind, name):
    return {"kind": kind, "name": name, "apiGroup": RBAC}


def _binding(name, role, subjects):
    return {"metadata": {"name": name},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
            "subjects": subjects}


def policy(roles, bindings):
    """
    C{(path, body)} of the policy: C{roles} ClusterRoles of five rules each,
    C{bindings} bindings of other users and groups (half cluster-wide, half
    in namespace default), and the bench user's own: four cluster bindings
    that do not grant its GET and the RoleBinding that does.
    """
    writes = []
    for i in range(roles):
        rules = [{"verbs": ["get", "list", "watch"], "apiGroups": [f"group{i % 10}.example.com"],
                  "resources": [f"things{i}x{k}"]} for k in range(5)]
        writes.append((CLUSTER_ROLES, {"metadata": {"name": f"bench-role-{i:04d}"},
                                       "rules": rules}))
    writes.append((CLUSTER_ROLES, {"metadata": {"name": "bench-configmap-reader"}, "rules": [
        {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}]}))
    for j in range(bindings):
        role = f"bench-role-{j % roles:04d}"
        subjects = [_subject("User", f"user-{j}"), _subject("Group", f"group-{j % 100}")]
        if j % 2:
            writes.append((ROLE_BINDINGS, _binding(f"bench-rb-{j:05d}", role, subjects)))
        else:
            writes.append((CLUSTER_BINDINGS, _binding(f"bench-crb-{j:05d}", role, subjects)))
    for k in range(4):
        writes.append((CLUSTER_BINDINGS, _binding(f"bench-user-{k}", f"bench-role-{k:04d}",
                                                  [_subject("Group", GROUP)])))
    writes.append((ROLE_BINDINGS, _binding("bench-user-reader", "bench-configmap-reader",
                                           [_subject("User", USER)])))
    return writes


def decisions(roles, bindings, seconds=2.0):
    """
    Decisions/s of RBAC over the policy: C{{"allowed": n, "denied": n}}
    walking the index every time, and C{"allowed again"}, C{"denied again"}
    for the same request repeated (the remembered answer).
    """
    sys.path.insert(0, ROOT)
    import orjson

    from orchd.api.kinds import RBAC as GROUP_RBAC
    from orchd.api.kinds import key_prefix_of
    from orchd.auth.attributes import Attributes
    from orchd.auth.authz.rbac import RBACAuthorizer
    from orchd.auth.bootstrappolicy import bootstrap_policy
    from orchd.auth.rbac.index import PolicyIndex
    from orchd.auth.user import AUTHENTICATED, UserInfo
    from orchd.storage.memory import MemoryStore

    store = MemoryStore()
    objects = [(path.rsplit("/", 1)[1], "default" if "/namespaces/default/" in path else "",
                body) for path, body in policy(roles, bindings)]
    objects += [(resource, body["metadata"].get("namespace", ""), body)
                for resource, body in bootstrap_policy()]
    for resource, namespace, body in objects:
        if namespace:
            body["metadata"]["namespace"] = namespace
        key = key_prefix_of(GROUP_RBAC, resource) + (f"{namespace}/" if namespace else "")
        store.create(key + body["metadata"]["name"], orjson.dumps(body))
    index = PolicyIndex(store)
    index.start()       # the memory store lists and watches at once
    walking, remembering = RBACAuthorizer(index, remembered=0), RBACAuthorizer(index)
    user = UserInfo(USER, (GROUP, AUTHENTICATED))
    cases = {
        "allowed": Attributes(user, "get", api_group="", resource="configmaps",
                              namespace="default", name="bench-get"),
        "denied": Attributes(user, "delete", api_group="", resource="secrets",
                             namespace="default", name="x"),
    }
    rates = {}
    for name, attributes in cases.items():
        for authorizer, way in ((walking, ""), (remembering, " again")):
            count, began = 0, time.perf_counter()
            while time.perf_counter() - began < seconds:
                for _ in range(1000):
                    authorizer.authorize(attributes)
                count += 1000
            rates[name + way] = round(count / (time.perf_counter() - began))
    return rates


def user_identity(orchd, workdir):
    """A client certificate for the bench user from C{orchd}'s CA: C{(cert path, key path)}."""
    paths = (os.path.join(workdir, "user.crt"), os.path.join(workdir, "user.key"))
    for path, pem in zip(paths, issue_client_cert(orchd, USER, [GROUP])):
        with open(path, "w") as f:
            f.write(pem)
    return paths


def authz_cases(workdir, args, template, report):
    """Decisions/s in process, then GET as the bench user under RBAC and AlwaysAllow."""
    print(f"authz: {args.roles} ClusterRoles, {args.bindings} bindings", file=sys.stderr)
    report["authz_decisions"] = decisions(args.roles, args.bindings)
    servers = {}
    try:
        for mode in ("Node,RBAC", "AlwaysAllow"):
            place = os.path.join(workdir, mode.replace(",", "-"))
            os.mkdir(place)
            orchd = servers[mode] = Orchd(place, f"--authorization-mode={mode}")
            orchd.request("POST", "/api/v1/namespaces/default/configmaps",
                          dict(template, metadata={"name": "bench-get"}))
            post_all(orchd, policy(args.roles, args.bindings))
            orchd.identity = user_identity(orchd, place)
        # Let the stores settle (LevelDB compacts after the setup's writes).
        time.sleep(5)
        results = {}
        for round_number in range(args.rounds):
            print(f"authz {round_number + 1}/{args.rounds}", file=sys.stderr)
            order = list(servers.items())
            if round_number % 2:
                order.reverse()
            for mode, orchd in order:
                run = hload(orchd, orchd.url + GET_PATH, 16, args.secs,
                            identity=orchd.identity)
                results.setdefault(mode, []).append(run)
    finally:
        for orchd in servers.values():
            orchd.stop()
    summary = {mode: summarize(runs) for mode, runs in results.items()}
    summary["ratio"] = round(summary["Node,RBAC"]["rps"] / summary["AlwaysAllow"]["rps"], 3)
    summary["ratio_rounds"] = [round(a["rps"] / b["rps"], 3) for a, b in
                               zip(results["Node,RBAC"], results["AlwaysAllow"])]
    report["authz"] = summary
    report.update(roles=args.roles, bindings=args.bindings)


def print_authz(report):
    if "authz_decisions" in report:
        d = report["authz_decisions"]
        print(f"authz: {report['roles']} ClusterRoles, {report['bindings']} bindings: RBAC "
              f"decisions {d['allowed']:,}/s allowed, {d['denied']:,}/s denied; repeated "
              f"(remembered) {d['allowed again']:,}/s allowed, {d['denied again']:,}/s denied")
    if "authz" in report:
        a = report["authz"]
        rbac, allow = a["Node,RBAC"], a["AlwaysAllow"]
        print(f"       GET@16 as a non-admin user: Node,RBAC {rbac['rps']:.0f}/s "
              f"(p50 {rbac['p50_ms']:.2f} ms), AlwaysAllow {allow['rps']:.0f}/s "
              f"(p50 {allow['p50_ms']:.2f} ms): ratio {a['ratio']:.3f} "
              f"(rounds {', '.join(f'{r:.3f}' for r in a['ratio_rounds'])}; "
              f"median of {statistics.median(a['ratio_rounds']):.3f})"
              + (f"; errors {rbac['errors'] + rbac['non_2xx']}"
                 if rbac["errors"] + rbac["non_2xx"] else ""))
