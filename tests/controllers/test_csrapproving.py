"""
The node certificate approver, with RBAC and the bootstrap policy deciding
who may have node client certificates approved, and the node itself alone
its serving certificates.
"""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.kinds import CERTIFICATES
from orchd.app.bootstrappolicy import reconcile_bootstrap_policy
from orchd.auth.user import AUTHENTICATED, UserInfo
from orchd.controllers.csrapproving import CSRApprovingController
from orchd.registry.context import RequestContext
from tests.csrsupport import CSRS, client_csr, node_csr, serving_csr
from tests.support import ADMIN, APIHarness

BOOTSTRAPPER = UserInfo("system:bootstrap:abcdef",
                        ("system:bootstrappers", "system:bootstrappers:workers", AUTHENTICATED))
NODE = UserInfo("system:node:n1", ("system:nodes", AUTHENTICATED))
ALICE = UserInfo("alice", ("devs", AUTHENTICATED))


class ApproverTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness(rbac=True)
        self.api.run(reconcile_bootstrap_policy(self.api.catalog))
        self.start()

    def start(self):
        self.controller = CSRApprovingController(self.api.catalog, self.api.clock,
                                                 self.api.authorizer)
        self.controller.startService()
        self.addCleanup(self.controller.stopService)
        self.successResultOf(self.controller.started)

    def submit(self, user, body):
        """Create C{body} over HTTP as C{user}; the request as stored afterwards."""
        code, csr, _ = self.api.as_user(user).call("POST", CSRS, body)
        self.assertEqual(code, 201, csr)
        return self.get(body["metadata"]["name"])

    def submit_direct(self, user, body):
        """Create C{body} as C{user} past authorization (the Node authorizer is not here)."""
        csrs = self.api.catalog.resource(CERTIFICATES, "certificatesigningrequests")
        self.api.run(csrs.create(RequestContext(user), body))
        return self.get(body["metadata"]["name"])

    def get(self, name):
        self.api.clock.advance(1)
        return self.api.as_user(ADMIN).call("GET", f"{CSRS}/{name}")[1]

    def conditions(self, csr):
        return (csr.get("status") or {}).get("conditions") or []

    def test_bootstrapper_node_request_approved(self):
        """A bootstrap token's user asking for a node certificate is approved at once."""
        csr = self.submit(BOOTSTRAPPER, node_csr("node-csr-1", "n1")[0])
        self.assertEqual(csr["spec"]["username"], BOOTSTRAPPER.name)
        [approved] = self.conditions(csr)
        self.assertEqual((approved["type"], approved["status"], approved["reason"]),
                         ("Approved", "True", "AutoApproved"))
        self.assertEqual(approved["message"],
                         "Auto approving orchlet client certificate after SubjectAccessReview.")
        self.assertTrue(approved["lastUpdateTime"].endswith("Z"))

    def test_bootstrapper_other_requests_wait(self):
        """A bootstrapper's requests that are not exactly node client requests wait."""
        bodies = [
            client_csr("plain-client", "system:node:n1", ["system:nodes"])[0],
            client_csr("other-cn", "alice", ["system:nodes"],
                       signer="orch.io/kube-apiserver-client-orchlet",
                       usages=("digital signature", "client auth"))[0],
            client_csr("other-group", "system:node:n1", ["system:nodes", "devs"],
                       signer="orch.io/kube-apiserver-client-orchlet",
                       usages=("digital signature", "client auth"))[0],
            client_csr("with-names", "system:node:n1", ["system:nodes"],
                       signer="orch.io/kube-apiserver-client-orchlet",
                       usages=("digital signature", "client auth"), dns_names=["n1"])[0],
        ]
        for body in bodies:
            csr = self.submit(BOOTSTRAPPER, body)
            self.assertEqual(self.conditions(csr), [], body["metadata"]["name"])

    def test_other_users_wait(self):
        """Someone neither bootstrapper nor the node itself waits for a person."""
        csr = self.submit_direct(ALICE, node_csr("alice-node", "n1")[0])
        self.assertEqual(self.conditions(csr), [])

    def test_node_renews_its_own(self):
        """A node's request for its own name is approved; for another node's, not."""
        own = self.submit_direct(NODE, node_csr("own", "n1")[0])
        self.assertEqual(self.conditions(own)[0]["message"],
                         "Auto approving self orchlet client certificate after "
                         "SubjectAccessReview.")
        other = self.submit_direct(NODE, node_csr("other", "n2")[0])
        self.assertEqual(self.conditions(other), [])

    def test_decided_requests_left_alone(self):
        """A request denied before the approver saw it stays denied."""
        self.controller.stopService()
        csr = self.submit(BOOTSTRAPPER, node_csr("denied", "n1")[0])
        csr["status"] = {"conditions": [{"type": "Denied", "status": "True",
                                         "reason": "ByHand"}]}
        code, obj, _ = self.api.as_user(ADMIN).call("PUT", f"{CSRS}/denied/approval", csr)
        self.assertEqual(code, 200, obj)
        self.start()
        self.assertEqual([c["type"] for c in self.conditions(self.get("denied"))], ["Denied"])


