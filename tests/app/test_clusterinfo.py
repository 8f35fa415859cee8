"""The cluster-info ConfigMap written at start."""

import base64

import yaml
from twisted.trial.unittest import SynchronousTestCase

from orchd.app.clusterinfo import ensure_cluster_info
from tests.auth.bootstraptokens import CLUSTER_INFO
from tests.support import APIHarness

CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


class ClusterInfoTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def ensure(self, server="https://127.0.0.1:6443", ca=CA):
        return self.api.run(ensure_cluster_info(self.api.catalog, server, ca))

    def stored(self):
        code, body, _ = self.api.call("GET", CLUSTER_INFO)
        self.assertEqual(code, 200)
        return body["data"]

    def test_created_cluster_only(self):
        """The kubeconfig names the server and its CA, with no users or contexts."""
        self.assertTrue(self.ensure())
        config = yaml.safe_load(self.stored()["kubeconfig"])
        self.assertEqual(config["users"], [])
        self.assertEqual(config["contexts"], [])
        self.assertEqual(config["current-context"], "")
        [cluster] = config["clusters"]
        self.assertEqual(cluster["cluster"]["server"], "https://127.0.0.1:6443")
        self.assertEqual(base64.b64decode(cluster["cluster"]["certificate-authority-data"]), CA)

    def test_restart(self):
        """Unchanged, nothing is written; a new address replaces the kubeconfig and keeps other keys."""
        self.ensure()
        self.api.call("PATCH", CLUSTER_INFO, {"data": {"jws-kubeconfig-abcdef": "x..y"}},
                      content_type=b"application/merge-patch+json")
        self.assertFalse(self.ensure())
        self.assertTrue(self.ensure("https://127.0.0.1:7000"))
        data = self.stored()
        self.assertIn("https://127.0.0.1:7000", data["kubeconfig"])
        self.assertEqual(data["jws-kubeconfig-abcdef"], "x..y")
