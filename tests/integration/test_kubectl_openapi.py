"""kubectl explain and client-side apply read orchd's OpenAPI documents from a running server."""

import json
import os

from twisted.internet import utils
from twisted.trial.unittest import SkipTest, TestCase

from tests.integration.support import RunningControlPlane, kubectl

EXPLAINED = {
    "clusterrole.rules": "All the PolicyRules of this ClusterRole.",
    "clusterrolebinding.subjects": "The parties the role is granted to.",
    "controllerrevision.revision": "The revision of the state in data.",
    "secret.type": "Used to handle the secret data programmatically",
    "lease.spec": "holderIdentity",
}

FULL_MANIFEST = """\
apiVersion: rbac.authorization.orch.io/v1
kind: ClusterRole
metadata: {name: reader, labels: {v: "1"}}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get]}
---
apiVersion: rbac.authorization.orch.io/v1
kind: ClusterRoleBinding
metadata: {name: reader, labels: {v: "1"}}
roleRef: {apiGroup: rbac.authorization.orch.io, kind: ClusterRole, name: reader}
subjects: [{kind: User, name: alice, apiGroup: rbac.authorization.orch.io}]
---
apiVersion: rbac.authorization.orch.io/v1
kind: Role
metadata: {name: reader, namespace: default, labels: {v: "1"}}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get]}
---
apiVersion: rbac.authorization.orch.io/v1
kind: RoleBinding
metadata: {name: reader, namespace: default, labels: {v: "1"}}
roleRef: {apiGroup: rbac.authorization.orch.io, kind: Role, name: reader}
subjects: [{kind: ServiceAccount, name: default, namespace: default}]
---
apiVersion: apps/v1
kind: ControllerRevision
metadata: {name: rev, namespace: default, labels: {v: "1"}}
revision: 1
data: {spec: {template: {x: 1}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: default, labels: {v: "1"}}
data: {a: b}
---
apiVersion: v1
kind: Secret
metadata: {name: sec, namespace: default, labels: {v: "1"}}
type: Opaque
data: {a: Yg==}
---
apiVersion: v1
kind: Namespace
metadata: {name: team, labels: {v: "1"}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: robot, namespace: default, labels: {v: "1"}}
imagePullSecrets: [{name: sec}]
secrets: [{name: sec}]
---
apiVersion: coordination.orch.io/v1
kind: Lease
metadata: {name: lease, namespace: default, labels: {v: "1"}}
spec: {holderIdentity: me, leaseDurationSeconds: 10}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default, labels: {v: "1"}}
spec:
  selector: {app: web}
  sessionAffinity: ClientIP
  sessionAffinityConfig: {clientIP: {timeoutSeconds: 100}}
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP, appProtocol: http}]
---
apiVersion: v1
kind: Node
metadata: {name: worker, labels: {v: "1"}}
spec: {podCIDR: 10.0.0.0/24, podCIDRs: [10.0.0.0/24], taints: [{key: k, effect: NoSchedule}]}
---
apiVersion: events.orch.io/v1
kind: Event
metadata: {name: ev, namespace: default, labels: {v: "1"}}
eventTime: "2024-01-01T00:00:00.000000Z"
reportingController: orch.io/test
reportingInstance: test
action: Test
reason: Test
type: Normal
regarding: {kind: Pod, name: p, namespace: default}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default, labels: {v: "1"}}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: nginx, env: [{name: A, value: "1"}]}]}
---
apiVersion: networking.orch.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: default, labels: {v: "1"}}
spec: {podSelector: {}, policyTypes: [Ingress]}
"""


