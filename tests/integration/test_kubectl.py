"""Unmodified kubectl against orchd: get, create -f, apply -f, patch, delete, -o yaml."""

import base64
import json
import os

import yaml
from twisted.internet import utils
from twisted.trial.unittest import SkipTest, TestCase

from tests.integration.support import RunningControlPlane, kubectl, sleep

KUBECTL = kubectl()


class KubectlMixin:
    """A running control plane and a way to run kubectl against it."""

    timeout = 120
    #: Settings of the control plane the tests run against.
    server_settings = {}

    async def setUp(self):
        if KUBECTL is None:
            raise SkipTest("kubectl is not installed")
        self.server = await RunningControlPlane(self, **self.server_settings).start()
        self.home = os.path.abspath(self.mktemp())
        os.makedirs(self.home)

    async def kubectl(self, *args, stdin=None, ok=True):
        """Run kubectl; returns (exit code, stdout, stderr)."""
        argv = ["--kubeconfig", self.server.plane.pki.admin_orchconfig_path, *args]
        env = {"HOME": self.home, "PATH": os.environ.get("PATH", "")}
        if stdin is not None:
            path = os.path.join(self.home, f"input-{len(os.listdir(self.home))}.yaml")
            with open(path, "w") as f:
                f.write(stdin if isinstance(stdin, str) else yaml.safe_dump_all(stdin))
            argv = [a if a != "-" else path for a in argv]
        out, err, code = await utils.getProcessOutputAndValue(KUBECTL, argv, env=env)
        if ok:
            self.assertEqual(code, 0, f"kubectl {' '.join(args)}: {err.decode()}")
        return code, out.decode(), err.decode()

    async def get_json(self, *args):
        _, out, _ = await self.kubectl("get", *args, "-o", "json")
        return json.loads(out)


