"""The webhook admission plugin over a whole in-memory API server, with a fake caller."""

import base64
import json

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from orchd.admission.interfaces import CREATE, AdmissionAttributes
from orchd.admission.webhook.caller import IWebhookCaller
from orchd.admission.webhook.plugin import WebhookAdmission
from orchd.admission.webhook.review import CallError
from orchd.auth.user import UserInfo
from orchd.storage.memory import MemoryStore
from tests.support import APIHarness

ADMISSION = "/apis/admissionregistration.orch.io/v1"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@implementer(IWebhookCaller)
class FakeCaller:
    """Answers each webhook (by name) with its handler's response fields; records the reviews."""

    def __init__(self):
        self.handlers = {}
        self.calls = []

    async def call(self, webhook, body):
        review = json.loads(body)
        self.calls.append((webhook.name, review))
        handler = self.handlers.get(webhook.name, lambda request: {})
        fields = handler(review["request"])
        if isinstance(fields, bytes):
            return fields
        return json.dumps({"apiVersion": review["apiVersion"], "kind": "AdmissionReview",
                           "response": {"uid": review["request"]["uid"], "allowed": True,
                                        **fields}}).encode()


def patch(*operations):
    return {"patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(list(operations)).encode()).decode()}


def hook(name, resources=("configmaps",), operations=("CREATE", "UPDATE"), **extra):
    spec = {"name": name, "clientConfig": {"url": "https://webhook.example.com/"},
            "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "rules": [{"operations": list(operations), "apiGroups": [""],
                       "apiVersions": ["v1"], "resources": list(resources)}]}
    spec.update(extra)
    return spec


def configmap(name, labels=None, data=None):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": labels or {}}, "data": data or {"a": "1"}}


