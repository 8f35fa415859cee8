# -*- test-case-name: tests.integration.test_serviceaccount_tokens -*-
"""Bound service-account tokens end to end: request, use, review, and the pod's deletion."""

import os

from treq.client import HTTPClient
from twisted.internet import reactor, utils
from twisted.trial.unittest import SkipTest, TestCase
from twisted.web.client import Agent, HTTPConnectionPool

from orchd.client.orchconfig import load_orchconfig
from orchd.tls.client import ClientTLSPolicy
from tests.integration.support import RunningControlPlane, kubectl

AUTHN = "authentication.orch.io/v1"
NS = "/api/v1/namespaces/team"
EXTRA = "authentication.orch.io/"


class ServiceAccountTokenTests(TestCase):
    timeout = 60

    async def setUp(self):
        self.server = await RunningControlPlane(self).start()
        pool = HTTPConnectionPool(reactor, persistent=False)
        ca = load_orchconfig(self.server.plane.pki.admin_orchconfig_path).ca_pem
        # No client certificate: the bearer token is the only credential.
        self.bare = HTTPClient(Agent(reactor, contextFactory=ClientTLSPolicy(ca), pool=pool))
        await self.created("POST", "/api/v1/namespaces", {"metadata": {"name": "team"}})
        self.sa = await self.created("POST", f"{NS}/serviceaccounts", {"metadata": {"name": "bot"}})

    async def created(self, method, path, body):
        code, obj = await self.server.call(method, path, body)
        self.assertEqual(code, 201, obj)
        return obj

    async def as_token(self, method, path, token, body=None):
        return await self.server.call(method, path, body, client=self.bare,
                                      headers={b"authorization": [f"Bearer {token}".encode()]})

    async def test_pod_bound_token(self):
        """A pod-bound token authenticates and reviews as the account until the pod goes."""
        pod = await self.created("POST", f"{NS}/pods", {
            "metadata": {"name": "worker"},
            "spec": {"serviceAccountName": "bot",
                     "containers": [{"name": "main", "image": "busybox"}]}})
        request = await self.created("POST", f"{NS}/serviceaccounts/bot/token", {
            "apiVersion": AUTHN, "kind": "TokenRequest",
            "spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "worker",
                                        "uid": pod["metadata"]["uid"]}}})
        token = request["status"]["token"]
        self.assertEqual(request["spec"]["expirationSeconds"], 3600)

        code, review = await self.as_token("POST", f"/apis/{AUTHN}/selfsubjectreviews", token, {
            "apiVersion": AUTHN, "kind": "SelfSubjectReview"})
        self.assertEqual(code, 201, review)
        user = review["status"]["userInfo"]
        self.assertEqual(user["username"], "system:serviceaccount:team:bot")
        self.assertEqual(user["uid"], self.sa["metadata"]["uid"])
        self.assertIn("system:serviceaccounts:team", user["groups"])
        self.assertEqual(user["extra"][EXTRA + "pod-name"], ["worker"])
        self.assertEqual(user["extra"][EXTRA + "pod-uid"], [pod["metadata"]["uid"]])

        code, review = await self.server.call("POST", f"/apis/{AUTHN}/tokenreviews", {
            "apiVersion": AUTHN, "kind": "TokenReview", "spec": {"token": token}})
        self.assertEqual(code, 201, review)
        self.assertTrue(review["status"]["authenticated"], review)
        self.assertEqual(review["status"]["user"]["username"], "system:serviceaccount:team:bot")

        code, gone = await self.server.call("DELETE", f"{NS}/pods/worker?gracePeriodSeconds=0")
        self.assertEqual(code, 200, gone)
        code, body = await self.as_token("POST", f"/apis/{AUTHN}/selfsubjectreviews", token, {
            "apiVersion": AUTHN, "kind": "SelfSubjectReview"})
        self.assertEqual(code, 401, body)
        code, review = await self.server.call("POST", f"/apis/{AUTHN}/tokenreviews", {
            "apiVersion": AUTHN, "kind": "TokenReview", "spec": {"token": token}})
        self.assertEqual(review["status"], {"authenticated": False,
                                            "error": "Token has been invalidated"})

    async def test_kubectl_create_token(self):
        """C{kubectl create token} prints a token that authenticates as the account."""
        binary = kubectl()
        if binary is None:
            raise SkipTest("kubectl is not installed")
        home = os.path.abspath(self.mktemp())
        os.makedirs(home)
        argv = ["--kubeconfig", self.server.plane.pki.admin_orchconfig_path, "-n", "team",
                "create", "token", "bot", "--duration", "20m"]
        out, err, code = await utils.getProcessOutputAndValue(
            binary, argv, env={"HOME": home, "PATH": os.environ.get("PATH", "")})
        self.assertEqual(code, 0, err.decode())
        token = out.decode().strip()
        code, review = await self.as_token("POST", f"/apis/{AUTHN}/selfsubjectreviews", token, {
            "apiVersion": AUTHN, "kind": "SelfSubjectReview"})
        self.assertEqual(code, 201, review)
        self.assertEqual(review["status"]["userInfo"]["username"],
                         "system:serviceaccount:team:bot")