class KubectlTests(TestCase):
    """kubectl explain and client-side apply against a running server (skipped without kubectl)."""

    timeout = 120

    async def setUp(self):
        self.binary = kubectl()
        if self.binary is None:
            raise SkipTest("kubectl is not installed")
        self.server = await RunningControlPlane(self).start()
        self.home = os.path.abspath(self.mktemp())
        os.makedirs(self.home)

    async def kubectl(self, *args):
        argv = ["--kubeconfig", self.server.plane.pki.admin_orchconfig_path, *args]
        env = {"HOME": self.home, "PATH": os.environ.get("PATH", "")}
        out, err, code = await utils.getProcessOutputAndValue(self.binary, argv, env=env)
        self.assertEqual(code, 0, f"kubectl {' '.join(args)}: {err.decode()}")
        return out.decode(), err.decode()

    async def test_explain(self):
        """kubectl explain prints the descriptions of fields of full kinds."""
        for field, text in EXPLAINED.items():
            out, _ = await self.kubectl("explain", field)
            self.assertIn("DESCRIPTION:", out, field)
            self.assertIn(text, " ".join(out.split()), field)

    async def test_apply_without_warnings(self):
        """Client-side apply, create then change, of full and loose kinds prints no warning."""
        path = os.path.join(self.home, "objects.yaml")
        for version in ("1", "2"):
            with open(path, "w") as f:
                f.write(FULL_MANIFEST.replace('v: "1"', f'v: "{version}"')
                        .replace("verbs: [get]", "verbs: [get]" if version == "1" else
                                 "verbs: [get, list]")
                        .replace("port: 80,", "port: 80," if version == "1" else "port: 81,")
                        .replace('value: "1"', f'value: "{version}"'))
            out, err = await self.kubectl("apply", "-f", path)
            self.assertNotIn("arning", err)
        out, _ = await self.kubectl("get", "service", "web", "-o", "jsonpath={.spec.ports[*].port}")
        self.assertEqual(out, "81")
        out, _ = await self.kubectl("get", "clusterrole", "reader", "-o",
                                    "jsonpath={.rules[0].verbs}")
        self.assertEqual(out, '["get","list"]')


LIST_FILE = {"apiVersion": "v1", "kind": "List", "items": [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}]}


class KubectlOpenAPIv2Tests(TestCase):
    """kubectl reading the protobuf OpenAPI v2 document: List files and v2 explain."""

    timeout = 120
    setUp = KubectlTests.setUp
    kubectl = KubectlTests.kubectl

    async def run_kubectl(self, *args):
        """Run kubectl; returns (exit code, stdout, stderr)."""
        argv = ["--kubeconfig", self.server.plane.pki.admin_orchconfig_path, *args]
        env = {"HOME": self.home, "PATH": os.environ.get("PATH", "")}
        out, err, code = await utils.getProcessOutputAndValue(self.binary, argv, env=env)
        return code, out.decode(), err.decode()

    def write(self, name, document):
        path = os.path.join(self.home, name)
        with open(path, "w") as f:
            json.dump(document, f)
        return path

    async def test_create_list_file(self):
        """kubectl create -f of a v1 List validates it against the v2 document and creates the items."""
        path = self.write("list.json", LIST_FILE)
        out, err = await self.kubectl("create", "-n", "default", "-f", path)
        self.assertIn("configmap/a created", out)
        self.assertNotIn("error validating", err)
        out, _ = await self.kubectl("get", "-n", "default", "configmap", "a", "-o",
                                    "jsonpath={.metadata.name}")
        self.assertEqual(out, "a")

    async def test_replace_from_get_output(self):
        """The List that kubectl get -o json writes is accepted by kubectl replace -f."""
        await self.kubectl("create", "-n", "default", "-f", self.write("list.json", LIST_FILE))
        out, _ = await self.kubectl("get", "-n", "default", "configmaps", "-o", "json")
        listing = json.loads(out)
        for item in listing["items"]:
            item["data"] = {"k": "v"}
        path = self.write("replace.json", listing)
        out, err = await self.kubectl("replace", "-n", "default", "-f", path)
        self.assertIn("configmap/a replaced", out)
        out, _ = await self.kubectl("get", "-n", "default", "configmap", "a", "-o",
                                    "jsonpath={.data.k}")
        self.assertEqual(out, "v")

    async def test_unknown_field_in_list_item_refused(self):
        """An unknown field in a List's item is refused by kubectl's own validation of the v2 schema."""
        bad = json.loads(json.dumps(LIST_FILE))
        bad["items"][0]["datta"] = {"k": "v"}
        code, out, err = await self.run_kubectl(
            "create", "-n", "default", "--validate=true", "-f", self.write("bad.json", bad))
        self.assertNotEqual(code, 0)
        self.assertIn('unknown field "datta"', err)
        self.assertNotIn("content type", err)
        code, _, _ = await self.run_kubectl("get", "-n", "default", "configmap", "a")
        self.assertNotEqual(code, 0)

    async def test_explain_plaintext_openapiv2(self):
        """kubectl explain --output=plaintext-openapiv2 prints a kind's fields from the v2 document."""
        out, _ = await self.kubectl("explain", "pods", "--output=plaintext-openapiv2")
        self.assertIn("KIND:     Pod", out)
        self.assertIn("metadata\t<Object>", out)
        self.assertIn("Standard object metadata.", out)
        out, _ = await self.kubectl("explain", "configmaps", "--output=plaintext-openapiv2")
        self.assertIn("binaryData\t<map[string]string>", out)
        self.assertIn("immutable\t<boolean>", out)