class PluginTests(SynchronousTestCase):
    def setUp(self):
        store = MemoryStore()
        self.caller = FakeCaller()
        self.plugin = WebhookAdmission(store, self.caller,
                                       lambda group, resource: ["v1"])
        self.api = APIHarness(store=store, plugins=(self.plugin,))
        self.plugin.startService()
        self.addCleanup(self.plugin.stopService)

    def configure(self, kind, name, hooks):
        resource = kind.lower() + "s"
        code, body, _ = self.api.call("POST", f"{ADMISSION}/{resource}", {
            "apiVersion": "admissionregistration.orch.io/v1", "kind": kind,
            "metadata": {"name": name}, "webhooks": hooks})
        self.assertEqual(code, 201, body)

    def validating(self, name, *hooks):
        self.configure("ValidatingWebhookConfiguration", name, list(hooks))

    def mutating(self, name, *hooks):
        self.configure("MutatingWebhookConfiguration", name, list(hooks))

    def test_no_configuration_no_call(self):
        """Without configurations a write goes through and nothing is called."""
        code, _, _ = self.api.call("POST", CONFIGMAPS, configmap("plain"))
        self.assertEqual((code, self.caller.calls), (201, []))

    def test_configuration_followed(self):
        """A configuration created through the API is called at once, and not once deleted."""
        self.validating("v", hook("v.example.com"))
        self.api.call("POST", CONFIGMAPS, configmap("one"))
        self.assertEqual([name for name, _ in self.caller.calls], ["v.example.com"])
        self.api.call("DELETE", f"{ADMISSION}/validatingwebhookconfigurations/v")
        self.api.call("POST", CONFIGMAPS, configmap("two"))
        self.assertEqual(len(self.caller.calls), 1)

    def test_configuration_updated(self):
        """A configuration replaced through the API is called as it now reads."""
        self.validating("v", hook("v.example.com"))
        code, stored, _ = self.api.call("GET", f"{ADMISSION}/validatingwebhookconfigurations/v")
        stored["webhooks"] = [hook("v.example.com", resources=("secrets",))]
        code, body, _ = self.api.call("PUT", f"{ADMISSION}/validatingwebhookconfigurations/v",
                                      stored)
        self.assertEqual(code, 200, body)
        self.api.call("POST", CONFIGMAPS, configmap("cm"))
        self.api.call("POST", "/api/v1/namespaces/default/secrets", {"metadata": {"name": "s"}})
        self.assertEqual([review["request"]["resource"]["resource"]
                          for _, review in self.caller.calls], ["secrets"])

    def test_review_request(self):
        """The review carries the write: kinds, resource, user, object, options, dryRun."""
        self.validating("v", hook("v.example.com"))
        self.api.call("POST", CONFIGMAPS + "?dryRun=All", configmap("sent"))
        (_, review), = self.caller.calls
        request = review["request"]
        self.assertEqual(review["apiVersion"], "admission.orch.io/v1")
        self.assertEqual(request["kind"], {"group": "", "version": "v1", "kind": "ConfigMap"})
        self.assertEqual(request["requestResource"],
                         {"group": "", "version": "v1", "resource": "configmaps"})
        self.assertEqual((request["name"], request["namespace"], request["operation"],
                          request["dryRun"]), ("sent", "default", "CREATE", True))
        self.assertEqual(request["object"]["data"], {"a": "1"})
        self.assertIsNone(request["oldObject"])
        self.assertEqual(request["options"], {"apiVersion": "meta.k8s.io/v1",
                                              "kind": "CreateOptions", "dryRun": ["All"]})
        self.assertIn("username", request["userInfo"])

    def test_update_sends_old_object(self):
        """An update's review carries the stored object as oldObject."""
        self.api.call("POST", CONFIGMAPS, configmap("cm"))
        self.validating("v", hook("v.example.com"))
        code, _, _ = self.api.call("PUT", CONFIGMAPS + "/cm", configmap("cm", data={"a": "2"}))
        self.assertEqual(code, 200)
        request = self.caller.calls[-1][1]["request"]
        self.assertEqual((request["operation"], request["oldObject"]["data"],
                          request["object"]["data"]), ("UPDATE", {"a": "1"}, {"a": "2"}))

    def test_denial(self):
        """A denial answers with the webhook's code and upstream's message."""
        self.caller.handlers["v.example.com"] = lambda request: {
            "allowed": False, "status": {"message": "no", "code": 409, "reason": "Conflict"}}
        self.validating("v", hook("v.example.com"))
        code, body, _ = self.api.call("POST", CONFIGMAPS, configmap("refused"))
        self.assertEqual((code, body["reason"], body["message"]),
                         (409, "Conflict", 'admission webhook "v.example.com" denied the '
                                           'request: no'))

    def test_denial_default_code(self):
        """A denial without a code (or with one below 400) is a 400."""
        self.caller.handlers["v.example.com"] = lambda request: {
            "allowed": False, "status": {"code": 200}}
        self.validating("v", hook("v.example.com"))
        code, body, _ = self.api.call("POST", CONFIGMAPS, configmap("refused"))
        self.assertEqual((code, body["message"]),
                         (400, 'admission webhook "v.example.com" denied the request without '
                               'explanation'))

    def test_any_validating_denial_wins(self):
        """Every validating webhook is called; one denial among allows refuses the write."""
        self.caller.handlers["b.example.com"] = lambda request: {"allowed": False}
        self.validating("v", hook("a.example.com"), hook("b.example.com"),
                        hook("c.example.com"))
        code, body, _ = self.api.call("POST", CONFIGMAPS, configmap("refused"))
        self.assertEqual(code, 400)
        self.assertIn('"b.example.com"', body["message"])
        self.assertEqual(sorted(name for name, _ in self.caller.calls),
                         ["a.example.com", "b.example.com", "c.example.com"])

    def test_mutation_applied_and_validated(self):
        """A JSONPatch is applied before the kind's validation, which still refuses bad results."""
        self.caller.handlers["m.example.com"] = lambda request: patch(
            {"op": "add", "path": "/metadata/labels/added", "value": "yes"})
        self.mutating("m", hook("m.example.com"))
        code, body, _ = self.api.call("POST", CONFIGMAPS, configmap("patched"))
        self.assertEqual((code, body["metadata"]["labels"]), (201, {"added": "yes"}))
        self.caller.handlers["m.example.com"] = lambda request: patch(
            {"op": "add", "path": "/metadata/labels/bad label", "value": "yes"})
        code, body, _ = self.api.call("POST", CONFIGMAPS, configmap("invalid"))
        self.assertEqual(code, 422, body)

    def test_mutation_seen_by_validating(self):
        """Validating webhooks see the object as the mutating webhooks left it."""
        self.caller.handlers["m.example.com"] = lambda request: patch(
            {"op": "replace", "path": "/data/a", "value": "mutated"})
        self.mutating("m", hook("m.example.com"))
        self.validating("v", hook("v.example.com"))
        self.api.call("POST", CONFIGMAPS, configmap("cm"))
        self.assertEqual(self.caller.calls[-1][1]["request"]["object"]["data"],
                         {"a": "mutated"})

    def test_mutating_order(self):
        """Mutating webhooks run by configuration name, then in their order."""
        self.mutating("b", hook("b1.example.com"), hook("b0.example.com"))
        self.mutating("a", hook("a.example.com"))
        self.api.call("POST", CONFIGMAPS, configmap("cm"))
        self.assertEqual([name for name, _ in self.caller.calls],
                         ["a.example.com", "b1.example.com", "b0.example.com"])

    def test_reinvocation(self):
        """An IfNeeded webhook is called once more when a later webhook changed the object."""
        self.caller.handlers["b.example.com"] = lambda request: patch(
            {"op": "add", "path": "/data/b", "value": "1"}) if "b" not in request["object"][
                "data"] else {}
        self.mutating("a", hook("a.example.com", reinvocationPolicy="IfNeeded"),
                      hook("never.example.com"))
        self.mutating("b", hook("b.example.com"))
        self.api.call("POST", CONFIGMAPS, configmap("cm"))
        self.assertEqual([name for name, _ in self.caller.calls],
                         ["a.example.com", "never.example.com", "b.example.com",
                          "a.example.com"])
        self.assertEqual(self.caller.calls[-1][1]["request"]["object"]["data"],
                         {"a": "1", "b": "1"})

    def test_no_reinvocation_without_change(self):
        """An IfNeeded webhook is not called again when nothing changed after it."""
        self.mutating("a", hook("a.example.com", reinvocationPolicy="IfNeeded"))
        self.mutating("b", hook("b.example.com"))
        self.api.call("POST", CONFIGMAPS, configmap("cm"))
        self.assertEqual(len(self.caller.calls), 2)

    def test_failure_policy(self):
        """A failing call refuses with a 500 under Fail, and is skipped under Ignore."""
        def broken(request):
            raise CallError('failed to call webhook: Post "https://x/": connection refused')
        self.caller.handlers["fail.example.com"] = broken
        self.caller.handlers["ignore.example.com"] = broken
        self.validating("v", hook("ignore.example.com", failurePolicy="Ignore"))
        code, _, _ = self.api.call("POST", CONFIGMAPS, configmap("passes"))
        self.assertEqual(code, 201)
        self.validating("w", hook("fail.example.com"))
        code, body, _ = self.api.call("POST", CONFIGMAPS, configmap("refused"))
        self.assertEqual((code, body["message"]), (
            500, 'Internal error occurred: failed calling webhook "fail.example.com": '
                 'failed to call webhook: Post "https://x/": connection refused'))

    def test_bad_answers_are_failures(self):
        """An answer with another uid, a patch from a validating webhook or junk fails the call."""
        self.validating("v", hook("v.example.com"))
        for fields, reason in (
                ({"uid": "other"}, "expected response.uid="),
                (patch({"op": "add", "path": "/data/x", "value": "1"}),
                 "validating webhooks may not return patches"),
                (b"not json", "received invalid webhook response"),
                (b'{"apiVersion": "v1", "kind": "Status"}', "expected webhook response of")):
            self.caller.handlers["v.example.com"] = lambda request, fields=fields: fields
            code, body, _ = self.api.call("POST", CONFIGMAPS, configmap("refused"))
            self.assertEqual(code, 500)
            self.assertIn(reason, body["message"])

    def test_warnings_and_audit_annotations(self):
        """Warnings become Warning headers; audit annotations go to the request's audit event."""
        recorded = []
        self.caller.handlers["v.example.com"] = lambda request: {
            "warnings": ["careful"], "auditAnnotations": {"key": "value"}}
        original = self.plugin.validate

        def spy(attributes):
            attributes.audit_annotation = lambda key, value: recorded.append((key, value))
            return original(attributes)
        self.plugin.validate = spy
        self.validating("v", hook("v.example.com"))
        code, _, headers = self.api.call("POST", CONFIGMAPS, configmap("warned"))
        self.assertEqual(code, 201)
        self.assertEqual(headers.getRawHeaders(b"warning"), [b'299 - "careful"'])
        self.assertEqual(recorded, [("v.example.com/key", "value")])

    def test_rules_select(self):
        """Operations, resources and subresources not in the rules are not sent."""
        self.validating("v", hook("v.example.com", operations=("UPDATE",)))
        self.api.call("POST", CONFIGMAPS, configmap("cm"))
        self.api.call("POST", "/api/v1/namespaces/default/secrets",
                      {"metadata": {"name": "s"}})
        self.assertEqual(self.caller.calls, [])

    def test_delete_sent_to_mutating_and_validating(self):
        """A deletion reaches matching mutating, then validating, webhooks with oldObject."""
        self.api.call("POST", CONFIGMAPS, configmap("cm"))
        self.mutating("m", hook("m.example.com", operations=("DELETE",)))
        self.validating("v", hook("v.example.com", operations=("DELETE",)))
        code, _, _ = self.api.call("DELETE", CONFIGMAPS + "/cm")
        self.assertEqual(code, 200)
        self.assertEqual([(name, review["request"]["oldObject"]["metadata"]["name"])
                          for name, review in self.caller.calls],
                         [("m.example.com", "cm"), ("v.example.com", "cm")])

    def test_object_selector(self):
        """Only objects whose labels match the objectSelector are sent."""
        self.validating("v", hook("v.example.com",
                                  objectSelector={"matchLabels": {"checked": "yes"}}))
        self.api.call("POST", CONFIGMAPS, configmap("skipped"))
        self.api.call("POST", CONFIGMAPS, configmap("checked", labels={"checked": "yes"}))
        self.assertEqual([review["request"]["name"] for _, review in self.caller.calls],
                         ["checked"])

    def test_namespace_selector_for_namespace(self):
        """A Namespace's own labels are what the namespaceSelector of its writes reads."""
        self.validating("v", hook("v.example.com", resources=("namespaces",),
                                  namespaceSelector={"matchLabels": {"team": "a"}}))
        self.api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "other"}})
        self.api.call("POST", "/api/v1/namespaces",
                      {"metadata": {"name": "teams", "labels": {"team": "a"}}})
        self.assertEqual([review["request"]["name"] for _, review in self.caller.calls],
                         ["teams"])

    def test_match_conditions(self):
        """A webhook is called only when every matchCondition is true."""
        self.validating("v", hook("v.example.com", matchConditions=[
            {"name": "named", "expression": "object.metadata.name.startsWith('checked')"},
            {"name": "not-dry", "expression": "!request.dryRun"}]))
        self.api.call("POST", CONFIGMAPS, configmap("skipped"))
        self.api.call("POST", CONFIGMAPS + "?dryRun=All", configmap("checked-dry"))
        self.api.call("POST", CONFIGMAPS, configmap("checked"))
        self.assertEqual([review["request"]["name"] for _, review in self.caller.calls],
                         ["checked"])

    def test_match_condition_error(self):
        """A condition that fails to evaluate refuses under Fail and skips under Ignore."""
        self.validating("v", hook("v.example.com", matchConditions=[
            {"name": "missing", "expression": "object.spec.replicas > 1"}]))
        code, body, _ = self.api.call("POST", CONFIGMAPS, configmap("cm"))
        self.assertEqual(code, 500)
        self.assertIn('failed calling webhook "v.example.com": failed to evaluate match '
                      'conditions', body["message"])
        self.api.call("DELETE", f"{ADMISSION}/validatingwebhookconfigurations/v")
        self.validating("w", hook("w.example.com", failurePolicy="Ignore", matchConditions=[
            {"name": "missing", "expression": "object.spec.replicas > 1"}]))
        code, _, _ = self.api.call("POST", CONFIGMAPS, configmap("cm"))
        self.assertEqual((code, self.caller.calls), (201, []))

    def test_configurations_exempt(self):
        """Writes of the webhook configurations are never sent to webhooks."""
        everything = hook("all.example.com", operations=("*",), resources=("*",))
        everything["rules"][0].update(apiGroups=["*"], apiVersions=["*"])
        self.validating("v", everything)
        self.mutating("m", everything)
        self.api.call("DELETE", f"{ADMISSION}/validatingwebhookconfigurations/v")
        self.assertEqual(self.caller.calls, [])

    def test_dry_run_side_effects(self):
        """A dry run reaching a webhook with side effects is refused (a stored v1beta1 value)."""
        self.plugin.configure(validating=[{"metadata": {"name": "v"}, "webhooks": [
            dict(hook("v.example.com"), sideEffects="Some")]}])
        code, body, _ = self.api.call("POST", CONFIGMAPS + "?dryRun=All", configmap("cm"))
        self.assertEqual((code, body["message"]),
                         (400, 'admission webhook "v.example.com" does not support dry run'))

    def test_review_version(self):
        """The review is v1beta1 for a webhook taking only that, upstream-named when asked."""
        self.validating("v", hook("v.example.com", admissionReviewVersions=["v1beta1"]))
        self.api.call("POST", CONFIGMAPS, configmap("cm"))
        self.assertEqual(self.caller.calls[-1][1]["apiVersion"], "admission.orch.io/v1beta1")
        self.plugin._upstream_group_names = True
        self.api.call("POST", CONFIGMAPS, configmap("cm2"))
        self.assertEqual(self.caller.calls[-1][1]["apiVersion"], "admission.k8s.io/v1beta1")

    def test_equivalent_version_and_group(self):
        """Under Equivalent a rule for another served version or the k8s.io spelling matches."""
        plugin = WebhookAdmission(MemoryStore(), self.caller,
                                  lambda group, resource: ["v1", "v2"])
        version = hook("version.example.com", resources=("horizontalpodautoscalers",))
        version["rules"][0].update(apiGroups=["autoscaling"], apiVersions=["v1"])
        group = hook("group.example.com", resources=("roles",))
        group["rules"][0].update(apiGroups=["rbac.authorization.k8s.io"])
        exact = [dict(version, name="exact-version.example.com", matchPolicy="Exact"),
                 dict(group, name="exact-group.example.com", matchPolicy="Exact")]
        plugin.configure(validating=[{"metadata": {"name": "v"},
                                      "webhooks": [version, group] + exact}])
        api = APIHarness(plugins=(plugin,))
        code, body, _ = api.call(
            "POST", "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers", {
                "metadata": {"name": "h"}, "spec": {
                    "scaleTargetRef": {"kind": "Deployment", "name": "d"}, "maxReplicas": 2}})
        self.assertEqual(code, 201, body)
        code, body, _ = api.call(
            "POST", "/apis/rbac.authorization.orch.io/v1/namespaces/default/roles",
            {"metadata": {"name": "r"}, "rules": []})
        self.assertEqual(code, 201, body)
        self.assertEqual([(name, review["request"]["kind"]["version"],
                           review["request"]["requestKind"]["version"],
                           review["request"]["object"]["apiVersion"])
                          for name, review in self.caller.calls],
                         [("version.example.com", "v1", "v2", "autoscaling/v1"),
                          ("group.example.com", "v1", "v1", "rbac.authorization.orch.io/v1")])

    def test_call_time_reported(self):
        """A request that calls a webhook carries the time of the call as excluded time."""
        timings = []
        record = self.api.metrics.record

        def recorded(request, timing):
            timings.append((request.method, timing))
            record(request, timing)

        self.validating("v", hook("v.example.com"))
        self.api.metrics.record = recorded
        code, _, _ = self.api.call("POST", CONFIGMAPS, configmap("timed"))
        self.assertEqual(code, 201)
        [(_, timing)] = timings
        self.assertGreater(timing.excluded, 0)