class ServingApproverTests(SynchronousTestCase):
    setUp, start, submit, submit_direct, get, conditions = (
        ApproverTests.setUp, ApproverTests.start, ApproverTests.submit,
        ApproverTests.submit_direct, ApproverTests.get, ApproverTests.conditions)

    def reasons(self, csr):
        return [(c["type"], c["reason"]) for c in self.conditions(csr)]

    def test_node_own_names_approved(self):
        """A node asking for its name, localhost and any IPs is approved."""
        body, _ = serving_csr("own", "n1", ["n1", "localhost", "127.0.0.1", "10.1.2.3"])
        csr = self.submit_direct(NODE, body)
        self.assertEqual(csr["spec"]["username"], NODE.name)
        [approved] = self.conditions(csr)
        self.assertEqual((approved["type"], approved["reason"]), ("Approved", "AutoApproved"))
        self.assertIn("serving certificate", approved["message"])

    def test_published_host_name_approved(self):
        """A DNS name the node's Node object publishes is its own too; others are not."""
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "n1", "labels": {"orch.io/hostname": "box.lan"}},
                "status": {"addresses": [{"type": "InternalDNS", "address": "n1.internal"}]}}
        code, obj, _ = self.api.as_user(ADMIN).call("POST", "/api/v1/nodes", node)
        self.assertEqual(code, 201, obj)
        self.api.as_user(ADMIN).call("PUT", "/api/v1/nodes/n1/status", dict(obj, **{
            "status": node["status"]}))
        for name, names in (("label", ["n1", "Box.lan"]), ("address", ["n1.internal"])):
            csr = self.submit_direct(NODE, serving_csr(name, "n1", names)[0])
            self.assertEqual(self.reasons(csr), [("Approved", "AutoApproved")], name)
        csr = self.submit_direct(NODE, serving_csr("foreign", "n1", ["n1", "orchd-apiserver"])[0])
        self.assertEqual(self.conditions(csr), [])

    def test_others_wait(self):
        """Another node's names, a bootstrapper, a user in no node group: all wait."""
        cases = (
            (NODE, serving_csr("other-node", "n2")[0]),
            (NODE, serving_csr("foreign-name", "n1", ["n1", "kubernetes.default.svc"])[0]),
            (BOOTSTRAPPER, serving_csr("bootstrapper", "n1")[0]),
            (UserInfo("system:node:n1", (AUTHENTICATED,)), serving_csr("no-group", "n1")[0]),
            (NODE, serving_csr("client-usage", "n1",
                               usages=("digital signature", "server auth", "client auth"))[0]),
        )
        for user, body in cases:
            csr = self.submit_direct(user, body)
            self.assertEqual(self.conditions(csr), [], body["metadata"]["name"])

    def test_approver_role_of_controller(self):
        """The certificate controller's role may approve serving requests."""
        code, role, _ = self.api.as_user(ADMIN).call(
            "GET", "/apis/rbac.authorization.orch.io/v1/clusterroles/"
                   "system:controller:certificate-controller")
        self.assertEqual(code, 200, role)
        approve = [r for r in role["rules"] if r["verbs"] == ["approve"]]
        self.assertIn("orch.io/orchlet-serving", approve[0]["resourceNames"])
