"""
kubectl against a running server with C{--upstream-group-names}: unmodified
upstream manifests and upstream group names resolve through discovery; and
admission webhooks are sent their reviews in the upstream spelling.
"""

import os

from twisted.internet import utils
from twisted.trial.unittest import SkipTest, TestCase

from tests.integration.support import RunningControlPlane, kubectl
from tests.integration.test_admission_webhooks import (
    configmap, configuration, hook, serve_webhook,
)

#: An upstream CustomResourceDefinition manifest, as charts and operators ship it.
CRD_MANIFEST = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"""

WIDGET_MANIFEST = """\
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, namespace: default}
spec: {size: 3}
"""

#: An upstream RBAC manifest (a chart's Role and its binding).
RBAC_MANIFEST = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: widget-reader, namespace: default}
rules:
- {apiGroups: [example.com], resources: [widgets], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: widget-reader, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: widget-reader}
subjects: [{kind: ServiceAccount, name: default, namespace: default}]
"""


class KubectlBase(TestCase):
    """A running server and kubectl (skipped without kubectl)."""

    timeout = 120
    flag = True

    async def setUp(self):
        self.binary = kubectl()
        if self.binary is None:
            raise SkipTest("kubectl is not installed")
        self.server = await RunningControlPlane(self, upstream_group_names=self.flag).start()
        self.home = os.path.abspath(self.mktemp())
        os.makedirs(self.home)

    async def run_kubectl(self, *args, stdin=None):
        """C{(exit code, stdout, stderr)} of one kubectl run."""
        argv = ["--kubeconfig", self.server.plane.pki.admin_orchconfig_path, *args]
        env = {"HOME": self.home, "PATH": os.environ.get("PATH", "")}
        if stdin is not None:
            path = os.path.join(self.home, "manifest.yaml")
            with open(path, "w", encoding="utf-8") as stream:
                stream.write(stdin)
            argv = [a if a != "-" else path for a in argv]
        out, err, code = await utils.getProcessOutputAndValue(self.binary, argv, env=env)
        return code, out.decode(), err.decode()

    async def kubectl(self, *args, stdin=None):
        """stdout of a kubectl run that must succeed without warnings."""
        code, out, err = await self.run_kubectl(*args, stdin=stdin)
        self.assertEqual((code, err.replace("No resources found\n", "")), (0, ""),
                         f"kubectl {' '.join(args)}")
        return out