class KubectlTests(KubectlMixin, TestCase):
    """The everyday commands on the kinds the specification names."""

    async def test_api_resources_lists_every_kind(self):
        """kubectl api-resources lists every served kind."""
        _, out, _ = await self.kubectl("api-resources", "--no-headers")
        listed = {line.split()[0] for line in out.splitlines() if line.strip()}
        served = {info.resource for info in self.server.plane.catalog.served_kinds}
        self.assertEqual(served - listed, set())

    async def test_namespaces(self):
        """Namespaces: create -f, get, get -o yaml, label, delete."""
        await self.kubectl("create", "-f", "-", stdin=[
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}])
        _, out, _ = await self.kubectl("get", "namespaces")
        self.assertIn("team-a", out)
        _, out, _ = await self.kubectl("get", "namespace", "team-a", "-o", "yaml")
        ns = yaml.safe_load(out)
        self.assertEqual(ns["metadata"]["labels"]["orch.io/metadata.name"], "team-a")
        await self.kubectl("label", "namespace", "team-a", "tier=gold")
        self.assertEqual((await self.get_json("ns", "team-a"))["metadata"]["labels"]["tier"],
                         "gold")
        _, out, _ = await self.kubectl("delete", "namespace", "team-a", "--wait=false")
        self.assertIn('namespace "team-a" deleted', out)

    async def test_configmaps_every_verb(self):
        """ConfigMaps: create -f, apply -f twice, three patch types, get -o yaml, delete."""
        manifest = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "demo", "namespace": "default"}, "data": {"a": "1"}}
        _, out, _ = await self.kubectl("create", "-f", "-", stdin=[manifest])
        self.assertIn("configmap/demo created", out)
        manifest["data"]["a"] = "2"
        _, out, _ = await self.kubectl("apply", "-f", "-", stdin=[manifest])
        self.assertIn("configmap/demo", out)
        manifest["data"] = {"b": "3"}
        await self.kubectl("apply", "-f", "-", stdin=[manifest])
        self.assertEqual((await self.get_json("cm", "demo"))["data"], {"b": "3"})
        await self.kubectl("patch", "cm", "demo", "-p", '{"data":{"s":"strategic"}}')
        await self.kubectl("patch", "cm", "demo", "--type=merge", "-p", '{"data":{"m":"merge"}}')
        await self.kubectl("patch", "cm", "demo", "--type=json",
                           "-p", '[{"op":"add","path":"/data/j","value":"json"}]')
        self.assertEqual((await self.get_json("cm", "demo"))["data"],
                         {"b": "3", "s": "strategic", "m": "merge", "j": "json"})
        _, out, _ = await self.kubectl("get", "cm", "demo", "-o", "yaml")
        self.assertEqual(yaml.safe_load(out)["metadata"]["name"], "demo")
        _, out, _ = await self.kubectl("delete", "cm", "demo")
        self.assertIn('configmap "demo" deleted', out)
        code, _, err = await self.kubectl("get", "cm", "demo", ok=False)
        self.assertNotEqual(code, 0)
        self.assertIn('configmaps "demo" not found', err)

    async def test_secrets(self):
        """Secrets: create -f with stringData, apply, patch, get -o yaml, delete."""
        secret = {"apiVersion": "v1", "kind": "Secret",
                  "metadata": {"name": "creds", "namespace": "default"},
                  "stringData": {"password": "s3cret"}}
        await self.kubectl("create", "-f", "-", stdin=[secret])
        got = await self.get_json("secret", "creds")
        self.assertEqual(got["data"], {"password": "czNjcmV0"})
        self.assertEqual(got["type"], "Opaque")
        secret["stringData"] = {"password": "other"}
        await self.kubectl("apply", "-f", "-", stdin=[secret])
        await self.kubectl("patch", "secret", "creds", "--type=merge",
                           "-p", '{"metadata":{"labels":{"x":"y"}}}')
        _, out, _ = await self.kubectl("get", "secret", "creds", "-o", "yaml")
        got = yaml.safe_load(out)
        self.assertEqual((got["data"]["password"], got["metadata"]["labels"]),
                         ("b3RoZXI=", {"x": "y"}))
        await self.kubectl("delete", "secret", "creds")

    async def test_controllerrevisions(self):
        """ControllerRevisions: create, metadata patch, data change refused, delete."""
        revision = {"apiVersion": "apps/v1", "kind": "ControllerRevision",
                    "metadata": {"name": "rev-1", "namespace": "default"},
                    "revision": 1, "data": {"replicas": 2}}
        await self.kubectl("create", "-f", "-", stdin=[revision])
        await self.kubectl("patch", "controllerrevision", "rev-1", "--type=merge",
                           "-p", '{"metadata":{"labels":{"app":"web"}}}')
        code, _, err = await self.kubectl("patch", "controllerrevision", "rev-1", "--type=merge",
                                          "-p", '{"data":{"replicas":3}}', ok=False)
        self.assertNotEqual(code, 0)
        self.assertIn("field is immutable", err)
        revision["data"] = {"replicas": 5}
        code, _, err = await self.kubectl("apply", "-f", "-", stdin=[revision], ok=False)
        self.assertNotEqual(code, 0)
        self.assertIn("field is immutable", err)
        got = await self.get_json("controllerrevision", "rev-1")
        self.assertEqual((got["data"], got["metadata"]["labels"]), ({"replicas": 2}, {"app": "web"}))
        _, out, _ = await self.kubectl("get", "controllerrevisions", "-o", "yaml")
        self.assertEqual(yaml.safe_load(out)["items"][0]["revision"], 1)
        await self.kubectl("delete", "controllerrevision", "rev-1")
        self.assertEqual((await self.get_json("controllerrevisions"))["items"], [])


