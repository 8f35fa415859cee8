"""The DaemonSet controller, driven through the API in memory."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.daemonnodes import should_run
from orchd.controllers.daemonset import DaemonSetController
from orchd.controllers.daemonupdate import replacements, surplus
from orchd.controllers.garbagecollector import GarbageCollector
from orchd.controllers.history import REVISION_LABEL
from tests.controllers.workloadsupport import PODS, WorkloadHarness

DS = "/apis/apps/v1/namespaces/default/daemonsets"
REVISIONS = "/apis/apps/v1/namespaces/default/controllerrevisions"
NODES = "/api/v1/nodes"


def daemon_set(name="agent", image="agent:1", strategy=None, **spec):
    labels = {"app": name}
    spec.update(selector={"matchLabels": labels},
                template={"metadata": {"labels": labels},
                          "spec": {"containers": [{"name": "c", "image": image}]}})
    if strategy is not None:
        spec["updateStrategy"] = strategy
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": spec}


def node(name, labels=None, taints=None, unschedulable=False):
    spec = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


class EligibilityTests(SynchronousTestCase):
    def test_taints_and_tolerations(self):
        """Untolerated NoSchedule keeps new pods off but old ones on; NoExecute evicts; daemon tolerations apply."""
        spec = {"containers": []}
        no_schedule = node("a", taints=[{"key": "k", "effect": "NoSchedule"}])
        no_execute = node("b", taints=[{"key": "k", "effect": "NoExecute"}])
        cordoned = node("c", taints=[{"key": "node.orch.io/unschedulable",
                                      "effect": "NoSchedule"}])
        not_ready = node("d", taints=[{"key": "node.orch.io/not-ready", "effect": "NoExecute"}])
        network = node("e", taints=[{"key": "node.orch.io/network-unavailable",
                                     "effect": "NoSchedule"}])
        self.assertEqual(should_run(spec, no_schedule), (False, True))
        self.assertEqual(should_run(spec, no_execute), (False, False))
        self.assertEqual(should_run(spec, cordoned), (True, True))
        self.assertEqual(should_run(spec, not_ready), (True, True))
        self.assertEqual(should_run(spec, network), (False, True))
        self.assertEqual(should_run(dict(spec, hostNetwork=True), network), (True, True))

    def test_selector_and_affinity(self):
        """nodeSelector, required affinity expressions and matchFields decide eligibility."""
        gpu = node("gpu-1", labels={"gpu": "yes", "size": "8"})
        plain = node("plain-1")
        selector = {"nodeSelector": {"gpu": "yes"}}
        self.assertEqual(should_run(selector, gpu), (True, True))
        self.assertEqual(should_run(selector, plain), (False, False))
        affinity = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "size", "operator": "Gt", "values": ["4"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In",
                                  "values": ["plain-1"]}]}]}}}}
        self.assertEqual(should_run(affinity, gpu), (True, True))
        self.assertEqual(should_run(affinity, plain), (True, True))
        self.assertEqual(should_run(affinity, node("other")), (False, False))
        self.assertEqual(should_run({"nodeName": "gpu-1"}, plain), (False, False))


def _pod(name, hash, ready=True, created="2026-01-01T00:00:00Z"):
    return {"metadata": {"name": name, "labels": {REVISION_LABEL: hash},
                         "creationTimestamp": created},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True" if ready else "False"}]}}


class UpdateStepTests(SynchronousTestCase):
    def test_unavailable_old_pods_use_the_budget(self):
        """An old pod that is not available is replaced first and counts against maxUnavailable."""
        per_node = [[_pod("a", "old", ready=False)], [_pod("b", "old")], [_pod("c", "old")]]
        doomed, _ = replacements(per_node, ["n1", "n2", "n3"], "new", 0, 1, 0, 0)
        self.assertEqual([p["metadata"]["name"] for p in doomed], ["a"])
        doomed, _ = replacements(per_node, ["n1", "n2", "n3"], "new", 0, 2, 0, 0)
        self.assertEqual([p["metadata"]["name"] for p in doomed], ["a", "b"])

    def test_surge_starts_new_pods_then_retires_old(self):
        """With surge, new pods start on at most maxSurge nodes; an available new pod retires the old."""
        per_node = [[_pod("a", "old")], [_pod("b", "old")]]
        doomed, nodes = replacements(per_node, ["n1", "n2"], "new", 1, 0, 0, 0)
        self.assertEqual((doomed, nodes), ([], ["n1"]))
        per_node = [[_pod("a", "old"), _pod("a2", "new")], [_pod("b", "old")]]
        doomed, nodes = replacements(per_node, ["n1", "n2"], "new", 1, 0, 0, 0)
        self.assertEqual(([p["metadata"]["name"] for p in doomed], nodes), (["a"], ["n2"]))

    def test_surplus(self):
        """Without surge only the oldest pod stays; with surge an old one stays until the new is available."""
        old = _pod("a", "old", created="2026-01-01T00:00:00Z")
        new = _pod("b", "new", ready=False, created="2026-01-01T00:01:00Z")
        self.assertEqual(surplus([new, old], "new", 0, 0, 0), [new])
        self.assertEqual(surplus([new, old], "new", 1, 0, 0), [])
        ready = _pod("b", "new", created="2026-01-01T00:01:00Z")
        self.assertEqual(surplus([ready, old], "new", 1, 0, 0), [old])


class DaemonSetTests(SynchronousTestCase):
    def setUp(self):
        self.h = WorkloadHarness(self)
        self.controller = None

    def start(self):
        if self.controller is None:
            self.controller = self.h.start(DaemonSetController(self.h.api.catalog, self.h.clock))

    def add_node(self, name, **kw):
        self.h.call("POST", NODES, node(name, **kw), 201)

    def create(self, **kw):
        self.start()
        return self.h.call("POST", DS, daemon_set(**kw), 201)

    def ds(self, name="agent"):
        return self.h.get(f"{DS}/{name}")

    def pods_by_node(self):
        found = {}
        for pod in self.h.pods():
            terms = pod["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            found.setdefault(terms[0]["matchFields"][0]["values"][0], []).append(pod)
        return found

    def bind_all(self, ready=True):
        """The scheduler and kubelet: bind pods to the nodes they name, Running (and Ready)."""
        self.h.finish_deletions()
        for name, pods in self.pods_by_node().items():
            for pod in pods:
                if pod["spec"].get("nodeName") and (not ready or any(
                        c["status"] == "True" for c in pod["status"].get("conditions", []))):
                    continue
                self.h.set_pod_status(pod["metadata"]["name"], node=name, ready=ready)

    def revisions(self):
        items = self.h.get(REVISIONS)["items"]
        return sorted(items, key=lambda r: r["revision"])

    def test_one_pod_per_node(self):
        """Each node gets one pod pinned to it by affinity, with the hash and daemon tolerations."""
        for name in ("n1", "n2", "n3"):
            self.add_node(name)
        ds = self.create()
        by_node = self.pods_by_node()
        self.assertEqual(sorted(by_node), ["n1", "n2", "n3"])
        self.assertEqual([len(p) for p in by_node.values()], [1, 1, 1])
        pod = by_node["n1"][0]
        self.assertTrue(pod["metadata"]["name"].startswith("agent-"))
        revision = self.revisions()[0]
        hash = revision["metadata"]["labels"][REVISION_LABEL]
        self.assertEqual(pod["metadata"]["labels"][REVISION_LABEL], hash)
        self.assertEqual(revision["metadata"]["name"], f"agent-{hash}")
        self.assertEqual(pod["metadata"]["ownerReferences"][0]["uid"], ds["metadata"]["uid"])
        keys = {(t["key"], t["effect"]) for t in pod["spec"]["tolerations"]}
        self.assertIn(("node.orch.io/unschedulable", "NoSchedule"), keys)
        self.assertIn(("node.orch.io/not-ready", "NoExecute"), keys)
        status = self.ds()["status"]
        self.assertEqual((status["desiredNumberScheduled"], status["currentNumberScheduled"],
                          status["numberReady"], status["numberUnavailable"],
                          status["observedGeneration"]), (3, 3, 0, 3, 1))
        self.bind_all()
        status = self.ds()["status"]
        self.assertEqual((status["numberReady"], status["numberAvailable"],
                          status["updatedNumberScheduled"], status["numberMisscheduled"]),
                         (3, 3, 3, 0))
        self.assertEqual(len([e for e in self.h.events("DaemonSet")
                              if e[0] == "SuccessfulCreate"]), 3)

    def test_revision_data(self):
        """The revision holds the template as a replacing patch, the owner's annotations and revision 1."""
        self.add_node("n1")
        body = daemon_set()
        body["metadata"]["annotations"] = {"kubernetes.io/change-cause": "first"}
        self.start()
        self.h.call("POST", DS, body, 201)
        revision = self.revisions()[0]
        self.assertEqual(revision["revision"], 1)
        template = revision["data"]["spec"]["template"]
        self.assertEqual(template["$patch"], "replace")
        self.assertEqual(template["spec"]["containers"][0]["image"], "agent:1")
        self.assertEqual(revision["metadata"]["annotations"],
                         {"kubernetes.io/change-cause": "first"})
        self.assertEqual(revision["metadata"]["ownerReferences"][0]["kind"], "DaemonSet")

    def test_nodes_join_and_leave(self):
        """A node joining gets a pod; a node relabelled out of the selector loses its pod."""
        self.add_node("n1", labels={"role": "edge"})
        body = daemon_set()
        body["spec"]["template"]["spec"]["nodeSelector"] = {"role": "edge"}
        self.start()
        self.h.call("POST", DS, body, 201)
        self.assertEqual(sorted(self.pods_by_node()), ["n1"])
        self.add_node("n2", labels={"role": "edge"})
        self.add_node("n3")
        self.assertEqual(sorted(self.pods_by_node()), ["n1", "n2"])
        self.h.patch(f"{NODES}/n1", {"metadata": {"labels": {"role": None}}})
        self.h.finish_deletions()
        self.assertEqual(sorted(self.pods_by_node()), ["n2"])
        self.assertEqual(self.ds()["status"]["desiredNumberScheduled"], 1)

    def test_cordoned_node_keeps_its_pod(self):
        """A cordoned node still runs the daemon pod; an untolerated NoExecute taint removes it."""
        self.add_node("n1", unschedulable=True,
                      taints=[{"key": "node.orch.io/unschedulable", "effect": "NoSchedule"}])
        self.add_node("n2")
        self.create()
        self.assertEqual(sorted(self.pods_by_node()), ["n1", "n2"])
        self.h.patch(f"{NODES}/n2", {"spec": {"taints": [{"key": "x", "effect": "NoExecute"}]}})
        self.h.finish_deletions()
        self.assertEqual(sorted(self.pods_by_node()), ["n1"])

    def test_failed_pod_is_replaced(self):
        """A failed daemon pod is deleted with a FailedDaemonPod event and a new one created."""
        self.add_node("n1")
        self.create()
        old = self.h.pods()[0]["metadata"]["name"]
        self.h.set_pod_status(old, node="n1", phase="Failed", ready=False)
        self.h.finish_deletions()
        names = [p["metadata"]["name"] for p in self.h.pods()]
        self.assertEqual(len(names), 1)
        self.assertNotEqual(names[0], old)
        self.assertIn("FailedDaemonPod", [e[0] for e in self.h.events("DaemonSet")])

    def test_failed_pods_back_off(self):
        """A pod failing again on the same node is deleted only after a doubling wait."""
        self.add_node("n1")
        self.create()
        first = self.h.pods()[0]["metadata"]["name"]
        self.h.set_pod_status(first, node="n1", phase="Failed", ready=False)
        self.h.finish_deletions()
        second = self.h.pods()[0]["metadata"]["name"]
        self.h.set_pod_status(second, node="n1", phase="Failed", ready=False)
        self.h.finish_deletions()
        self.assertEqual(self.h.get(f"{PODS}/{second}")["status"]["phase"], "Failed")
        self.h.clock.advance(1)
        self.h.finish_deletions()
        self.assertIsNone(self.h.get(f"{PODS}/{second}"))
        third = self.h.pods()[0]["metadata"]["name"]
        self.h.set_pod_status(third, node="n1", phase="Failed", ready=False)
        self.h.clock.advance(1)
        self.h.finish_deletions()
        self.assertIsNotNone(self.h.get(f"{PODS}/{third}"))
        self.h.clock.advance(1)
        self.h.finish_deletions()
        self.assertIsNone(self.h.get(f"{PODS}/{third}"))

    def update_image(self, image):
        self.h.patch(f"{DS}/agent", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": image}]}}}})

    def images(self):
        return sorted(p["spec"]["containers"][0]["image"] for p in self.h.pods())

    def test_rolling_update_max_unavailable(self):
        """A rolling update replaces one node's pod at a time, each after the last is available."""
        for name in ("n1", "n2", "n3"):
            self.add_node(name)
        self.create()
        self.bind_all()
        self.update_image("agent:2")
        self.assertEqual(len(self.h.pods()), 2)
        self.h.finish_deletions()
        self.assertEqual(self.images(), ["agent:1", "agent:1", "agent:2"])
        self.bind_all()
        self.h.finish_deletions()
        self.assertEqual(self.images(), ["agent:1", "agent:2", "agent:2"])
        self.bind_all()
        self.h.finish_deletions()
        self.bind_all()
        self.assertEqual(self.images(), ["agent:2", "agent:2", "agent:2"])
        status = self.ds()["status"]
        self.assertEqual((status["updatedNumberScheduled"], status["numberAvailable"]), (3, 3))
        revisions = self.revisions()
        self.assertEqual([r["revision"] for r in revisions], [1, 2])

    def test_rolling_update_max_surge(self):
        """With maxSurge the new pod starts beside the old one, which goes once the new is available."""
        self.add_node("n1")
        self.create(strategy={"type": "RollingUpdate",
                              "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
        self.bind_all()
        self.update_image("agent:2")
        self.assertEqual(self.images(), ["agent:1", "agent:2"])
        self.bind_all(ready=False)
        self.assertEqual(self.images(), ["agent:1", "agent:2"])
        self.bind_all()
        self.h.finish_deletions()
        self.assertEqual(self.images(), ["agent:2"])

    def test_on_delete(self):
        """OnDelete leaves old pods until the user deletes them; the replacement is new."""
        self.add_node("n1")
        self.create(strategy={"type": "OnDelete"})
        self.bind_all()
        self.update_image("agent:2")
        self.assertEqual(self.images(), ["agent:1"])
        self.h.call("DELETE", f"{PODS}/{self.h.pods()[0]['metadata']['name']}")
        self.h.finish_deletions()
        self.assertEqual(self.images(), ["agent:2"])

    def test_rollback_renumbers_the_revision(self):
        """Going back to an earlier template reuses its revision, numbered max + 1."""
        self.add_node("n1")
        self.create()
        self.update_image("agent:2")
        self.update_image("agent:1")
        revisions = self.revisions()
        self.assertEqual(len(revisions), 2)
        self.assertEqual(revisions[-1]["revision"], 3)
        self.assertEqual(revisions[-1]["data"]["spec"]["template"]["spec"]["containers"][0][
            "image"], "agent:1")

    def test_history_limit(self):
        """Old revisions beyond revisionHistoryLimit are deleted oldest first, skipping those pods use."""
        self.add_node("n1")
        self.create(revisionHistoryLimit=1, strategy={"type": "OnDelete"})
        for i in range(2, 6):
            self.update_image(f"agent:{i}")
        images = [r["data"]["spec"]["template"]["spec"]["containers"][0]["image"]
                  for r in self.revisions()]
        # agent:1 is still used by the pod and counts towards the limit; agent:5 is current.
        self.assertEqual(images, ["agent:1", "agent:5"])

    def test_deleting_collects_pods_and_revisions(self):
        """Deleting the DaemonSet lets the garbage collector remove its pods and revisions."""
        self.add_node("n1")
        self.create()
        gc = self.h.start(GarbageCollector(self.h.api.catalog, self.h.clock))
        self.h.call("DELETE", f"{DS}/agent")
        for _ in range(5):
            self.h.clock.advance(1)
        self.h.finish_deletions()
        self.assertEqual(self.h.pods(), [])
        self.assertEqual(self.revisions(), [])
        del gc

    def test_adopts_orphans(self):
        """A matching orphan on an eligible node is adopted instead of a new pod being made."""
        self.add_node("n1")
        self.h.call("POST", PODS, {"metadata": {"name": "stray", "labels": {"app": "agent"}},
                                   "spec": {"nodeName": "n1",
                                            "containers": [{"name": "c", "image": "x"}]}}, 201)
        ds = self.create(strategy={"type": "OnDelete"})
        pods = self.h.pods()
        self.assertEqual([p["metadata"]["name"] for p in pods], ["stray"])
        self.assertEqual(pods[0]["metadata"]["ownerReferences"][0]["uid"],
                         ds["metadata"]["uid"])

    def test_malformed_placement_places_nothing(self):
        """A Gt on text matches no node; placements that validation refuses never get stored."""
        self.add_node("n1", labels={"a": "5"})
        self.start()
        body = daemon_set(name="bad")
        body["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]}]}}}
        self.h.call("POST", DS, body, 201)
        status = self.ds("bad")["status"]
        self.assertEqual((status["desiredNumberScheduled"], status["observedGeneration"]), (0, 1))
        for i, extra in enumerate([
                {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.labels", "operator": "In", "values": ["x"]}]}]}}}},
                {"nodeSelector": {"a": 5}}]):
            body = daemon_set(name=f"refused{i}")
            body["spec"]["template"]["spec"].update(extra)
            self.h.call("POST", DS, body, 422)
        self.assertEqual(self.h.pods(), [])

    def test_adopts_orphan_revisions(self):
        """A matching orphan revision is adopted, labelled with its hash, and numbered below the current."""
        self.add_node("n1")
        self.h.call("POST", REVISIONS, {
            "apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": "agent-old", "labels": {"app": "agent"}},
            "data": {"spec": {"template": {"$patch": "replace", "metadata": {
                "labels": {"app": "agent"}}, "spec": {"containers": [
                    {"name": "c", "image": "agent:0"}]}}}},
            "revision": 5}, 201)
        ds = self.create()
        old, current = self.revisions()
        self.assertEqual((old["metadata"]["name"], old["revision"], current["revision"]),
                         ("agent-old", 5, 6))
        self.assertEqual(old["metadata"]["labels"][REVISION_LABEL], "old")
        self.assertEqual(old["metadata"]["ownerReferences"][0]["uid"], ds["metadata"]["uid"])