class UpstreamNamesTests(KubectlBase):
    """With the flag, kubectl finds the upstream group names through discovery."""

    async def test_apply_upstream_crd(self):
        """An unmodified apiextensions.k8s.io/v1 CRD manifest is applied, and read back."""
        out = await self.kubectl("apply", "-f", "-", stdin=CRD_MANIFEST)
        self.assertIn("customresourcedefinition.apiextensions.k8s.io/widgets.example.com created",
                      out)
        out = await self.kubectl("get", "customresourcedefinitions.apiextensions.k8s.io",
                                 "widgets.example.com", "-o", "jsonpath={.apiVersion} {.spec.group}")
        self.assertEqual(out, "apiextensions.k8s.io/v1 example.com")
        code, stored = await self.server.call(
            "GET", "/apis/apiextensions.orch.io/v1/customresourcedefinitions/widgets.example.com")
        self.assertEqual((code, stored["apiVersion"]), (200, "apiextensions.orch.io/v1"))
        # Applying it again is a no-op patch, through the upstream spelling too.
        out = await self.kubectl("apply", "-f", "-", stdin=CRD_MANIFEST)
        self.assertIn("unchanged", out)

    async def test_custom_resources_of_upstream_crd(self):
        """The resources of a CRD applied by its upstream name are served to kubectl."""
        await self.kubectl("apply", "-f", "-", stdin=CRD_MANIFEST)
        out = await self.kubectl("apply", "-f", "-", stdin=WIDGET_MANIFEST)
        self.assertIn("widget.example.com/w1 created", out)
        out = await self.kubectl("get", "wd", "w1", "-o", "jsonpath={.spec.size}")
        self.assertEqual(out, "3")

    async def test_apply_upstream_rbac(self):
        """Upstream rbac.authorization.k8s.io manifests apply, and resolve by upstream name."""
        await self.kubectl("apply", "-f", "-", stdin=RBAC_MANIFEST)
        out = await self.kubectl("get", "roles.rbac.authorization.k8s.io", "-n", "default",
                                 "-o", "name")
        self.assertEqual(out, "role.rbac.authorization.k8s.io/widget-reader\n")

    async def test_get_by_upstream_name(self):
        """kubectl get clusterroles.rbac.authorization.k8s.io lists the bootstrap roles."""
        out = await self.kubectl("get", "clusterroles.rbac.authorization.k8s.io", "-o", "name")
        self.assertIn("clusterrole.rbac.authorization.k8s.io/cluster-admin\n", out)

    async def test_plain_names_stay_orch_io(self):
        """Plain resource and short names resolve to the orch.io group, with no ambiguity or warning."""
        out = await self.kubectl("get", "clusterroles", "-o", "name")
        self.assertIn("clusterrole.rbac.authorization.orch.io/cluster-admin\n", out)
        out = await self.kubectl("get", "roles", "-A", "-o", "name")
        self.assertIn("role.rbac.authorization.orch.io/", out)
        await self.kubectl("get", "ing", "-A")
        await self.kubectl("get", "pc")

    async def test_api_resources(self):
        """kubectl api-resources lists both spellings without an error."""
        out = await self.kubectl("api-resources", "-o", "name")
        names = out.split()
        self.assertIn("customresourcedefinitions.apiextensions.orch.io", names)
        self.assertIn("customresourcedefinitions.apiextensions.k8s.io", names)
        out = await self.kubectl("api-versions")
        self.assertIn("admissionregistration.k8s.io/v1\n", out)

    async def test_explain_upstream_name(self):
        """kubectl explain finds the schema by the upstream group's GVK."""
        out = await self.kubectl("explain", "clusterroles.rbac.authorization.k8s.io.rules")
        self.assertIn("GROUP:      rbac.authorization.k8s.io", out)
        self.assertIn("PolicyRules", out)


class DefaultTests(KubectlBase):
    """Without the flag, discovery has only the orch.io names, as the specification says."""

    flag = False

    async def test_upstream_crd_not_found(self):
        """kubectl cannot map an apiextensions.k8s.io/v1 manifest: no such group in discovery."""
        code, _, err = await self.run_kubectl("apply", "-f", "-", stdin=CRD_MANIFEST)
        self.assertNotEqual(code, 0)
        self.assertIn('no matches for kind "CustomResourceDefinition" in version '
                      '"apiextensions.k8s.io/v1"', err)


class AdmissionReviewTests(TestCase):
    """With the flag, webhooks are sent their AdmissionReview as admission.k8s.io."""

    timeout = 60

    async def test_review_in_upstream_spelling(self):
        """A webhook configured by its upstream group name is sent admission.k8s.io/v1."""
        plane = await RunningControlPlane(self, upstream_group_names=True).start()
        webhook, port, bundle = serve_webhook(self)
        webhook.handlers["/check"] = lambda request: {}
        config = configuration("ValidatingWebhookConfiguration", "check", [hook(
            "check.example.com", {"url": f"https://127.0.0.1:{port}/check", "caBundle": bundle})])
        config["apiVersion"] = "admissionregistration.k8s.io/v1"
        code, body = await plane.call(
            "POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            config)
        self.assertEqual(code, 201, body)
        code, body = await plane.call("POST", "/api/v1/namespaces/default/configmaps",
                                      configmap("checked"))
        self.assertEqual(code, 201, body)
        [(_, review)] = webhook.reviews
        self.assertEqual((review["apiVersion"], review["request"]["name"]),
                         ("admission.k8s.io/v1", "checked"))
