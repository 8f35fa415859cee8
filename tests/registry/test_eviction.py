"""Evicting pods through pods/eviction: budgets spent, refused with 429, pods marked and deleted."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.proto.envelope import codec
from orchd.auth.user import AUTHENTICATED, UserInfo
from orchd.registry.eviction import MULTIPLE_BUDGETS, VIOLATION
from tests.support import ADMIN, APIHarness

PODS = "/api/v1/namespaces/default/pods"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
MERGE = b"application/merge-patch+json"
NOW = "2023-11-14T22:13:20Z"


def eviction(name="web-1", version="policy/v1", **fields):
    return dict({"apiVersion": version, "kind": "Eviction", "metadata": {"name": name}},
                **fields)


class EvictionTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def pod(self, name="web-1", phase="Running", ready=True, node="node-1", labels=None):
        body = {"metadata": {"name": name, "labels": labels or {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
        if node:
            body["spec"]["nodeName"] = node
        code, created, _ = self.api.call("POST", PODS, body)
        self.assertEqual(code, 201, created)
        status = {"phase": phase, "conditions": [
            {"type": "Ready", "status": "True" if ready else "False"}]}
        code, patched, _ = self.api.call("PATCH", f"{PODS}/{name}/status", {"status": status},
                                         content_type=MERGE)
        self.assertEqual(code, 200, patched)
        return patched

    def budget(self, name="web", allowed=1, current=2, desired=1, observed=1,
               selector=None, **spec):
        body = {"metadata": {"name": name},
                "spec": dict({"minAvailable": desired,
                              "selector": {"matchLabels": {"app": "web"}} if selector is None
                              else selector}, **spec)}
        code, created, _ = self.api.call("POST", PDBS, body)
        self.assertEqual(code, 201, created)
        status = {"observedGeneration": observed, "disruptionsAllowed": allowed,
                  "currentHealthy": current, "desiredHealthy": desired, "expectedPods": current}
        code, patched, _ = self.api.call("PATCH", f"{PDBS}/{name}/status", {"status": status},
                                         content_type=MERGE)
        self.assertEqual(code, 200, patched)
        return patched

    def evict(self, name="web-1", body=None, query=""):
        code, answer, headers = self.api.call("POST", f"{PODS}/{name}/eviction{query}",
                                              body if body is not None else eviction(name))
        return code, answer, headers

    def get(self, path):
        code, body, _ = self.api.call("GET", path)
        return body if code == 200 else None

    def test_pod_without_budget_is_deleted(self):
        """A running pod no budget selects is marked DisruptionTarget and deleted (201 Success)."""
        self.pod()
        code, answer, _ = self.evict()
        self.assertEqual((code, answer), (201, {"kind": "Status", "apiVersion": "v1",
                                                "metadata": {}, "status": "Success",
                                                "code": 201}))
        pod = self.get(f"{PODS}/web-1")
        self.assertTrue(pod["metadata"]["deletionTimestamp"])
        self.assertIn({"type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
                       "lastTransitionTime": NOW, "reason": "EvictionByEvictionAPI",
                       "message": "Eviction API: evicting"}, pod["status"]["conditions"])

    def test_budget_is_spent_before_the_pod_goes(self):
        """An allowed eviction decrements disruptionsAllowed and enters the pod in disruptedPods."""
        self.pod()
        self.budget(allowed=1)
        self.assertEqual(self.evict()[0], 201)
        status = self.get(f"{PDBS}/web")["status"]
        self.assertEqual(status["disruptionsAllowed"], 0)
        self.assertEqual(status["disruptedPods"], {"web-1": NOW})
        self.assertEqual([(c["type"], c["status"], c["reason"]) for c in status["conditions"]],
                         [("DisruptionAllowed", "False", "InsufficientPods")])
        self.assertTrue(self.get(f"{PODS}/web-1")["metadata"]["deletionTimestamp"])

    def test_budget_that_forbids_is_429(self):
        """A budget with no disruption left answers 429 with upstream's message and cause."""
        self.pod()
        self.budget(allowed=0, current=1, desired=1)
        code, answer, headers = self.evict()
        self.assertEqual(code, 429)
        self.assertEqual(answer["reason"], "TooManyRequests")
        self.assertEqual(answer["message"], VIOLATION)
        self.assertEqual(answer["message"],
                         "Cannot evict pod as it would violate the pod's disruption budget.")
        self.assertEqual(answer["details"]["causes"], [{
            "reason": "DisruptionBudget",
            "message": "The disruption budget web needs 1 healthy pods and has 1 currently"}])
        self.assertIsNone(headers.getRawHeaders(b"retry-after"))
        pod = self.get(f"{PODS}/web-1")
        self.assertNotIn("deletionTimestamp", pod["metadata"])
        self.assertNotIn("DisruptionTarget", [c["type"] for c in pod["status"]["conditions"]])

    def test_second_eviction_of_a_budget_of_one_is_refused(self):
        """Two evictions against a budget of one: the first passes, the second gets 429."""
        self.pod("web-1")
        self.pod("web-2")
        self.budget(allowed=1, current=2, desired=1)
        self.assertEqual(self.evict("web-1")[0], 201)
        self.assertEqual(self.evict("web-2")[0], 429)
        self.assertNotIn("deletionTimestamp", self.get(f"{PODS}/web-2")["metadata"])
        self.assertEqual(self.get(f"{PDBS}/web")["status"]["disruptedPods"], {"web-1": NOW})

    def test_decision_from_a_stale_budget_is_made_again(self):
        """An eviction starting from a budget as it was before another spent it gets 429."""
        self.pod("web-1")
        self.pod("web-2")
        self.budget(allowed=1, current=2, desired=1)
        budgets = self.api.catalog.resource("policy", "poddisruptionbudgets")
        key = budgets.info.key("default", "web")
        stale = budgets.cache.get(key)
        self.assertEqual(self.evict("web-1")[0], 201)
        # The second eviction reads the budget as a lagging cache would hold it.
        self.patch(budgets.cache, "get", lambda k: stale if k == key else None)
        code, answer, _ = self.evict("web-2")
        self.assertEqual((code, answer["message"]), (429, VIOLATION))
        self.assertNotIn("deletionTimestamp", self.get(f"{PODS}/web-2")["metadata"])
        status = self.get(f"{PDBS}/web")["status"]
        self.assertEqual((status["disruptionsAllowed"], status["disruptedPods"]),
                         (0, {"web-1": NOW}))

    def test_stale_budget_is_429_with_retry_after(self):
        """A budget whose observedGeneration lags its generation is 429 with Retry-After 10."""
        self.pod()
        self.budget(allowed=1, observed=0)
        code, answer, headers = self.evict()
        self.assertEqual(code, 429)
        self.assertEqual(answer["details"], {"causes": [{
            "reason": "DisruptionBudget",
            "message": "The disruption budget web is still being processed by the server."}],
            "retryAfterSeconds": 10})
        self.assertEqual(headers.getRawHeaders(b"retry-after"), [b"10"])

    def test_broken_budget_status_is_403(self):
        """A negative disruptionsAllowed, or over 2000 disruptedPods, forbids evictions (403)."""
        self.pod()
        self.budget(allowed=-1)
        code, answer, _ = self.evict()
        self.assertEqual((code, answer["message"]), (403, 'poddisruptionbudget.policy "web" is '
                                                          'forbidden: pdb disruptions allowed is '
                                                          'negative'))
        disrupted = {f"gone-{i}": NOW for i in range(2001)}
        self.api.call("PATCH", f"{PDBS}/web/status", {"status": {
            "disruptionsAllowed": 5, "disruptedPods": disrupted}}, content_type=MERGE)
        code, answer, _ = self.evict()
        self.assertEqual(code, 403)
        self.assertIn("DisruptedPods map too big", answer["message"])
        self.assertNotIn("deletionTimestamp", self.get(f"{PODS}/web-1")["metadata"])

    def test_two_budgets_are_500(self):
        """A pod two budgets select cannot be evicted (500, upstream's message)."""
        self.pod()
        self.budget("one")
        self.budget("two")
        code, answer, _ = self.evict()
        self.assertEqual((code, answer["message"]), (500, MULTIPLE_BUDGETS))
        self.assertNotIn("deletionTimestamp", self.get(f"{PODS}/web-1")["metadata"])

    def test_empty_selector_selects_nothing(self):
        """A budget with an empty selector does not guard the pod."""
        self.pod()
        self.budget(allowed=0, selector={})
        self.assertEqual(self.evict()[0], 201)

    def test_finished_and_pending_pods_ignore_budgets(self):
        """Succeeded, Failed and Pending pods are deleted even when the budget allows nothing."""
        self.budget(allowed=0)
        for name, phase in (("done", "Succeeded"), ("failed", "Failed"), ("waiting", "Pending")):
            self.pod(name, phase=phase)
            self.assertEqual(self.evict(name)[0], 201, phase)
        self.assertIsNone(self.get(f"{PODS}/done"))
        self.assertTrue(self.get(f"{PODS}/waiting")["metadata"]["deletionTimestamp"])

    def test_unready_pod_goes_when_budget_is_met(self):
        """An unready pod is evicted without spending a budget that has its healthy pods."""
        self.pod(ready=False)
        self.budget(allowed=0, current=2, desired=2)
        self.assertEqual(self.evict()[0], 201)
        self.assertEqual(self.get(f"{PDBS}/web")["status"]["disruptionsAllowed"], 0)
        self.assertNotIn("disruptedPods", self.get(f"{PDBS}/web")["status"])

    def test_unready_pod_of_unmet_budget(self):
        """An unready pod of a budget short of healthy pods stays, unless AlwaysAllow."""
        self.pod("web-1", ready=False)
        self.budget(allowed=0, current=1, desired=2)
        self.assertEqual(self.evict("web-1")[0], 429)
        self.api.call("PATCH", f"{PDBS}/web", {"spec": {"unhealthyPodEvictionPolicy":
                                                        "AlwaysAllow"}}, content_type=MERGE)
        self.api.call("PATCH", f"{PDBS}/web/status", {"status": {"observedGeneration": 2}},
                      content_type=MERGE)
        self.assertEqual(self.evict("web-1")[0], 201)

    def test_dry_run_changes_nothing(self):
        """A dry-run eviction (query or deleteOptions) answers Success and writes nothing."""
        self.pod()
        self.budget(allowed=1)
        self.assertEqual(self.evict(query="?dryRun=All")[0], 201)
        self.assertEqual(self.evict(body=eviction(deleteOptions={"dryRun": ["All"]}))[0], 201)
        self.assertEqual(self.get(f"{PDBS}/web")["status"]["disruptionsAllowed"], 1)
        pod = self.get(f"{PODS}/web-1")
        self.assertNotIn("deletionTimestamp", pod["metadata"])
        self.assertEqual(len(pod["status"]["conditions"]), 1)

    def test_grace_period_zero_removes_pod(self):
        """deleteOptions.gracePeriodSeconds 0 removes a bound pod at once."""
        self.pod()
        self.assertEqual(self.evict(body=eviction(deleteOptions={"gracePeriodSeconds": 0}))[0],
                         201)
        self.assertIsNone(self.get(f"{PODS}/web-1"))

    def test_negative_grace_period_is_one_second(self):
        """A negative gracePeriodSeconds is read as 1 s, as a pod's delete reads it."""
        self.pod()
        self.assertEqual(self.evict(body=eviction(deleteOptions={"gracePeriodSeconds": -5}))[0],
                         201)
        self.assertEqual(self.get(f"{PODS}/web-1")["metadata"]["deletionGracePeriodSeconds"], 1)

    def test_preconditions(self):
        """A uid or resourceVersion precondition the pod does not meet is 409, pod untouched."""
        created = self.pod()
        for preconditions in ({"uid": "other"}, {"resourceVersion": "1"}):
            code, answer, _ = self.evict(body=eviction(deleteOptions={
                "preconditions": preconditions}))
            self.assertEqual(code, 409, answer)
            self.assertIn("Precondition failed", answer["message"])
        self.assertNotIn("deletionTimestamp", self.get(f"{PODS}/web-1")["metadata"])
        code, _, _ = self.evict(body=eviction(deleteOptions={"preconditions": {
            "uid": created["metadata"]["uid"],
            "resourceVersion": created["metadata"]["resourceVersion"]}}))
        self.assertEqual(code, 201)

    def test_v1beta1_eviction_is_accepted(self):
        """A policy/v1beta1 Eviction is taken as upstream takes it."""
        self.pod()
        self.assertEqual(self.evict(body=eviction(version="policy/v1beta1"))[0], 201)

    def test_protobuf_eviction(self):
        """A protobuf Eviction (as typed Go clients may send) evicts, answered in protobuf."""
        proto = codec()
        self.pod()
        content = b"application/vnd.kubernetes.protobuf"
        code, raw, _ = self.api.call(
            "POST", f"{PODS}/web-1/eviction",
            proto.encode(eviction(deleteOptions={"gracePeriodSeconds": 0})),
            headers={b"accept": content}, content_type=content)
        self.assertEqual(code, 201)
        self.assertEqual(proto.decode(raw)["status"], "Success")
        self.assertIsNone(self.get(f"{PODS}/web-1"))

    def test_hostile_bodies(self):
        """Malformed Evictions are 400 or 422, never a 500."""
        self.pod()
        cases = [
            (eviction("other"), 400, "name in URL does not match name in Eviction object"),
            ({"apiVersion": "policy/v1", "kind": "Eviction"}, 400, "name in URL"),
            (eviction(version="v1"), 400, "does not match the expected API version"),
            (dict(eviction(), kind="Binding"), 400, "does not match the expected kind"),
            (dict(eviction(), metadata={"name": "web-1", "namespace": "kube"}), 400,
             "namespace"),
            (dict(eviction(), metadata="web-1"), 400, "cannot unmarshal string"),
            (eviction(deleteOptions="now"), 400, "cannot unmarshal string"),
            (eviction(deleteOptions={"gracePeriodSeconds": "5"}), 422,
             'gracePeriodSeconds: Invalid value: "5": must be an integer'),
            (eviction(deleteOptions={"gracePeriodSeconds": 1.5}), 422, "must be an integer"),
            (eviction(deleteOptions={"preconditions": []}), 400, "cannot unmarshal array"),
            (eviction(deleteOptions={"preconditions": {"uid": 5}}), 400,
             "cannot unmarshal number"),
            (eviction(deleteOptions={"propagationPolicy": "Now"}), 422, "Unsupported value"),
            (eviction(deleteOptions={"dryRun": ["Some"]}), 422, "Unsupported value"),
            (eviction(deleteOptions={"dryRun": "All"}), 400, "cannot unmarshal string"),
            (eviction(deleteOptions={"orphanDependents": "yes"}), 400, "cannot unmarshal"),
        ]
        for body, code, text in cases:
            got, answer, _ = self.evict(body=body)
            self.assertEqual(got, code, (body, answer))
            self.assertIn(text, answer["message"], body)
        self.assertNotIn("deletionTimestamp", self.get(f"{PODS}/web-1")["metadata"])

    def test_missing_pod_is_404(self):
        """Evicting a pod that does not exist is 404 for the pod."""
        code, answer, _ = self.evict("nope")
        self.assertEqual((code, answer["message"]), (404, 'pods "nope" not found'))

    def test_only_create_verb(self):
        """GET of pods/eviction is 405: the subresource only takes creates."""
        self.pod()
        self.assertEqual(self.api.call("GET", f"{PODS}/web-1/eviction")[0], 405)