class KubectlMachineryTests(KubectlMixin, TestCase):
    """Server-side apply, server-side printing and validation, as kubectl uses them."""

    async def test_server_side_apply(self):
        """apply --server-side creates, tracks managers, reports conflicts, forces."""
        manifest = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "ssa", "namespace": "default"}, "data": {"k": "1"}}
        _, out, _ = await self.kubectl("apply", "--server-side", "-f", "-", stdin=[manifest])
        self.assertIn("configmap/ssa serverside-applied", out)
        got = await self.get_json("cm", "ssa", "--show-managed-fields")
        self.assertEqual([(e["manager"], e["operation"]) for e in got["metadata"]["managedFields"]],
                         [("kubectl", "Apply")])
        manifest["data"]["k"] = "2"
        code, _, err = await self.kubectl("apply", "--server-side", "--field-manager=other",
                                          "-f", "-", stdin=[manifest], ok=False)
        self.assertNotEqual(code, 0)
        self.assertIn('conflict with "kubectl"', err)
        await self.kubectl("apply", "--server-side", "--field-manager=other", "--force-conflicts",
                           "-f", "-", stdin=[manifest])
        self.assertEqual((await self.get_json("cm", "ssa"))["data"], {"k": "2"})

    async def test_server_side_columns(self):
        """kubectl get prints the columns the server's Table gives."""
        await self.kubectl("create", "-f", "-", stdin=[
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cols",
                                                                   "namespace": "default"},
             "data": {"a": "1", "b": "2"}},
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s",
                                                                "namespace": "default"},
             "type": "orch.io/basic-auth", "stringData": {"username": "u"}}])
        _, out, _ = await self.kubectl("get", "configmaps")
        header, row = out.splitlines()[0].split(), out.splitlines()[1].split()
        self.assertEqual(header, ["NAME", "DATA", "AGE"])
        self.assertEqual(row[:2], ["cols", "2"])
        _, out, _ = await self.kubectl("get", "secrets")
        self.assertEqual(out.splitlines()[0].split(), ["NAME", "TYPE", "DATA", "AGE"])
        self.assertIn("orch.io/basic-auth", out)
        _, out, _ = await self.kubectl("get", "namespaces")
        self.assertEqual(out.splitlines()[0].split(), ["NAME", "STATUS", "AGE"])

    async def test_dry_run_server(self):
        """--dry-run=server validates without storing."""
        manifest = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "dry", "namespace": "default"}, "data": {"a": "1"}}
        _, out, _ = await self.kubectl("create", "--dry-run=server", "-f", "-", stdin=[manifest])
        self.assertIn("(server dry run)", out)
        code, _, _ = await self.kubectl("get", "cm", "dry", ok=False)
        self.assertNotEqual(code, 0)

    async def test_strict_validation(self):
        """kubectl's strict validation refuses an unknown field of a fully described kind."""
        manifest = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "strict", "namespace": "default"}, "bogus": True}
        code, _, err = await self.kubectl("create", "-f", "-", stdin=[manifest], ok=False)
        self.assertNotEqual(code, 0)
        self.assertIn('unknown field "bogus"', err)


