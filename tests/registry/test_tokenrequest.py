# -*- test-case-name: tests.registry.test_tokenrequest -*-
"""TokenRequest (serviceaccounts/token) and TokenReview, through the HTTP surface."""

import jwt
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from orchd.api import codecs
from orchd.registry.catalog import IConnector
from orchd.api.meta import rfc3339
from tests.auth.test_serviceaccount import EC_KEY, sa_objects
from tests.support import SA_ISSUER, APIHarness

TOKEN = "/api/v1/namespaces/ns/serviceaccounts/build/token"
AUTHN = "authentication.orch.io"


def token_request(**spec):
    return {"apiVersion": f"{AUTHN}/v1", "kind": "TokenRequest", "spec": spec}


class TokenRequestTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness(service_account_key=(EC_KEY, "ES256"))
        self.sa, self.pod = sa_objects(self.api)

    def request(self, path=TOKEN, **spec):
        code, obj, _ = self.api.call("POST", path, token_request(**spec))
        return code, obj

    def test_defaults(self):
        """An empty spec gets an hour-long token for the API audiences."""
        code, obj = self.request()
        self.assertEqual(code, 201, obj)
        now = self.api.clock.seconds()
        self.assertEqual(obj["kind"], "TokenRequest")
        self.assertEqual(obj["metadata"]["name"], "build")
        self.assertEqual(obj["metadata"]["namespace"], "ns")
        self.assertEqual(obj["spec"], {"audiences": [SA_ISSUER], "expirationSeconds": 3600})
        self.assertEqual(obj["status"]["expirationTimestamp"], rfc3339(now + 3600))
        claims = jwt.decode(obj["status"]["token"], options={"verify_signature": False})
        self.assertEqual((claims["sub"], claims["aud"], claims["exp"]),
                         ("system:serviceaccount:ns:build", [SA_ISSUER], int(now) + 3600))

    def test_bound_to_pod(self):
        """A token bound to a pod names it, and answers to the given audience."""
        ref = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": self.pod["metadata"]["uid"]}
        code, obj = self.request(audiences=["vault"], expirationSeconds=600, boundObjectRef=ref)
        self.assertEqual(code, 201, obj)
        self.assertEqual(obj["spec"]["boundObjectRef"], ref)
        claims = jwt.decode(obj["status"]["token"], options={"verify_signature": False})
        self.assertEqual(claims["orch.io"]["pod"], {"name": "p", "uid": ref["uid"]})
        self.assertEqual(claims["aud"], ["vault"])

    def test_interface(self):
        """The serviceaccounts/token connector provides IConnector and takes TokenRequests."""
        connector = self.api.catalog.connector("", "serviceaccounts", "token")
        self.assertTrue(verifyObject(IConnector, connector))
        self.assertEqual((connector.info.group, connector.info.kind), (AUTHN, "TokenRequest"))

    def test_missing_account(self):
        """A token for an account that does not exist is 404."""
        code, obj = self.request("/api/v1/namespaces/ns/serviceaccounts/nobody/token")
        self.assertEqual((code, obj["message"]), (404, 'serviceaccounts "nobody" not found'))

    def test_lifetime_bounds(self):
        """Less than ten minutes, or more than 2^32 seconds, is 422."""
        code, obj = self.request(expirationSeconds=599)
        self.assertEqual(code, 422, obj)
        self.assertIn("may not specify a duration less than 10 minutes", obj["message"])
        self.assertEqual(obj["details"]["causes"][0]["field"], "spec.expirationSeconds")
        code, obj = self.request(expirationSeconds=(1 << 32) + 1)
        self.assertEqual(code, 422, obj)

    def test_bound_object_kinds(self):
        """Only pods, secrets and nodes bind tokens (400 for others), and they must exist."""
        code, obj = self.request(boundObjectRef={"apiVersion": "v1", "kind": "ConfigMap",
                                                 "name": "c"})
        self.assertEqual((code, obj["message"]),
                         (400, "cannot bind token to object of type /v1, Kind=ConfigMap"))
        code, obj = self.request(boundObjectRef={"apiVersion": "v1", "kind": "Secret",
                                                 "name": "missing"})
        self.assertEqual((code, obj["message"]), (404, 'secrets "missing" not found'))

    def test_bound_uid_must_match(self):
        """A uid other than the object's is a conflict: the object was recreated."""
        code, obj = self.request(boundObjectRef={"apiVersion": "v1", "kind": "Pod", "name": "p",
                                                 "uid": "stale"})
        self.assertEqual(code, 409, obj)
        self.assertIn("the UID in the bound object reference (stale) does not match",
                      obj["message"])

    def test_pod_of_another_account(self):
        """A token cannot be bound to a pod running as another account."""
        self.api.call("POST", "/api/v1/namespaces/ns/serviceaccounts",
                      {"metadata": {"name": "other"}})
        code, obj = self.request("/api/v1/namespaces/ns/serviceaccounts/other/token",
                                 boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "p"})
        self.assertEqual(code, 400, obj)
        self.assertIn('to pod running with serviceaccount "build"', obj["message"])

    def test_name_must_match(self):
        """A body naming another account is 422."""
        body = token_request()
        body["metadata"] = {"name": "other"}
        code, obj, _ = self.api.call("POST", TOKEN, body)
        self.assertEqual(code, 422, obj)

    def test_protobuf_request(self):
        """A protobuf TokenRequest, as kubectl may send, keeps its spec."""
        body = codecs.encode(token_request(audiences=["a"], expirationSeconds=1200),
                             codecs.PROTOBUF, False, False)
        code, obj, _ = self.api.call("POST", TOKEN, body, headers={b"accept": b"application/json"},
                                     content_type=codecs.PROTOBUF.encode())
        self.assertEqual(code, 201, obj)
        self.assertEqual(obj["spec"], {"audiences": ["a"], "expirationSeconds": 1200})

    def test_upstream_spelling_answered_in_kind(self):
        """A body spelled C{authentication.k8s.io/v1} (client-go) is answered in that spelling."""
        body = dict(token_request(), apiVersion="authentication.k8s.io/v1")
        code, obj, _ = self.api.call("POST", TOKEN, body)
        self.assertEqual((code, obj["apiVersion"]), (201, "authentication.k8s.io/v1"))
        code, obj = self.request()
        self.assertEqual(obj["apiVersion"], f"{AUTHN}/v1")

    def test_discovery_names_the_subresource(self):
        """Discovery lists serviceaccounts/token as taking a TokenRequest."""
        _, obj, _ = self.api.call("GET", "/api/v1")
        token = [r for r in obj["resources"] if r["name"] == "serviceaccounts/token"]
        self.assertEqual(token[0]["kind"], "TokenRequest")


class TokenReviewTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness(service_account_key=(EC_KEY, "ES256"),
                              runtime_config=f"{AUTHN}/v1beta1=true")
        self.sa, self.pod = sa_objects(self.api)
        ref = {"apiVersion": "v1", "kind": "Pod", "name": "p"}
        self.token = self.api.call("POST", TOKEN, token_request(boundObjectRef=ref))[1][
            "status"]["token"]

    def review(self, spec, version="v1"):
        code, obj, _ = self.api.call("POST", f"/apis/{AUTHN}/{version}/tokenreviews",
                                     {"apiVersion": f"{AUTHN}/{version}", "kind": "TokenReview",
                                      "spec": spec})
        return code, obj

    def test_authenticated(self):
        """A valid token reviews as its account, with the pod extras."""
        for version in ("v1", "v1beta1"):
            code, obj = self.review({"token": self.token}, version)
            self.assertEqual(code, 201, obj)
            status = obj["status"]
            self.assertTrue(status["authenticated"])
            self.assertEqual(status["audiences"], [SA_ISSUER])
            self.assertEqual(status["user"]["username"], "system:serviceaccount:ns:build")
            self.assertEqual(status["user"]["uid"], self.sa["metadata"]["uid"])
            self.assertEqual(status["user"]["extra"]["authentication.orch.io/pod-name"], ["p"])

    def test_refused(self):
        """A token nobody accepts reviews as not authenticated, with the reason."""
        code, obj = self.review({"token": "nonsense"})
        self.assertEqual((code, obj["status"]),
                         (201, {"authenticated": False, "error": "invalid bearer token"}))
        self.api.call("DELETE", "/api/v1/namespaces/ns/pods/p")
        code, obj = self.review({"token": self.token})
        self.assertEqual(obj["status"], {"authenticated": False,
                                         "error": "Token has been invalidated"})

    def test_audiences(self):
        """A review for audiences the token does not name is not authenticated."""
        code, obj = self.review({"token": self.token, "audiences": ["vault"]})
        self.assertFalse(obj["status"]["authenticated"])
        self.assertIn("is invalid for the target audiences", obj["status"]["error"])

    def test_token_required(self):
        """A review without a token is 400, as upstream."""
        code, obj = self.review({})
        self.assertEqual((code, obj["message"]),
                         (400, "token is required for TokenReview in authentication"))
