"""Hostile request bodies through the whole API server: refused at once, with a Status."""

import time

import orjson
from twisted.internet.defer import maybeDeferred
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.bounded import MAX_DEPTH
from tests.api.test_yamldecode import BILLION_LAUGHS
from tests.support import APIHarness

CM = "/api/v1/namespaces/default/configmaps"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
YAML = b"application/yaml"
APPLY = b"application/apply-patch+yaml"
MERGE = b"application/merge-patch+json"
STRATEGIC = b"application/strategic-merge-patch+json"
JSON_PATCH = b"application/json-patch+json"


def deployment(name, replicas=1):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}},
                                  "spec": {"containers": [{"name": "c", "image": "x"}]}}}}


def deep_json(depth):
    return b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep"},"x":' + \
        b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


class HostileBodyTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.api.call("POST", CM, {"metadata": {"name": "lol"}, "data": {}})
        self.api.call("POST", DEPLOYMENTS, deployment("web"))

    def assertRefused(self, method, path, body, content_type, code=400, says=""):
        started = time.process_time()
        got, status, _ = self.api.call(method, path, body, content_type=content_type)
        self.assertLess(time.process_time() - started, 1.0)
        self.assertEqual((got, status["kind"]), (code, "Status"), status)
        self.assertIn(says, status["message"])
        return status

    def test_billion_laughs_everywhere(self):
        """The alias bomb is a 400 on create, update, apply and delete, in milliseconds."""
        says = "excessive aliasing"
        self.assertRefused("POST", CM, BILLION_LAUGHS, YAML, says=says)
        self.assertRefused("PUT", CM + "/lol", BILLION_LAUGHS, YAML, says=says)
        self.assertRefused("PATCH", CM + "/lol?fieldManager=t", BILLION_LAUGHS, APPLY, says=says)
        self.assertRefused("DELETE", CM + "/lol", BILLION_LAUGHS, YAML, says=says)
        self.assertEqual(self.api.call("GET", CM + "/lol")[0], 200)

    def test_bomb_as_json_is_malformed(self):
        """The same body sent as JSON, or as any JSON patch, is a malformed document."""
        self.assertRefused("POST", CM, BILLION_LAUGHS, b"application/json",
                           says="json parse error")
        for patch_type in (MERGE, STRATEGIC, JSON_PATCH):
            self.assertRefused("PATCH", CM + "/lol", BILLION_LAUGHS, patch_type)

    def test_recursive_alias(self):
        """A self-containing anchor is a 400."""
        self.assertRefused("POST", CM, b"metadata: &m {name: x, labels: *m}\n", YAML,
                           says="contains itself")

    def test_depth_bound(self):
        """JSON nested past the bound is a 400 for every decoder path; at the bound it is read."""
        self.assertRefused("POST", CM, deep_json(MAX_DEPTH + 1), b"application/json",
                           says=f"max depth of {MAX_DEPTH}")
        self.assertRefused("POST", CM, deep_json(5000), b"application/json")
        patch = b'{"data":' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}"
        self.assertRefused("PATCH", CM + "/lol", patch, MERGE, says="max depth")
        self.assertRefused("PATCH", CM + "/lol", patch, STRATEGIC, says="max depth")
        ops = b'[{"op":"add","path":"/x","value":' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}]"
        self.assertRefused("PATCH", CM + "/lol", ops, JSON_PATCH, says="max depth")
        code, _, _ = self.api.call("POST", CM, deep_json(MAX_DEPTH))
        self.assertNotEqual(code // 100, 5)

    def test_integer_out_of_range_is_422(self):
        """replicas past int32 is invalid on create, update, each patch type and apply."""
        says = "spec.replicas: Invalid value: 99999999999: must be within the int32 range"
        status = self.assertRefused("POST", DEPLOYMENTS, orjson.dumps(deployment("big", 99999999999)),
                                    b"application/json", 422, says)
        self.assertEqual(status["details"]["causes"][0]["field"], "spec.replicas")
        self.assertRefused("PUT", DEPLOYMENTS + "/web",
                           orjson.dumps(deployment("web", 99999999999)), b"application/json",
                           422, says)
        self.assertRefused("PATCH", DEPLOYMENTS + "/web", b'{"spec":{"replicas":99999999999}}',
                           MERGE, 422, says)
        self.assertRefused("PATCH", DEPLOYMENTS + "/web", b'{"spec":{"replicas":99999999999}}',
                           STRATEGIC, 422, says)
        self.assertRefused("PATCH", DEPLOYMENTS + "/web",
                           b'[{"op":"replace","path":"/spec/replicas","value":99999999999}]',
                           JSON_PATCH, 422, says)
        applied = b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n" \
                  b"spec: {replicas: 99999999999}\n"
        self.assertRefused("PATCH", DEPLOYMENTS + "/web?fieldManager=t", applied, APPLY, 422,
                           says)
        self.assertRefused("POST", DEPLOYMENTS, b"apiVersion: apps/v1\nkind: Deployment\n"
                           b"metadata: {name: y}\nspec: {replicas: 99999999999999999999999}\n",
                           YAML, 422, "must be within the int32 range")

    def test_huge_yaml_integer(self):
        """An integer of thousands of digits is a 400, not a crash."""
        self.assertRefused("POST", CM, b"metadata: {name: n}\nx: " + b"9" * 5000 + b"\n", YAML,
                           says="cannot read the value")

    def test_yaml_and_large_bodies_decode_off_the_reactor(self):
        """YAML bodies, and JSON bodies over 64 KiB, go to the offload worker; small JSON not."""
        offloaded = []

        def offload(f, *args):
            offloaded.append(args[1])
            return maybeDeferred(f, *args)
        self.api.resource.settings.offload = offload
        self.api.call("POST", CM, b"metadata: {name: y}\n", content_type=YAML)
        self.api.call("POST", CM, {"metadata": {"name": "small"}})
        self.api.call("POST", CM, {"metadata": {"name": "large"}, "data": {"k": "v" * 70_000}})
        self.assertEqual(offloaded, ["application/yaml", "application/json"])
        self.assertEqual(self.api.call("GET", CM + "/large")[0], 200)


class TypeMetaTests(SynchronousTestCase):
    def test_api_version_and_kind_must_be_strings(self):
        """A number or list as apiVersion or kind is a 400 (found by schemathesis), not a 500."""
        api = APIHarness()
        for body in ({"apiVersion": 1.5, "metadata": {"name": "a"}},
                     {"apiVersion": ["v1"], "metadata": {"name": "a"}},
                     {"kind": 7, "metadata": {"name": "a"}}):
            code, status, _ = api.call("POST", CM, body)
            self.assertEqual((code, status["reason"]), (400, "BadRequest"), body)
            self.assertIn("of type string", status["message"])
        api.call("POST", CM, {"metadata": {"name": "a"}})
        code, _, _ = api.call("PATCH", CM + "/a", b'{"apiVersion": 3}', content_type=MERGE)
        self.assertEqual(code, 400)
