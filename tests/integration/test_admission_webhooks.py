"""Admission webhooks end to end: a real API server calling a real HTTPS webhook server."""

import base64
import json

from twisted.internet import reactor
from twisted.internet.ssl import PrivateCertificate
from twisted.trial.unittest import TestCase
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

from orchd.tls.certs import certificate_pem, create_ca, issue_certificate, private_key_pem
from tests.integration.support import RunningControlPlane, sleep

ADMISSION = "/apis/admissionregistration.orch.io/v1"


class Webhook(Resource):
    """
    An admission webhook server: each path answers as its handler says
    (C{review request -> response fields}); it records what it was sent.
    """

    isLeaf = True

    def __init__(self):
        super().__init__()
        self.handlers = {}
        self.reviews = []

    def render_POST(self, request):
        review = json.loads(request.content.read())
        self.reviews.append((request.path.decode(), review))
        handler = self.handlers.get(request.path.decode())
        if handler is None:
            request.setResponseCode(404)
            return b""
        fields = handler(review["request"])
        if fields is NOT_DONE_YET:
            return NOT_DONE_YET     # never answers (the timeout test)
        if isinstance(fields, bytes):
            return fields           # a raw (hostile) answer
        response = {"uid": review["request"]["uid"], "allowed": True, **fields}
        request.setHeader(b"content-type", b"application/json")
        return json.dumps({"apiVersion": review["apiVersion"], "kind": "AdmissionReview",
                           "response": response}).encode()


def serve_webhook(test, names=("127.0.0.1",)):
    """A started webhook server with a CA of its own: C{(Webhook, port, base64 CA bundle)}."""
    ca, ca_key = create_ca("webhook-ca")
    cert, key = issue_certificate(ca, ca_key, "webhook", names=names, server=True)
    server = PrivateCertificate.loadPEM(certificate_pem(cert) + private_key_pem(key))
    service = Webhook()
    port = reactor.listenSSL(0, Site(service), server.options(), interface="127.0.0.1")
    test.addCleanup(port.stopListening)
    return service, port.getHost().port, base64.b64encode(certificate_pem(ca)).decode()


def configuration(kind, name, hooks):
    return {"apiVersion": "admissionregistration.orch.io/v1", "kind": kind,
            "metadata": {"name": name}, "webhooks": hooks}


def hook(name, client_config, resources=("configmaps",), operations=("CREATE",), **extra):
    spec = {"name": name, "clientConfig": client_config, "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "rules": [{"operations": list(operations), "apiGroups": [""],
                       "apiVersions": ["v1"], "resources": list(resources)}]}
    spec.update(extra)
    return spec


def configmap(name, labels=None):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": labels or {}}, "data": {"a": "1"}}