class NoBudgetsServedTests(SynchronousTestCase):
    def test_eviction_without_policy_group(self):
        """With policy/v1 switched off, a running pod is evicted as if no budget selected it."""
        api = APIHarness(runtime_config="policy/v1=false")
        self.assertIsNone(api.catalog.resource("policy", "poddisruptionbudgets"))
        api.call("POST", PODS, {"metadata": {"name": "web-1"}, "spec": {
            "nodeName": "node-1", "containers": [{"name": "c", "image": "nginx"}]}})
        api.call("PATCH", f"{PODS}/web-1/status", {"status": {"phase": "Running"}},
                 content_type=MERGE)
        self.assertEqual(api.call("POST", f"{PODS}/web-1/eviction", eviction())[0], 201)


class EvictionAuthorizationTests(SynchronousTestCase):
    def test_eviction_needs_create_on_pods_eviction(self):
        """Evicting is authorized as create of pods/eviction: delete of pods is not enough."""
        api = APIHarness(rbac=True)
        api.call("POST", PODS, {"metadata": {"name": "web-1"},
                                "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
        role = {"metadata": {"name": "deleter"}, "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete", "get"]}]}
        api.call("POST", "/apis/rbac.authorization.orch.io/v1/namespaces/default/roles", role)
        api.call("POST", "/apis/rbac.authorization.orch.io/v1/namespaces/default/rolebindings",
                 {"metadata": {"name": "bob"}, "subjects": [{"kind": "User", "name": "bob"}],
                  "roleRef": {"apiGroup": "rbac.authorization.orch.io", "kind": "Role",
                              "name": "deleter"}})
        api.as_user(UserInfo("bob", (AUTHENTICATED,)))
        code, answer, _ = api.call("POST", f"{PODS}/web-1/eviction", eviction())
        self.assertEqual(code, 403, answer)
        self.assertIn('cannot create resource "pods/eviction"', answer["message"])
        api.as_user(ADMIN)
        role["rules"].append({"apiGroups": [""], "resources": ["pods/eviction"],
                              "verbs": ["create"]})
        api.call("PUT", "/apis/rbac.authorization.orch.io/v1/namespaces/default/roles/deleter",
                 role)
        api.as_user(UserInfo("bob", (AUTHENTICATED,)))
        self.assertEqual(api.call("POST", f"{PODS}/web-1/eviction", eviction())[0], 201)
