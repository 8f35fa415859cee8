"""Unmodified kubectl on custom resources: apply a definition, then use its kind."""

import yaml
from twisted.trial.unittest import TestCase

from tests.integration.support import sleep
from tests.integration.test_kubectl import KubectlMixin

CRD = """
apiVersion: apiextensions.orch.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wd]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: A widget made by the widget operator.
        properties:
          spec:
            type: object
            description: What the widget should be.
            properties:
              replicas:
                type: integer
                minimum: 0
                description: How many copies of the widget to run.
              color:
                type: string
                default: blue
              selector:
                type: string
          status:
            type: object
            properties:
              replicas:
                type: integer
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .spec.selector
    additionalPrinterColumns:
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    - name: Color
      type: string
      jsonPath: .spec.color
      priority: 1
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
"""

WIDGETS = """
apiVersion: example.com/v1
kind: Widget
metadata:
  name: alpha
spec:
  replicas: 2
  selector: app=alpha
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: beta
spec:
  replicas: 1
  color: red
"""


class KubectlCustomResourceTests(KubectlMixin, TestCase):
    async def test_apply_get_explain_scale(self):
        """A definition applied, its resources applied at once, printed, explained and scaled."""
        await self.kubectl("apply", "-f", "-", stdin=CRD)
        _, out, _ = await self.kubectl("apply", "-f", "-", stdin=WIDGETS)
        self.assertIn("widget.example.com/alpha created", out)
        _, out, _ = await self.kubectl("get", "widgets")
        header, *rows = out.splitlines()
        self.assertEqual(header.split(), ["NAME", "REPLICAS", "AGE"])
        self.assertEqual([row.split()[:2] for row in rows], [["alpha", "2"], ["beta", "1"]])
        _, out, _ = await self.kubectl("get", "wd", "-o", "wide")
        self.assertEqual(out.splitlines()[0].split(), ["NAME", "REPLICAS", "COLOR", "AGE"])
        self.assertEqual(out.splitlines()[1].split()[:3], ["alpha", "2", "blue"])
        _, out, _ = await self.kubectl("explain", "widget.spec")
        self.assertIn("What the widget should be.", out)
        self.assertIn("replicas", out)
        _, out, _ = await self.kubectl("scale", "widget/alpha", "--replicas=5")
        self.assertIn("widget.example.com/alpha scaled", out)
        alpha = await self.get_json("widget", "alpha")
        self.assertEqual(alpha["spec"]["replicas"], 5)
        _, out, _ = await self.kubectl("get", "all")
        self.assertIn("widget.example.com/alpha", out)

    async def test_patch_apply_and_validation(self):
        """kubectl patch and a second apply change a widget; an invalid one is refused."""
        await self.kubectl("apply", "-f", "-", stdin=CRD)
        await self.kubectl("apply", "-f", "-", stdin=WIDGETS)
        await self.kubectl("patch", "widget", "beta", "--type=merge",
                           "-p", '{"spec":{"replicas":3}}')
        self.assertEqual((await self.get_json("widget", "beta"))["spec"]["replicas"], 3)
        changed = WIDGETS.replace("replicas: 1", "replicas: 4")
        await self.kubectl("apply", "-f", "-", stdin=changed)
        self.assertEqual((await self.get_json("widget", "beta"))["spec"]["replicas"], 4)
        await self.kubectl("apply", "--server-side", "-f", "-", stdin=changed)
        code, _, err = await self.kubectl(
            "apply", "-f", "-", ok=False,
            stdin=WIDGETS.replace("replicas: 1", "replicas: -1"))
        self.assertNotEqual(code, 0)
        self.assertIn("spec.replicas", err)
        code, _, err = await self.kubectl(
            "apply", "-f", "-", ok=False,
            stdin=WIDGETS.replace("replicas: 1", "replicas: 1\n  size: 9"))
        self.assertNotEqual(code, 0)
        self.assertIn('unknown field "spec.size"', err)

    async def test_delete_definition_deletes_resources(self):
        """Deleting the definition deletes its resources, then the kind is gone."""
        await self.kubectl("apply", "-f", "-", stdin=CRD)
        await self.kubectl("apply", "-f", "-", stdin=WIDGETS)
        await self.kubectl("delete", "crd", "widgets.example.com")
        for _ in range(50):
            code, _, _ = await self.kubectl("get", "crd", "widgets.example.com", ok=False)
            if code != 0:
                break
            await sleep(0.1)
        self.assertNotEqual(code, 0)
        self.assertEqual(
            (await self.server.call("GET", "/apis/example.com/v1/widgets"))[0], 404)
        _, out, _ = await self.kubectl("get", "crd", "-o", "yaml")
        self.assertEqual(yaml.safe_load(out)["items"], [])