class SlowListing:
    """Reads whose first listing waits until the test lets it through."""

    def __init__(self, store):
        self.store = store
        self.gate = Deferred()

    def list(self, prefix):
        listed = self.store.list(prefix)
        return self.gate.addCallback(lambda _: listed)

    def watch(self, *args):
        return self.store.watch(*args)

    def get(self, key):
        return self.store.get(key)


class SyncTests(SynchronousTestCase):
    def test_writes_wait_for_listing(self):
        """A write before the configurations are listed waits, then meets their webhooks."""
        store = MemoryStore()
        caller = FakeCaller()
        caller.handlers["v.example.com"] = lambda request: {"allowed": False}
        reads = SlowListing(store)
        plugin = WebhookAdmission(reads, caller)
        api = APIHarness(store=store, plugins=(plugin,))
        api.call("POST", f"{ADMISSION}/validatingwebhookconfigurations", {
            "metadata": {"name": "v"}, "webhooks": [hook("v.example.com")]})
        plugin.startService()
        self.addCleanup(plugin.stopService)
        attributes = AdmissionAttributes(CREATE, api.catalog.lookup("", "v1", "configmaps")[0],
                                         "default", "cm", configmap("cm"), None, UserInfo("u"))
        pending = plugin.validate(attributes)
        result = Deferred.fromCoroutine(pending)
        self.assertNoResult(result)
        reads.gate.callback(None)
        self.assertEqual(self.failureResultOf(result).value.code, 400)

    def test_denial_wins_over_failure(self):
        """Among parallel validating webhooks a denial is answered rather than a call failure."""
        caller = FakeCaller()

        def broken(request):
            raise CallError("down")
        caller.handlers["a.example.com"] = broken
        caller.handlers["b.example.com"] = lambda request: {"allowed": False}
        plugin = WebhookAdmission(MemoryStore(), caller)
        plugin.configure(validating=[{"metadata": {"name": "v"}, "webhooks": [
            hook("a.example.com"), hook("b.example.com")]}])
        api = APIHarness(plugins=(plugin,))
        code, body, _ = api.call("POST", CONFIGMAPS, configmap("cm"))
        self.assertEqual(code, 400, body)

