"""Validation and defaults of ValidatingWebhookConfiguration and MutatingWebhookConfiguration."""

import base64

from twisted.trial.unittest import SynchronousTestCase

from orchd.tls.certs import certificate_pem, create_ca
from tests.support import APIHarness

ADMISSION = "/apis/admissionregistration.orch.io/v1"
VALIDATING = ADMISSION + "/validatingwebhookconfigurations"
MUTATING = ADMISSION + "/mutatingwebhookconfigurations"


def hook(name="hook.example.com", **extra):
    spec = {"name": name, "clientConfig": {"url": "https://webhook.example.com/check"},
            "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods"]}]}
    spec.update(extra)
    return spec


class WebhookConfigurationTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def create(self, *hooks, path=VALIDATING, name="config"):
        return self.api.call("POST", path, {"metadata": {"name": name},
                                            "webhooks": list(hooks)})[:2]

    def causes(self, *hooks, path=VALIDATING):
        code, body = self.create(*hooks, path=path)
        self.assertEqual(code, 422, body)
        return [(cause["field"], cause["message"]) for cause in body["details"]["causes"]]

    def test_defaults(self):
        """Upstream's v1 defaults are filled in, reinvocationPolicy for mutating webhooks only."""
        service = hook(clientConfig={"service": {"namespace": "default", "name": "svc"}})
        code, body = self.create(service, path=MUTATING)
        self.assertEqual(code, 201, body)
        stored = body["webhooks"][0]
        self.assertEqual({key: stored[key] for key in (
            "failurePolicy", "matchPolicy", "namespaceSelector", "objectSelector",
            "timeoutSeconds", "reinvocationPolicy")},
            {"failurePolicy": "Fail", "matchPolicy": "Equivalent", "namespaceSelector": {},
             "objectSelector": {}, "timeoutSeconds": 10, "reinvocationPolicy": "Never"})
        self.assertEqual(stored["rules"][0]["scope"], "*")
        self.assertEqual(stored["clientConfig"]["service"]["port"], 443)
        code, body = self.create(hook())
        self.assertNotIn("reinvocationPolicy", body["webhooks"][0])

    def test_names(self):
        """Names are fully qualified DNS subdomains, unique within a configuration."""
        causes = self.causes(hook("short.name"), hook("a.b.c"), hook("a.b.c"), hook(""))
        self.assertIn(("webhooks[0].name", 'Invalid value: "short.name": should be a domain '
                       "with at least three segments separated by dots"), causes)
        self.assertIn(("webhooks[2].name", 'Duplicate value: "a.b.c"'), causes)
        self.assertIn(("webhooks[3].name", "Required value"), causes)

    def test_client_config(self):
        """Exactly one of url or service; the url https without user, fragment or query."""
        for config, field, message in (
                ({}, "webhooks[0].clientConfig",
                 "Required value: exactly one of url or service is required"),
                ({"url": "https://a/", "service": {"namespace": "n", "name": "s"}},
                 "webhooks[0].clientConfig",
                 "Required value: exactly one of url or service is required"),
                ({"url": "http://a/"}, "webhooks[0].clientConfig.url",
                 'Invalid value: "http": \'https\' is the only allowed URL scheme; desired '
                 "format: https://host[/path]"),
                ({"url": "https://user:pw@a/"}, "webhooks[0].clientConfig.url",
                 'Invalid value: "user:pw": user information is not permitted in the URL'),
                ({"url": "https://a/#frag"}, "webhooks[0].clientConfig.url",
                 'Invalid value: "frag": fragments are not permitted in the URL'),
                ({"url": "https://a/?q=1"}, "webhooks[0].clientConfig.url",
                 'Invalid value: "q=1": query parameters are not permitted in the URL'),
                ({"url": "https:///path"}, "webhooks[0].clientConfig.url",
                 'Invalid value: "": host must be specified; desired format: '
                 "https://host[/path]"),
                ({"service": {"name": "s"}}, "webhooks[0].clientConfig.service.namespace",
                 "Required value: service namespace is required"),
                ({"service": {"namespace": "n", "name": "s", "port": 70000}},
                 "webhooks[0].clientConfig.service.port",
                 "Invalid value: 70000: port is not valid: must be between 1 and 65535, "
                 "inclusive"),
                ({"service": {"namespace": "n", "name": "s", "path": "x"}},
                 "webhooks[0].clientConfig.service.path",
                 'Invalid value: "x": must start with a \'/\''),
                ({"url": "https://a/", "caBundle": base64.b64encode(b"not pem").decode()},
                 "webhooks[0].clientConfig.caBundle",
                 'Invalid value: "<omitted>": must be a base64-encoded PEM certificate bundle')):
            self.assertIn((field, message), self.causes(hook(clientConfig=config)), config)

    def test_ca_bundle(self):
        """A PEM bundle is accepted."""
        ca, _ = create_ca("webhook-ca")
        config = {"url": "https://a/", "caBundle": base64.b64encode(certificate_pem(ca)).decode()}
        code, body = self.create(hook(clientConfig=config))
        self.assertEqual(code, 201, body)

    def test_required_fields(self):
        """sideEffects and admissionReviewVersions are required in v1."""
        spec = hook()
        del spec["sideEffects"], spec["admissionReviewVersions"]
        causes = self.causes(spec)
        self.assertIn(("webhooks[0].sideEffects",
                       "Required value: must specify one of None, NoneOnDryRun"), causes)
        self.assertIn(("webhooks[0].admissionReviewVersions",
                       "Required value: must specify one of v1, v1beta1"), causes)

    def test_enumerations(self):
        """Unknown policies, side effects, versions and timeouts are refused."""
        causes = self.causes(hook(sideEffects="Some", failurePolicy="Maybe", matchPolicy="Loose",
                                  admissionReviewVersions=["v2", "v2"], timeoutSeconds=31),
                             path=VALIDATING)
        self.assertIn(("webhooks[0].sideEffects",
                       'Unsupported value: "Some": supported values: "None", "NoneOnDryRun"'),
                      causes)
        self.assertIn(("webhooks[0].failurePolicy",
                       'Unsupported value: "Maybe": supported values: "Fail", "Ignore"'), causes)
        self.assertIn(("webhooks[0].matchPolicy",
                       'Unsupported value: "Loose": supported values: "Equivalent", "Exact"'),
                      causes)
        self.assertIn(("webhooks[0].admissionReviewVersions[1]", 'Duplicate value: "v2"'), causes)
        self.assertIn(("webhooks[0].admissionReviewVersions",
                       'Invalid value: ["v2","v2"]: must include at least one of v1, v1beta1'),
                      causes)
        self.assertIn(("webhooks[0].timeoutSeconds",
                       "Invalid value: 31: the timeout value must be between 1 and 30 seconds"),
                      causes)
        causes = self.causes(hook(reinvocationPolicy="Always"), path=MUTATING)
        self.assertIn(("webhooks[0].reinvocationPolicy",
                       'Unsupported value: "Always": supported values: "Never", "IfNeeded"'),
                      causes)

    def test_rules(self):
        """Rules follow upstream: wildcards alone, known operations and scopes."""
        rules = [{"operations": ["CREATE", "*"], "apiGroups": [], "apiVersions": ["*", "v1"],
                  "resources": ["*/*", "pods"], "scope": "Everywhere"},
                 {"operations": ["PATCH"], "apiGroups": ["*"], "apiVersions": ["v1"],
                  "resources": ["*", "pods", "pods/*", "pods/status"]}]
        causes = self.causes(hook(rules=rules))
        for expected in (
                ("webhooks[0].rules[0].operations",
                 'Invalid value: ["CREATE","*"]: if \'*\' is present, must not specify other '
                 "operations"),
                ("webhooks[0].rules[0].apiGroups", "Required value"),
                ("webhooks[0].rules[0].apiVersions",
                 'Invalid value: ["*","v1"]: if \'*\' is present, must not specify other API '
                 "versions"),
                ("webhooks[0].rules[0].resources",
                 'Invalid value: ["*/*","pods"]: if \'*/*\' is present, must not specify other '
                 "resources"),
                ("webhooks[0].rules[0].scope", 'Unsupported value: "Everywhere": supported '
                 'values: "*", "Cluster", "Namespaced"'),
                ("webhooks[0].rules[1].operations[0]", 'Unsupported value: "PATCH": supported '
                 'values: "*", "CREATE", "UPDATE", "DELETE", "CONNECT"'),
                ("webhooks[0].rules[1].resources[3]",
                 'Invalid value: "pods/status": if \'pods/*\' is present, must not specify '
                 "pods/status"),
                ("webhooks[0].rules[1].resources",
                 'Invalid value: ["*","pods","pods/*","pods/status"]: if \'*\' is present, must '
                 "not specify other resources without subresources")):
            self.assertIn(expected, causes)
        good = [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                 "resources": ["*", "pods/status", "*/scale"], "scope": "Namespaced"}]
        code, body = self.create(hook(rules=good))
        self.assertEqual(code, 201, body)

    def test_selectors(self):
        """namespaceSelector and objectSelector are valid label selectors."""
        causes = self.causes(hook(namespaceSelector={"matchExpressions": [
            {"key": "a", "operator": "Near"}]}, objectSelector={"matchLabels": {"a b": "c"}}))
        self.assertIn(("webhooks[0].namespaceSelector.matchExpressions[0].operator",
                       'Invalid value: "Near": not a valid selector operator'), causes)
        self.assertTrue(any(field == "webhooks[0].objectSelector.matchLabels"
                            for field, _ in causes), causes)

    def test_match_conditions(self):
        """matchConditions need unique qualified names and compilable, supported expressions."""
        causes = self.causes(hook(matchConditions=[
            {"name": "ok", "expression": "object.metadata.name == 'a'"},
            {"name": "ok", "expression": "object.metadata.name =="},
            {"name": "bad name!", "expression": "authorizer.group('').check()"},
            {"name": "empty"}]))
        fields = [field for field, _ in causes]
        self.assertIn(("webhooks[0].matchConditions[1].name", 'Duplicate value: "ok"'), causes)
        self.assertIn("webhooks[0].matchConditions[1].expression", fields)
        self.assertIn("webhooks[0].matchConditions[2].name", fields)
        self.assertIn(("webhooks[0].matchConditions[2].expression",
                       'Invalid value: "authorizer.group(\'\').check()": compilation failed: the '
                       "variable 'authorizer' is not supported by this server (supported: "
                       "object, oldObject, request)"), causes)
        self.assertIn(("webhooks[0].matchConditions[3].expression", "Required value"), causes)

    def test_update_validated(self):
        """An update is validated as a create is."""
        code, _ = self.create(hook())
        self.assertEqual(code, 201)
        code, body, _ = self.api.call("PUT", VALIDATING + "/config", {
            "metadata": {"name": "config"}, "webhooks": [hook(timeoutSeconds=0)]})
        self.assertEqual(code, 422, body)