class AdmissionWebhookTests(TestCase):
    timeout = 60

    async def setUp(self):
        self.plane = await RunningControlPlane(self).start()
        self.webhook, self.port, self.bundle = serve_webhook(
            self, names=("127.0.0.1", "webhook.default.svc"))

    def url(self, path):
        return {"url": f"https://127.0.0.1:{self.port}{path}", "caBundle": self.bundle}

    async def configure(self, kind, resource, name, hooks):
        code, body = await self.plane.call("POST", f"{ADMISSION}/{resource}",
                                           configuration(kind, name, hooks))
        self.assertEqual(code, 201, body)
        return body

    async def test_denial(self):
        """A validating webhook's denial refuses the create with its message and code."""
        self.webhook.handlers["/deny"] = lambda request: {
            "allowed": request["object"]["metadata"]["name"] != "bad",
            "status": {"message": "bad names are refused", "code": 403}}
        await self.configure("ValidatingWebhookConfiguration", "validatingwebhookconfigurations",
                             "deny", [hook("deny.example.com", self.url("/deny"))])
        code, body = await self.plane.call("POST", "/api/v1/namespaces/default/configmaps",
                                           configmap("bad"))
        self.assertEqual((code, body["message"]),
                         (403, 'admission webhook "deny.example.com" denied the request: '
                               'bad names are refused'))
        code, body = await self.plane.call("POST", "/api/v1/namespaces/default/configmaps",
                                           configmap("good"))
        self.assertEqual(code, 201, body)
        path, review = self.webhook.reviews[-1]
        self.assertEqual((review["apiVersion"], review["request"]["operation"],
                          review["request"]["resource"]),
                         ("admission.orch.io/v1", "CREATE",
                          {"group": "", "version": "v1", "resource": "configmaps"}))

    async def test_mutation_and_warnings(self):
        """A mutating webhook's JSONPatch is stored, and its warnings reach the client."""
        patch = [{"op": "add", "path": "/data/added", "value": "by-webhook"}]
        self.webhook.handlers["/mutate"] = lambda request: {
            "patchType": "JSONPatch", "warnings": ["mutated by the webhook"],
            "patch": base64.b64encode(json.dumps(patch).encode()).decode()}
        await self.configure("MutatingWebhookConfiguration", "mutatingwebhookconfigurations",
                             "mutate", [hook("mutate.example.com", self.url("/mutate"))])
        response = await self.plane.client.post(
            self.plane.url + "/api/v1/namespaces/default/configmaps",
            data=json.dumps(configmap("mutated")).encode(),
            headers={b"content-type": [b"application/json"]})
        body = json.loads(await response.content())
        self.assertEqual(response.code, 201, body)
        self.assertEqual(body["data"], {"a": "1", "added": "by-webhook"})
        self.assertEqual(response.headers.getRawHeaders(b"warning"),
                         [b'299 - "mutated by the webhook"'])
        code, stored = await self.plane.call("GET",
                                             "/api/v1/namespaces/default/configmaps/mutated")
        self.assertEqual(stored["data"]["added"], "by-webhook")

    async def test_failure_policy(self):
        """A webhook that is down refuses writes under Fail and is skipped under Ignore."""
        down = {"url": "https://127.0.0.1:1/down", "caBundle": self.bundle}
        await self.configure("ValidatingWebhookConfiguration", "validatingwebhookconfigurations",
                             "down", [hook("ignore.example.com", down, failurePolicy="Ignore"),
                                      hook("fail.example.com", down, resources=("secrets",))])
        code, body = await self.plane.call("POST", "/api/v1/namespaces/default/configmaps",
                                           configmap("passes"))
        self.assertEqual(code, 201, body)
        code, body = await self.plane.call(
            "POST", "/api/v1/namespaces/default/secrets",
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "refused"}})
        self.assertEqual(code, 500, body)
        self.assertTrue(body["message"].startswith(
            'Internal error occurred: failed calling webhook "fail.example.com": '
            'failed to call webhook: Post "https://127.0.0.1:1/down": '), body["message"])

    async def test_timeout(self):
        """A webhook that does not answer within timeoutSeconds fails the write."""
        self.webhook.handlers["/slow"] = lambda request: NOT_DONE_YET
        await self.configure("ValidatingWebhookConfiguration", "validatingwebhookconfigurations",
                             "slow", [hook("slow.example.com", self.url("/slow"),
                                           timeoutSeconds=1)])
        code, body = await self.plane.call("POST", "/api/v1/namespaces/default/configmaps",
                                           configmap("late"))
        self.assertEqual(code, 500, body)
        self.assertIn("context deadline exceeded", body["message"])

    async def test_hostile_answer(self):
        """An answer larger than the bound fails the call instead of being buffered."""
        self.webhook.handlers["/huge"] = lambda request: b" " * (4 * 1024 * 1024)
        await self.configure("ValidatingWebhookConfiguration", "validatingwebhookconfigurations",
                             "huge", [hook("huge.example.com", self.url("/huge"))])
        code, body = await self.plane.call("POST", "/api/v1/namespaces/default/configmaps",
                                           configmap("flooded"))
        self.assertEqual(code, 500, body)
        self.assertIn("answer is larger than 3145728 bytes", body["message"])

    async def test_service_reference(self):
        """A webhook named by a Service is called at its endpoints, verified as <svc>.<ns>.svc."""
        service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "webhook"},
                   "spec": {"ports": [{"name": "https", "port": 443,
                                       "targetPort": self.port}]}}
        code, body = await self.plane.call("POST", "/api/v1/namespaces/default/services",
                                           service)
        self.assertEqual(code, 201, body)
        endpoints = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "webhook"},
                     "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                                  "ports": [{"name": "https", "port": self.port}]}]}
        code, body = await self.plane.call("POST", "/api/v1/namespaces/default/endpoints",
                                           endpoints)
        self.assertEqual(code, 201, body)
        self.webhook.handlers["/validate"] = lambda request: {"allowed": False}
        await self.configure("ValidatingWebhookConfiguration", "validatingwebhookconfigurations",
                             "by-service", [hook("service.example.com", {
                                 "service": {"namespace": "default", "name": "webhook",
                                             "path": "/validate"},
                                 "caBundle": self.bundle})])
        code, body = await self.plane.call("POST", "/api/v1/namespaces/default/configmaps",
                                           configmap("via-service"))
        self.assertEqual((code, body["message"]),
                         (400, 'admission webhook "service.example.com" denied the request '
                               'without explanation'))

    async def test_namespace_selector(self):
        """Only writes in namespaces whose labels match the namespaceSelector are sent."""
        for name, labels in (("watched", {"webhooks": "on"}), ("quiet", {})):
            code, body = await self.plane.call("POST", "/api/v1/namespaces", {
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "labels": labels}})
            self.assertEqual(code, 201, body)
        self.webhook.handlers["/deny"] = lambda request: {"allowed": False}
        await self.configure("ValidatingWebhookConfiguration", "validatingwebhookconfigurations",
                             "selected", [hook("selected.example.com", self.url("/deny"),
                                               namespaceSelector={
                                                   "matchLabels": {"webhooks": "on"}})])
        code, _ = await self.plane.call("POST", "/api/v1/namespaces/watched/configmaps",
                                        configmap("refused"))
        self.assertEqual(code, 400)
        code, body = await self.plane.call("POST", "/api/v1/namespaces/quiet/configmaps",
                                           configmap("passes"))
        self.assertEqual(code, 201, body)

    async def test_configurations_exempt(self):
        """A webhook matching every resource is never sent writes of the configurations."""
        self.webhook.handlers["/deny"] = lambda request: {"allowed": False}
        everything = hook("all.example.com", self.url("/deny"), resources=("*",),
                          operations=("*",))
        everything["rules"][0].update(apiGroups=["*"], apiVersions=["*"])
        await self.configure("ValidatingWebhookConfiguration", "validatingwebhookconfigurations",
                             "everything", [everything])
        code, body = await self.plane.call(
            "DELETE", f"{ADMISSION}/validatingwebhookconfigurations/everything")
        self.assertEqual(code, 200, body)
        await sleep(0)
        self.assertEqual(self.webhook.reviews, [])
