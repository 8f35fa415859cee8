"""Binding pods to nodes: pods/binding and the bindings collection, as upstream answers them."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.app.bootstrappolicy import reconcile_bootstrap_policy
from orchd.auth.user import AUTHENTICATED, UserInfo
from orchd.registry.binding import set_pod_condition
from tests.support import ADMIN, APIHarness

PODS = "/api/v1/namespaces/default/pods"
BINDINGS = "/api/v1/namespaces/default/bindings"


def pod(name="web", **spec):
    return {"metadata": {"name": name},
            "spec": dict({"containers": [{"name": "c", "image": "nginx"}]}, **spec)}


def binding(name="web", node="node-1", **meta):
    return {"apiVersion": "v1", "kind": "Binding", "metadata": dict({"name": name}, **meta),
            "target": {"kind": "Node", "name": node}}


class PodBindingTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        code, self.pod, _ = self.api.call("POST", PODS, pod())
        self.assertEqual(code, 201)

    def bind(self, body, path=PODS + "/web/binding"):
        code, answer, _ = self.api.call("POST", path, body)
        return code, answer

    def stored(self, name="web"):
        return self.api.call("GET", f"{PODS}/{name}")[1]

    def test_binding_sets_node_and_condition(self):
        """A Binding sets spec.nodeName and PodScheduled=True, and answers a Success Status (201)."""
        code, answer = self.bind(binding())
        self.assertEqual((code, answer), (201, {"kind": "Status", "apiVersion": "v1",
                                                "metadata": {}, "status": "Success",
                                                "code": 201}))
        stored = self.stored()
        self.assertEqual(stored["spec"]["nodeName"], "node-1")
        self.assertEqual(stored["status"]["conditions"], [{
            "type": "PodScheduled", "status": "True", "lastProbeTime": None,
            "lastTransitionTime": "2023-11-14T22:13:20Z"}])
        self.assertNotEqual(stored["metadata"]["resourceVersion"],
                            self.pod["metadata"]["resourceVersion"])

    def test_bound_pod_is_conflict(self):
        """Binding a pod that already has a node is 409 with upstream's message."""
        self.assertEqual(self.bind(binding())[0], 201)
        code, answer = self.bind(binding(node="node-2"))
        self.assertEqual(code, 409)
        self.assertEqual(answer["message"], 'Operation cannot be fulfilled on pods/binding "web": '
                                            'pod web is already assigned to node "node-1"')
        self.assertEqual(answer["details"], {"name": "web", "kind": "pods/binding"})
        self.assertEqual(self.stored()["spec"]["nodeName"], "node-1")

    def test_pod_being_deleted_is_conflict(self):
        """A pod held by a finalizer after its DELETE cannot be bound (409)."""
        self.api.call("POST", PODS, dict(pod("held"), metadata={
            "name": "held", "finalizers": ["example.com/hold"]}))
        self.assertEqual(self.api.call("DELETE", f"{PODS}/held")[0], 200)
        code, answer = self.bind(binding("held"), PODS + "/held/binding")
        self.assertEqual(code, 409)
        self.assertEqual(answer["message"], 'Operation cannot be fulfilled on pods/binding "held": '
                                            'pod held is being deleted, cannot be assigned to a '
                                            'host')

    def test_scheduling_gates_are_conflict(self):
        """A pod with scheduling gates is not bound (409)."""
        self.api.call("POST", PODS, pod("gated", schedulingGates=[{"name": "example.com/wait"}]))
        code, answer = self.bind(binding("gated"), PODS + "/gated/binding")
        self.assertEqual(code, 409)
        self.assertIn("pod gated has non-empty .spec.schedulingGates", answer["message"])

    def test_missing_pod_is_not_found(self):
        """Binding a pod that does not exist is 404 for the pod."""
        code, answer = self.bind(binding("ghost"), PODS + "/ghost/binding")
        self.assertEqual(code, 404)
        self.assertEqual(answer["message"], 'pods "ghost" not found')

    def test_name_mismatch_is_bad_request(self):
        """A Binding naming another pod than the URL is 400, as upstream words it."""
        code, answer = self.bind(binding("other"))
        self.assertEqual((code, answer["message"]),
                         (400, "name in URL does not match name in Binding object"))

    def test_name_defaults_to_the_url(self):
        """A Binding without a name binds the pod the URL names."""
        self.assertEqual(self.bind({"target": {"name": "node-1"}})[0], 201)
        self.assertEqual(self.stored()["spec"]["nodeName"], "node-1")

    def test_invalid_target(self):
        """A target of another kind, or without a name, is 422 with both causes."""
        code, answer = self.bind({"metadata": {"name": "web"}, "target": {"kind": "Pod"}})
        self.assertEqual(code, 422)
        self.assertEqual([(c["field"], c["reason"]) for c in answer["details"]["causes"]],
                         [("target.kind", "FieldValueNotSupported"),
                          ("target.name", "FieldValueRequired")])
        self.assertNotIn("nodeName", self.stored()["spec"])

    def test_wrongly_typed_fields_are_bad_request(self):
        """Non-string target names, and a target or annotations of the wrong type, are 400."""
        for body in ({"metadata": {"name": "web"}, "target": {"name": 7}},
                     {"metadata": {"name": "web"}, "target": ["node-1"]},
                     {"metadata": {"name": "web", "annotations": {"a": 1}},
                      "target": {"name": "node-1"}},
                     {"metadata": {"name": ["web"]}, "target": {"name": "node-1"}}):
            code, answer = self.bind(body)
            self.assertEqual(code, 400, body)
            self.assertIn("json: cannot unmarshal", answer["message"])
        self.assertNotIn("nodeName", self.stored()["spec"])

    def test_namespace_mismatch_is_bad_request(self):
        """A Binding in another namespace than the URL's is 400."""
        code, _ = self.bind(binding(namespace="elsewhere"))
        self.assertEqual(code, 400)

    def test_uid_is_a_precondition(self):
        """A Binding carrying another uid than the pod's is 409; the pod's own uid binds."""
        code, answer = self.bind(binding(uid="not-the-uid"))
        self.assertEqual(code, 409)
        self.assertIn("Precondition failed: UID in precondition: not-the-uid", answer["message"])
        self.assertEqual(self.bind(binding(uid=self.pod["metadata"]["uid"]))[0], 201)

    def test_annotations_are_merged(self):
        """The Binding's annotations are added to the pod's."""
        self.api.call("POST", PODS, dict(pod("noted"), metadata={
            "name": "noted", "annotations": {"keep": "me", "over": "old"}}))
        body = binding("noted", annotations={"over": "new", "added": "yes"})
        self.assertEqual(self.bind(body, PODS + "/noted/binding")[0], 201)
        self.assertEqual(self.stored("noted")["metadata"]["annotations"],
                         {"keep": "me", "over": "new", "added": "yes"})

    def test_unschedulable_condition_is_replaced(self):
        """An earlier PodScheduled=False is replaced whole (reason and message go)."""
        self.api.call("PATCH", f"{PODS}/web/status", {"status": {"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/1 nodes are available", "lastTransitionTime": "2023-01-01T00:00:00Z"}]}},
            content_type=b"application/merge-patch+json")
        self.api.clock.advance(5)
        self.assertEqual(self.bind(binding())[0], 201)
        self.assertEqual(self.stored()["status"]["conditions"], [{
            "type": "PodScheduled", "status": "True", "lastProbeTime": None,
            "lastTransitionTime": "2023-11-14T22:13:25Z"}])

    def test_dry_run_binds_nothing(self):
        """A dry-run Binding answers Success and leaves the pod unbound."""
        code, _ = self.bind(binding(), PODS + "/web/binding?dryRun=All")
        self.assertEqual(code, 201)
        self.assertNotIn("nodeName", self.stored()["spec"])

    def test_only_create(self):
        """pods/binding takes POST only."""
        self.assertEqual(self.api.call("GET", PODS + "/web/binding")[0], 405)


class BindingsCollectionTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.api.call("POST", PODS, pod())

    def test_binding_by_name(self):
        """A POST to bindings binds the pod its metadata.name names."""
        code, answer, _ = self.api.call("POST", BINDINGS, binding())
        self.assertEqual((code, answer["status"]), (201, "Success"))
        self.assertEqual(self.api.call("GET", PODS + "/web")[1]["spec"]["nodeName"], "node-1")

    def test_missing_name(self):
        """A Binding without a name is 422."""
        code, answer, _ = self.api.call("POST", BINDINGS, {"target": {"name": "node-1"}})
        self.assertEqual(code, 422)
        self.assertEqual(answer["details"]["causes"][0]["field"], "metadata.name")

    def test_conflict(self):
        """The collection refuses a bound pod as pods/binding does."""
        self.api.call("POST", BINDINGS, binding())
        code, answer, _ = self.api.call("POST", BINDINGS, binding(node="node-2"))
        self.assertEqual(code, 409)
        self.assertIn('already assigned to node "node-1"', answer["message"])

    def test_create_only(self):
        """The collection cannot be listed."""
        self.assertEqual(self.api.call("GET", BINDINGS)[0], 405)

    def test_discovery(self):
        """/api/v1 lists bindings and pods/binding, create only, of kind Binding."""
        resources = {r["name"]: r for r in self.api.call("GET", "/api/v1")[1]["resources"]}
        for name in ("bindings", "pods/binding"):
            self.assertEqual((resources[name]["kind"], resources[name]["verbs"]),
                             ("Binding", ["create"]))


class BindingAuthorizationTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness(rbac=True)
        self.api.run(reconcile_bootstrap_policy(self.api.catalog))
        self.api.call("POST", PODS, pod())
        self.api.call("POST", PODS, pod("other"))

    def test_scheduler_may_bind(self):
        """The bootstrap policy lets system:kube-scheduler create pods/binding and bindings."""
        self.api.as_user(UserInfo("system:kube-scheduler", (AUTHENTICATED,)))
        self.assertEqual(self.api.call("POST", PODS + "/web/binding", binding())[0], 201)
        self.assertEqual(self.api.call("POST", BINDINGS, binding("other"))[0], 201)

    def test_others_may_not(self):
        """A user who may create pods but not pods/binding gets 403 and the pod stays unbound."""
        self.api.as_user(ADMIN)
        self.api.call("POST", "/apis/rbac.authorization.orch.io/v1/namespaces/default/roles", {
            "metadata": {"name": "pod-maker"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get"]}]})
        self.api.call("POST", "/apis/rbac.authorization.orch.io/v1/namespaces/default/rolebindings",
                      {"metadata": {"name": "pod-maker"},
                       "roleRef": {"apiGroup": "rbac.authorization.orch.io", "kind": "Role",
                                   "name": "pod-maker"},
                       "subjects": [{"kind": "User", "name": "bob"}]})
        self.api.as_user(UserInfo("bob", (AUTHENTICATED,)))
        code, answer, _ = self.api.call("POST", PODS + "/web/binding", binding())
        self.assertEqual(code, 403)
        self.assertIn('cannot create resource "pods/binding"', answer["message"])
        self.assertEqual(self.api.call("POST", BINDINGS, binding())[0], 403)
        self.api.as_user(ADMIN)
        self.assertNotIn("nodeName", self.api.call("GET", PODS + "/web")[1]["spec"])


class SetConditionTests(SynchronousTestCase):
    def test_same_status_keeps_transition_time(self):
        """A condition of the same status keeps its lastTransitionTime and reports no change."""
        status = {"conditions": [{"type": "PodScheduled", "status": "True",
                                  "lastTransitionTime": "t0"}]}
        changed = set_pod_condition(status, {"type": "PodScheduled", "status": "True",
                                             "lastTransitionTime": "t1"})
        self.assertFalse(changed)
        self.assertEqual(status["conditions"][0]["lastTransitionTime"], "t0")

    def test_other_conditions_stay(self):
        """Conditions of other types are left as they are, the new one appended."""
        status = {"conditions": [{"type": "Ready", "status": "False"}]}
        self.assertTrue(set_pod_condition(status, {"type": "PodScheduled", "status": "True"}))
        self.assertEqual([c["type"] for c in status["conditions"]], ["Ready", "PodScheduled"])
