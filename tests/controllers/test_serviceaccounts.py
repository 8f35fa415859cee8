"""The service-account controller: a C{default} account in every active namespace."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.serviceaccounts import ServiceAccountsController
from tests.support import APIHarness


def sa_path(namespace, name="default"):
    return f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}"


class ServiceAccountsControllerTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.controller = ServiceAccountsController(self.api.catalog, self.api.clock)
        self.controller.startService()
        self.addCleanup(self.controller.stopService)
        self.successResultOf(self.controller.started)
        self.api.clock.advance(1)

    def call(self, method, path, body=None):
        code, obj, _ = self.api.call(method, path, body)
        self.api.clock.advance(1)
        return code, obj

    def test_existing_namespaces(self):
        """Namespaces present at start get their account."""
        for namespace in ("default", "orch-system", "orch-public", "orch-node-lease"):
            self.assertEqual(self.call("GET", sa_path(namespace))[0], 200)

    def test_new_namespace(self):
        """A namespace created later gets one too."""
        self.call("POST", "/api/v1/namespaces", {"metadata": {"name": "team-a"}})
        code, account = self.call("GET", sa_path("team-a"))
        self.assertEqual(code, 200)
        self.assertEqual(account["metadata"]["namespace"], "team-a")

    def test_recreated_when_deleted(self):
        """A deleted C{default} account comes back, with a new uid."""
        old = self.call("GET", sa_path("default"))[1]["metadata"]["uid"]
        self.assertEqual(self.call("DELETE", sa_path("default"))[0], 200)
        code, account = self.call("GET", sa_path("default"))
        self.assertEqual(code, 200)
        self.assertNotEqual(account["metadata"]["uid"], old)

    def test_other_accounts_not_recreated(self):
        """Only C{default} is kept; other accounts stay deleted."""
        self.call("POST", "/api/v1/namespaces/default/serviceaccounts",
                  {"metadata": {"name": "robot"}})
        self.call("DELETE", sa_path("default", "robot"))
        self.assertEqual(self.call("GET", sa_path("default", "robot"))[0], 404)

    def test_terminating_namespace_left_alone(self):
        """A namespace being deleted does not get its account back."""
        self.call("POST", "/api/v1/namespaces", {"metadata": {"name": "going"}})
        self.call("DELETE", "/api/v1/namespaces/going")
        self.call("DELETE", sa_path("going"))
        self.assertEqual(self.call("GET", sa_path("going"))[0], 404)