class KubectlTypedTests(KubectlMixin, TestCase):
    """kubectl's typed commands, which send protobuf bodies."""

    async def test_typed_creates(self):
        """Every typed create works and reads back with get -o yaml."""
        commands = [
            (["create", "namespace", "typed"], "namespace", "typed"),
            (["create", "configmap", "c", "--from-literal=a=b"], "configmap", "c"),
            (["create", "secret", "generic", "s", "--from-literal=p=q"], "secret", "s"),
            (["create", "serviceaccount", "robot"], "serviceaccount", "robot"),
            (["create", "role", "r", "--verb=get", "--resource=pods"], "role", "r"),
            (["create", "rolebinding", "rb", "--role=r", "--user=u"], "rolebinding", "rb"),
            (["create", "clusterrole", "cr", "--verb=get", "--resource=nodes"],
             "clusterrole", "cr"),
            (["create", "clusterrolebinding", "crb", "--clusterrole=cr", "--group=g"],
             "clusterrolebinding", "crb"),
            (["create", "quota", "q", "--hard=pods=10,cpu=2"], "resourcequota", "q"),
            (["create", "priorityclass", "pc", "--value=100"], "priorityclass", "pc"),
            (["create", "deployment", "d", "--image=registry.example/app:1"],
             "deployment", "d"),
            (["create", "job", "j", "--image=registry.example/task:1"], "job", "j"),
        ]
        for argv, kind, name in commands:
            _, out, _ = await self.kubectl(*argv)
            self.assertIn(f"{name} created", out)
            _, text, _ = await self.kubectl("get", kind, name, "-o", "yaml")
            self.assertEqual(yaml.safe_load(text)["metadata"]["name"], name)
        secret = await self.get_json("secret", "s")
        self.assertEqual(secret["data"], {"p": "cQ=="})
        quota = await self.get_json("quota", "q")
        self.assertEqual(quota["spec"]["hard"], {"pods": "10", "cpu": "2"})
        deployment = await self.get_json("deployment", "d")
        self.assertEqual(deployment["spec"]["template"]["spec"]["containers"][0]["image"],
                         "registry.example/app:1")

    async def test_create_token_fails_with_a_status(self):
        """create token for a missing service account fails with the server's Status."""
        code, _, err = await self.kubectl("create", "token", "nobody", ok=False)
        self.assertNotEqual(code, 0)
        self.assertIn('serviceaccounts "nobody" not found', err)
        self.assertNotIn("decode", err.lower())

    async def test_cordon_and_drain(self):
        """cordon marks a node unschedulable (SchedulingDisabled); drain of an empty node works."""
        await self.kubectl("create", "-f", "-", stdin=[
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}])
        _, out, _ = await self.kubectl("cordon", "n1")
        self.assertIn("node/n1 cordoned", out)
        self.assertTrue((await self.get_json("node", "n1"))["spec"]["unschedulable"])
        _, out, _ = await self.kubectl("get", "nodes")
        self.assertIn("SchedulingDisabled", out)
        _, out, _ = await self.kubectl("drain", "n1", "--ignore-daemonsets")
        self.assertIn("node/n1 drained", out)
        _, out, _ = await self.kubectl("uncordon", "n1")
        self.assertIn("node/n1 uncordoned", out)

    async def test_certificate_approval_subresource(self):
        """A CSR created with kubectl is approved through approval, as typed clients do it."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        request = x509.CertificateSigningRequestBuilder().subject_name(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "alice")])).sign(
            key, hashes.SHA256())
        pem = request.public_bytes(serialization.Encoding.PEM)
        await self.kubectl("create", "-f", "-", stdin=[{
            "apiVersion": "certificates.orch.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": "alice"},
            "spec": {"request": base64.b64encode(pem).decode(),
                     "signerName": "orch.io/kube-apiserver-client", "usages": ["client auth"]}}])
        path = "/apis/certificates.k8s.io/v1/certificatesigningrequests/alice"
        _, csr = await self.server.call("GET", path)
        self.assertEqual(csr["apiVersion"], "certificates.k8s.io/v1")
        csr["status"] = {"conditions": [{"type": "Approved", "status": "True",
                                         "reason": "KubectlApprove"}]}
        code, approved = await self.server.call("PUT", path + "/approval", csr)
        self.assertEqual(code, 200, approved)
        csr = await self.get_json("csr", "alice")
        self.assertEqual(csr["status"]["conditions"][0]["type"], "Approved")


class KubectlAuthTests(KubectlMixin, TestCase):
    """kubectl auth can-i, --list, whoami and --as against RBAC."""

    async def can_i(self, *args):
        """kubectl auth can-i: True for yes (exit 0), False for no (exit 1)."""
        code, out, err = await self.kubectl("auth", "can-i", *args, ok=False)
        self.assertIn(code, (0, 1), err)
        self.assertEqual(out.strip(), "yes" if code == 0 else "no", (out, err))
        return code == 0

    async def test_can_i_follows_bindings(self):
        """no, then a rolebinding to view, then yes; and the rules list names pods."""
        self.assertTrue(await self.can_i("delete", "nodes"))
        self.assertFalse(await self.can_i("list", "pods", "--as", "carol", "-n", "default"))
        await self.kubectl("create", "rolebinding", "carol-view", "--clusterrole=view",
                           "--user=carol", "-n", "default")
        for _ in range(50):
            if await self.can_i("list", "pods", "--as", "carol", "-n", "default"):
                break
            await sleep(0.1)
        else:
            self.fail("carol never got to list pods")
        self.assertFalse(await self.can_i("list", "secrets", "--as", "carol", "-n", "default"))
        self.assertFalse(await self.can_i("list", "pods", "--as", "carol", "-n", "orch-system"))
        _, out, _ = await self.kubectl("auth", "can-i", "--list", "--as", "carol",
                                       "-n", "default")
        self.assertIn("pods ", out)
        self.assertIn("selfsubjectaccessreviews.authorization.", out)

    async def test_whoami(self):
        """kubectl auth whoami shows the certificate's user and groups."""
        _, out, _ = await self.kubectl("auth", "whoami", "-o", "json")
        info = json.loads(out)["status"]["userInfo"]
        self.assertEqual(info["username"], "orch-admin")
        self.assertIn("system:masters", info["groups"])
        _, out, _ = await self.kubectl("auth", "whoami", "-o", "json", "--as", "dave",
                                       "--as-group", "devs")
        info = json.loads(out)["status"]["userInfo"]
        self.assertEqual((info["username"], info["groups"]),
                         ("dave", ["devs", "system:authenticated"]))
