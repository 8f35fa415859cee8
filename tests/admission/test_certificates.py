"""Approving needs approve on the signer, signing needs sign, and no masters client certs."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.admission.certificates import (
    CertificateApproval, CertificateSigning, CertificateSubjectRestriction,
)
from orchd.auth.rbac.rules import rule
from orchd.auth.user import AUTHENTICATED, UserInfo
from tests.csrsupport import CSRS, approved, client_csr, node_csr
from tests.support import ADMIN, APIHarness

RBAC = "rbac.authorization.orch.io"
APIS = f"/apis/{RBAC}/v1"
CERTIFICATES = "certificates.orch.io"
ALICE = UserInfo("alice", ("devs", AUTHENTICATED))


class LateAuthorizer:
    """The harness's authorizer, which exists only once the harness does."""

    target = None

    def authorize(self, attributes):
        return self.target.authorize(attributes)


class SignerRightsTests(SynchronousTestCase):
    def setUp(self):
        late = LateAuthorizer()
        self.api = APIHarness(rbac=True, plugins=(
            CertificateApproval(late), CertificateSigning(late),
            CertificateSubjectRestriction()))
        late.target = self.api.authorizer
        # alice may read and write requests and both subresources, nothing about signers.
        self.grant("csr-writer", rule(["get", "create", "update"], [CERTIFICATES],
                                      ["certificatesigningrequests", "certificatesigningrequests/approval",
                                       "certificatesigningrequests/status"]))
        self.csr = self.admin("POST", CSRS, client_csr("c", "alice", ["devs"])[0])

    def admin(self, method, path, body=None):
        code, obj, _ = self.api.as_user(ADMIN).call(method, path, body)
        self.assertIn(code, (200, 201), obj)
        return obj

    def grant(self, name, *rules):
        self.admin("POST", f"{APIS}/clusterroles",
                   {"metadata": {"name": name}, "rules": list(rules)})
        self.admin("POST", f"{APIS}/clusterrolebindings", {
            "metadata": {"name": f"alice-{name}"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "User", "apiGroup": RBAC, "name": "alice"}]})

    def alice(self, method, path, body=None):
        return self.api.as_user(ALICE).call(method, path, body)[:2]

    def test_approval_needs_approve(self):
        """Without approve on the signer alice cannot approve; with it she can."""
        code, obj = self.alice("PUT", f"{CSRS}/c/approval", approved(self.csr))
        self.assertEqual(code, 403, obj)
        self.assertEqual(obj["message"],
                         f'certificatesigningrequests.{CERTIFICATES} "c" is forbidden: user not '
                         'permitted to approve requests with signerName '
                         '"orch.io/kube-apiserver-client"')
        self.grant("approver", rule(["approve"], [CERTIFICATES], ["signers"],
                                    names=["orch.io/kube-apiserver-client"]))
        code, obj = self.alice("PUT", f"{CSRS}/c/approval", approved(self.csr))
        self.assertEqual(code, 200, obj)

    def test_approval_for_other_signer_only(self):
        """approve on one signer does not cover another; the domain wildcard covers all."""
        self.grant("node-approver", rule(["approve"], [CERTIFICATES], ["signers"],
                                         names=["orch.io/kube-apiserver-client-orchlet"]))
        self.assertEqual(self.alice("PUT", f"{CSRS}/c/approval", approved(self.csr))[0], 403)
        self.grant("domain-approver", rule(["approve"], [CERTIFICATES], ["signers"],
                                           names=["orch.io/*"]))
        self.assertEqual(self.alice("PUT", f"{CSRS}/c/approval",
                                    approved(self.csr, "Denied"))[0], 200)

    def test_status_needs_sign(self):
        """A certificate or condition through status needs sign on the signer."""
        failed = approved(self.csr, "Failed", "Broken")
        code, obj = self.alice("PUT", f"{CSRS}/c/status", failed)
        self.assertEqual(code, 403, obj)
        self.assertIn('not permitted to sign requests with signerName', obj["message"])
        self.grant("signer", rule(["sign"], [CERTIFICATES], ["signers"],
                                  names=["orch.io/kube-apiserver-client"]))
        code, obj = self.alice("PUT", f"{CSRS}/c/status", failed)
        self.assertEqual(code, 200, obj)
        self.assertEqual([c["type"] for c in obj["status"]["conditions"]], ["Failed"])

    def test_status_keeps_approval(self):
        """Approved and Denied cannot be set, or removed, through status."""
        self.grant("signer", rule(["sign"], [CERTIFICATES], ["signers"], names=["orch.io/*"]))
        self.admin("PUT", f"{CSRS}/c/approval", approved(self.csr))
        current = self.admin("GET", f"{CSRS}/c")
        code, obj = self.alice("PUT", f"{CSRS}/c/status",
                               dict(current, status={"conditions": []}))
        self.assertEqual(code, 200, obj)
        self.assertEqual([c["type"] for c in obj["status"]["conditions"]], ["Approved"])

    def test_masters_client_certificates_refused(self):
        """Nobody, not even an administrator, requests an API client cert for system:masters."""
        body, _ = client_csr("root", "mallory", ["system:masters"])
        code, obj, _ = self.api.as_user(ADMIN).call("POST", CSRS, body)
        self.assertEqual(code, 403, obj)
        self.assertIn("use of orch.io/kube-apiserver-client signer with system:masters group "
                      "is not allowed", obj["message"])
        other, _ = client_csr("elsewhere", "mallory", ["system:masters"],
                              signer="example.com/signer")
        self.admin("POST", CSRS, other)
        self.admin("POST", CSRS, node_csr("node", "n1")[0])
