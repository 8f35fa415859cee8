"""Node restriction: a node's creates must be about itself."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.admission.noderestriction import NodeRestriction
from orchd.auth.user import AUTHENTICATED, UserInfo
from tests.support import ADMIN, APIHarness

NODE = UserInfo("system:node:n1", ("system:nodes", AUTHENTICATED))
MIRROR = {"orch.io/config.mirror": "hash"}
PODS = "/api/v1/namespaces/default/pods"


def pod(name, node="n1", annotations=MIRROR, **spec):
    return {"metadata": {"name": name, "annotations": annotations},
            "spec": dict({"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
                         **spec)}


class NodeRestrictionTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness(user=NODE, plugins=(NodeRestriction(),))

    def create(self, path, body):
        return self.api.call("POST", path, body)[:2]

    def test_mirror_pod_on_itself(self):
        """A mirror pod bound to the node itself is created."""
        self.assertEqual(self.create(PODS, pod("static"))[0], 201)

    def test_other_pods_refused(self):
        """Not a mirror pod, another node, or pods naming secrets: 403 each."""
        code, status = self.create(PODS, pod("p", annotations={}))
        self.assertEqual(code, 403)
        self.assertIn('node "n1" can only create mirror pods', status["message"])
        code, status = self.create(PODS, pod("p", node="n2"))
        self.assertEqual(code, 403)
        self.assertIn("spec.nodeName set to itself", status["message"])
        code, status = self.create(PODS, pod("p", volumes=[
            {"name": "v", "secret": {"secretName": "db"}}]))
        self.assertEqual(code, 403)
        self.assertIn('reference secrets "db"', status["message"])
        code, status = self.create(PODS, pod("p", serviceAccountName="builder"))
        self.assertEqual(code, 403)

    def test_named_after_itself(self):
        """A node may create only its own Node and Lease."""
        self.assertEqual(self.create("/api/v1/nodes", {"metadata": {"name": "n1"}})[0], 201)
        code, status = self.create("/api/v1/nodes", {"metadata": {"name": "n2"}})
        self.assertEqual(code, 403)
        self.assertIn('node "n1" is not allowed to modify node "n2"', status["message"])
        leases = "/apis/coordination.orch.io/v1/namespaces/orch-node-lease/leases"
        self.assertEqual(self.create(leases, {"metadata": {"name": "n1"}})[0], 201)
        self.assertEqual(self.create(leases, {"metadata": {"name": "n2"}})[0], 403)

    def test_other_users_unaffected(self):
        """Everyone else creates pods as before."""
        self.api.as_user(ADMIN)
        self.assertEqual(self.create(PODS, pod("p", annotations={}))[0], 201)
