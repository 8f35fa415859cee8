"""Checking cluster-info with a bootstrap token, as a joining node does."""

import base64

import yaml
from twisted.trial.unittest import SynchronousTestCase

from orchd.tls.certs import certificate_pem, create_ca
from orchd.app.clusterinfo import cluster_info_kubeconfig
from orchd.auth.clusterinfo import detached_jws
from orchd.orchlet.bootstrap import JoinError, verify_cluster_info

TOKEN = "abcdef.0123456789abcdef"


class VerifyTests(SynchronousTestCase):
    def setUp(self):
        self.ca_pem = certificate_pem(create_ca()[0])
        self.payload = cluster_info_kubeconfig("https://10.0.0.1:6443", self.ca_pem)

    def configmap(self, signature):
        return {"data": {"kubeconfig": self.payload, "jws-kubeconfig-abcdef": signature}}

    def test_valid(self):
        server, ca = verify_cluster_info(self.configmap(detached_jws(self.payload, TOKEN)), TOKEN)
        self.assertEqual((server, ca), ("https://10.0.0.1:6443", self.ca_pem))

    def test_other_token(self):
        signed = detached_jws(self.payload, "abcdef.ffffffffffffffff")
        error = self.assertRaises(JoinError, verify_cluster_info, self.configmap(signed), TOKEN)
        self.assertIn("invalid", str(error))

    def test_tampered(self):
        signature = detached_jws(self.payload, TOKEN)
        document = yaml.safe_load(self.payload)
        document["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
            certificate_pem(create_ca()[0])).decode()
        self.payload = yaml.safe_dump(document)
        self.assertRaises(JoinError, verify_cluster_info, self.configmap(signature), TOKEN)

    def test_unsigned(self):
        error = self.assertRaises(JoinError, verify_cluster_info,
                                  {"data": {"kubeconfig": self.payload}}, TOKEN)
        self.assertIn("not signed", str(error))
