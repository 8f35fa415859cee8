"""
orchd.testing.ControlPlane under trial: started on the test's reactor by
C{start}, driven with the official client from a worker thread.
"""

import os

from twisted.internet import reactor
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SkipTest, TestCase

from orchd.testing import ControlPlane, Request, start

try:
    import kubernetes
except ImportError:      # the test extra is not installed
    kubernetes = None

CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""


def _configmap(name, data=None):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": data or {"a": "1"}}


class ControlPlaneTests(TestCase):
    """A started control plane: its credentials, namespaces, records, faults and clock."""

    timeout = 60

    def setUp(self):
        if kubernetes is None:
            raise SkipTest("the kubernetes package (the test extra) is not installed")

    def core(self, cp, client=None):
        return kubernetes.client.CoreV1Api(client or cp.api_client())

    async def test_serves_admin_client(self):
        """The admin client of a started control plane lists the system namespaces."""
        cp = await start(self)
        self.assertTrue(cp.url.startswith("https://127.0.0.1:"))
        self.assertTrue(os.path.exists(cp.ca_path))
        self.assertTrue(os.path.exists(cp.kubeconfig))
        names = await deferToThread(
            lambda: [n.metadata.name for n in self.core(cp).list_namespace().items])
        self.assertIn("default", names)
        self.assertIn("orch-system", names)

    async def test_kubeconfig_names_the_server(self):
        """C{cp.kubeconfig} is an orchconfig (kubeconfig format) naming the server and admin."""
        from orchd.client.orchconfig import load_orchconfig
        cp = await start(self)
        config = load_orchconfig(cp.kubeconfig)
        self.assertEqual(config.server, cp.url)
        self.assertIn(b"PRIVATE KEY", config.client_key_pem)

    async def test_create_and_delete_namespace(self):
        """C{create_namespace} makes a fresh prefixed namespace; C{delete_namespace} marks it."""
        cp = await start(self)
        first = await cp.create_namespace()
        second = await cp.create_namespace("mine-")
        self.assertTrue(first.startswith("test-"))
        self.assertTrue(second.startswith("mine-"))
        self.assertNotEqual(first, second)
        found = await cp.wait_for("namespaces", first, lambda ns: True)
        self.assertEqual(found["metadata"]["name"], first)
        await cp.delete_namespace(first)
        await cp.delete_namespace(first)        # missing or terminating: no error
        gone = await cp.wait_for("namespaces", first,
                                 lambda ns: ns["status"].get("phase") == "Terminating")
        self.assertIn("deletionTimestamp", gone["metadata"])

    async def test_namespace_controller_when_asked(self):
        """With the namespace controller a deleted namespace goes away with its contents."""
        cp = await start(self, controllers=("namespace", "garbagecollector"))
        name = await cp.create_namespace()
        await deferToThread(self.core(cp).create_namespaced_config_map, name, _configmap("c"))
        await cp.delete_namespace(name)

        async def gone():
            try:
                await cp.plane.catalog.resource("", "namespaces").get(
                    cp.plane.catalog.system_context(), name)
            except Exception:
                return True
            return False
        await cp._poll(gone, 10, "the namespace to go")

    async def test_add_user_rbac(self):
        """A new user is refused (403) until a RoleBinding grants it, then allowed."""
        cp = await start(self)
        namespace = await cp.create_namespace()
        alice = self.core(cp, cp.add_user("alice", groups=("team",)))
        error = await self.assertFailure(
            deferToThread(alice.list_namespaced_config_map, namespace),
            kubernetes.client.ApiException)
        self.assertEqual(error.status, 403)
        rbac = kubernetes.client.RbacAuthorizationV1Api(cp.api_client())
        await deferToThread(rbac.create_namespaced_role, namespace, {
            "metadata": {"name": "read-configmaps"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                       "verbs": ["get", "list"]}]})
        await deferToThread(rbac.create_namespaced_role_binding, namespace, {
            "metadata": {"name": "alice-view"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": "read-configmaps"},
            "subjects": [{"kind": "User", "name": "alice",
                          "apiGroup": "rbac.authorization.k8s.io"}]})

        async def allowed():
            try:
                await deferToThread(alice.list_namespaced_config_map, namespace)
            except kubernetes.client.ApiException:
                return False
            return True
        await cp._poll(allowed, 10, "alice to be allowed")
        users = {r.user for r in cp.requests if r.namespace == namespace}
        self.assertIn("alice", users)

    async def test_install_crds_missing_path(self):
        """A missing CRD path raises FileNotFoundError naming it, before anything is created."""
        cp = await start(self)
        missing = os.path.join(self.mktemp(), "nope.yaml")
        error = await self.assertFailure(cp.install_crds([missing]), FileNotFoundError)
        self.assertEqual(error.filename, missing)

    async def test_install_crds_served(self):
        """Installed definitions (a folder) are Established and served when the call returns."""
        folder = self.mktemp()
        os.makedirs(folder)
        with open(os.path.join(folder, "gadget.yaml"), "w") as f:
            f.write(CRD)
        cp = await start(self)
        names = await cp.install_crds([folder])
        self.assertEqual(names, ["gadgets.example.com"])
        namespace = await cp.create_namespace()
        custom = kubernetes.client.CustomObjectsApi(cp.api_client())
        created = await deferToThread(
            custom.create_namespaced_custom_object, "example.com", "v1", namespace, "gadgets",
            {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"},
             "spec": {"size": 3}})
        self.assertEqual(created["spec"], {"size": 3})

    async def test_crds_option_installs_at_start(self):
        """C{crds=} installs its definitions before C{start} returns."""
        path = self.mktemp()
        with open(path, "w") as f:
            f.write(CRD)
        cp = await start(self, crds=[path])
        self.assertIsNotNone(cp.plane.catalog.lookup("example.com", "v1", "gadgets"))

    async def test_requests_record(self):
        """Each finished request is recorded with verb, path, user, status, body and object."""
        cp = await start(self)
        namespace = await cp.create_namespace()
        cp.clear_requests()
        api = self.core(cp)
        # The generated client sends no Content-Type on create: recorded all the same.
        await deferToThread(api.create_namespaced_config_map, namespace, _configmap("one"))
        await deferToThread(api.read_namespaced_config_map, "one", namespace)
        creates = [r for r in cp.requests if r.verb == "create"]
        self.assertEqual(len(creates), 1)
        create = creates[0]
        self.assertIsInstance(create, Request)
        self.assertEqual((create.path, create.user, create.status, create.resource,
                          create.namespace, create.name),
                         (f"/api/v1/namespaces/{namespace}/configmaps", "orch-admin", 201,
                          "configmaps", namespace, "one"))
        self.assertEqual(create.body["data"], {"a": "1"})
        self.assertEqual([r.verb for r in cp.requests], ["create", "get"])
        cp.clear_requests()
        self.assertEqual(cp.requests, [])

    async def test_fail_next(self):
        """C{fail_next} makes the next matching requests answer its code, then serving resumes."""
        cp = await start(self)
        namespace = await cp.create_namespace()
        api = self.core(cp)
        cp.fail_next("create", "configmaps", 409, times=2)
        for _ in range(2):
            error = await self.assertFailure(
                deferToThread(api.create_namespaced_config_map, namespace, _configmap("x")),
                kubernetes.client.ApiException)
            self.assertEqual(error.status, 409)
        await deferToThread(api.create_namespaced_config_map, namespace, _configmap("x"))
        cp.fail_next("get", "configmaps", 500, name="x")
        error = await self.assertFailure(
            deferToThread(api.read_namespaced_config_map, "x", namespace),
            kubernetes.client.ApiException)
        self.assertEqual(error.status, 500)
        self.assertEqual(
            [(r.verb, r.status) for r in cp.requests if r.resource == "configmaps"],
            [("create", 409), ("create", 409), ("create", 201), ("get", 500)])
        self.assertNotIn("_serve_resource", vars(cp.plane.server))

    async def test_fail_next_rejects_non_errors(self):
        """A code that is not an HTTP error status is refused at once."""
        cp = await start(self)
        self.assertRaises(ValueError, cp.fail_next, "get", "pods", 200)

    async def test_wait_for_condition_and_timeout(self):
        """C{wait_for} returns the object once a condition type is True and times out otherwise."""
        cp = await start(self)
        error = await self.assertFailure(
            cp.wait_for("namespaces", "absent", lambda ns: True, timeout=0.05), TimeoutError)
        self.assertIn("namespaces absent", str(error))
        path = self.mktemp()
        with open(path, "w") as f:
            f.write(CRD)
        await cp.install_crds([path])
        crd = await cp.wait_for("customresourcedefinitions.apiextensions.orch.io",
                                "gadgets.example.com", "Established")
        self.assertEqual(crd["spec"]["group"], "example.com")

    async def test_advance_moves_the_test_clock(self):
        """With C{clock=True} the components read the test clock, which C{advance} moves."""
        cp = await start(self, clock=True)
        before = cp.plane.reactor.seconds()
        fired = []
        cp.plane.reactor.callLater(30, fired.append, True)
        await cp.advance(29)
        self.assertEqual(fired, [])
        await cp.advance(1)
        self.assertEqual(fired, [True])
        self.assertEqual(cp.plane.reactor.seconds(), before + 30)
        namespace = await cp.create_namespace()        # the network still runs
        self.assertTrue(namespace)

    async def test_advance_expires_tokens(self):
        """On a test clock a bound token stops working once advanced past expiry and leeway."""
        cp = await start(self, clock=True)
        api = self.core(cp)
        await deferToThread(api.create_namespaced_service_account, "default",
                            {"metadata": {"name": "robot"}})
        request = await deferToThread(
            api.create_namespaced_service_account_token, "robot", "default",
            {"spec": {"expirationSeconds": 600}})
        configuration = kubernetes.client.Configuration()
        configuration.host = cp.url
        configuration.ssl_ca_cert = cp.ca_path
        configuration.api_key = {"authorization": "Bearer " + request.status.token}
        robot = self.core(cp, kubernetes.client.ApiClient(configuration))

        async def code():
            try:
                await deferToThread(robot.list_namespaced_pod, "default")
            except kubernetes.client.ApiException as e:
                return e.status
            return 200
        self.assertEqual(await code(), 403)          # authenticated, not allowed
        await cp.advance(600 + 59)                    # within the allowed clock skew (60 s)
        self.assertEqual(await code(), 403)
        await cp.advance(2)
        self.assertEqual(await code(), 401)

    async def test_advance_needs_clock(self):
        """C{advance} without C{clock=True} is an error."""
        cp = await start(self)
        self.assertRaises(RuntimeError, cp.advance, 1)

    async def test_two_control_planes_are_separate(self):
        """Two control planes in one process have their own ports and stores."""
        first = await start(self)
        second = await start(self)
        self.assertNotEqual(first.url, second.url)
        name = await first.create_namespace()
        error = await self.assertFailure(
            second.wait_for("namespaces", name, lambda ns: True, timeout=0.05), TimeoutError)
        self.assertIn(name, str(error))

    async def test_stop_removes_files(self):
        """Stopping removes the control plane's data directory; a second stop does nothing."""
        cp = ControlPlane()
        await cp._start(reactor)
        await cp._stop()
        await cp._stop()
        self.assertFalse(os.path.exists(cp.data_dir))

    async def test_install_webhooks(self):
        """A webhook configuration is pointed at a local HTTPS server that then decides writes."""
        import json

        from twisted.internet import ssl
        from twisted.web.resource import Resource
        from twisted.web.server import Site

        cp = await start(self)
        cert, key, ca = cp.webhook_certificate("127.0.0.1")
        reviews = []

        class Deny(Resource):
            isLeaf = True

            def render_POST(self, request):
                review = json.loads(request.content.read())
                reviews.append(review)
                request.setHeader(b"content-type", b"application/json")
                return json.dumps({
                    "apiVersion": review["apiVersion"], "kind": "AdmissionReview",
                    "response": {"uid": review["request"]["uid"], "allowed": False,
                                 "status": {"code": 403, "message": "not on a test day"}},
                }).encode()
        with open(cert) as c, open(key) as k:
            options = ssl.PrivateCertificate.loadPEM(c.read() + k.read()).options()
        port = reactor.listenSSL(0, Site(Deny()), options, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        names = await cp.install_webhooks([{
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "deny"},
            "webhooks": [{
                "name": "deny.example.com", "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "clientConfig": {"service": {"namespace": "x", "name": "y", "path": "/validate"}},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["configmaps"]}]}],
        }], f"https://127.0.0.1:{port.getHost().port}")
        self.assertEqual(names, ["deny"])
        namespace = await cp.create_namespace()
        error = await self.assertFailure(
            deferToThread(self.core(cp).create_namespaced_config_map, namespace,
                          _configmap("c")),
            kubernetes.client.ApiException)
        self.assertEqual(error.status, 403)
        self.assertIn("not on a test day", error.body)
        self.assertEqual(reviews[0]["request"]["name"], "c")

    async def test_kopf_login_and_webhook_certificate(self):
        """kopf credentials name the server and admin certificate; webhook files exist."""
        cp = await start(self)
        try:
            info = cp.kopf_login()
        except ImportError:
            raise SkipTest("kopf is not installed")
        self.assertEqual(info.server, cp.url)
        self.assertIn(b"BEGIN CERTIFICATE", info.certificate_data)
        cert, key, ca = cp.webhook_certificate("127.0.0.1")
        for path in (cert, key, ca):
            self.assertTrue(os.path.exists(path))
