"""Audit events of requests served by the in-memory API server, field by field."""

import gc

import orjson
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from orchd.api.errors import StatusError
from orchd.auth.authz.always import AlwaysAllow, PrivilegedGroups
from orchd.auth.interfaces import Decision
from orchd.auth.user import UserInfo
from orchd.server.audit.interfaces import IAuditSink
from orchd.server.audit.memory import MemorySink
from orchd.server.audit.record import Body, encode_event
from orchd.server import site
from orchd.server.filters.limits import InflightLimiter
from orchd.timing.seconds import micro_time
from tests.server.test_watch import Stream
from tests.support import ALICE, APIHarness

CM = "/api/v1/namespaces/default/configmaps"
SECRETS = "/api/v1/namespaces/default/secrets"


def policy(*rules, **top):
    return {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": list(rules), **top}


class DenySecrets:
    """Forbids everything on secrets, with a reason; no opinion on the rest."""

    async def authorize(self, attributes):
        if attributes.resource == "secrets":
            return Decision.DENY, "secrets are off limits"
        return Decision.NO_OPINION, ""


class EventTests(SynchronousTestCase):
    def harness(self, *rules, **kwargs):
        top = kwargs.pop("top", {})
        self.api = APIHarness(audit_policy=policy(*rules, **top), **kwargs)
        self.api.audit.events.clear()
        return self.api

    def events(self, stage="ResponseComplete"):
        return self.api.audit.stages(stage)

    def test_earlier_stage_keeps_its_annotations(self):
        """RequestReceived shows the annotations of its moment; the last event all of them."""
        api = self.harness({"level": "Metadata"})
        api.call("POST", CM, {"metadata": {"name": "c"}})
        received, complete = api.audit.events
        self.assertNotIn("annotations", received)
        self.assertEqual(complete["annotations"]["authorization.k8s.io/decision"], "allow")
        api.call("GET", CM + "/c")
        second_received = api.audit.events[2]
        self.assertEqual(second_received["stage"], "RequestReceived")
        self.assertNotIn("annotations", second_received)

    def test_user_of_events_is_the_users_dict(self):
        """Events of one user share one read-only dict of the user, equal to its to_dict()."""
        user = UserInfo("jane", ("devs", "system:authenticated"), uid="7", extra={"k": ["v"]})
        self.assertIs(user.shared_dict(), user.shared_dict())
        self.assertEqual(user.shared_dict(), user.to_dict())
        self.assertIsNot(user.to_dict(), user.to_dict())

    def test_create_metadata_event(self):
        """A create at Metadata level: upstream's fields, no bodies, the object named."""
        api = self.harness({"level": "Metadata"})
        code, obj, headers = api.call("POST", CM, {"metadata": {"name": "c"}},
                                      headers={b"user-agent": [b"kubectl/v1.31"],
                                               b"x-forwarded-for": [b"10.0.0.1, bogus, 10.0.0.2"]})
        self.assertEqual(code, 201)
        received, complete = api.audit.events
        self.assertEqual(received["stage"], "RequestReceived")
        self.assertNotIn("responseStatus", received)
        self.assertEqual(complete["stage"], "ResponseComplete")
        self.assertEqual(complete["auditID"], received["auditID"])
        self.assertEqual(headers.getRawHeaders(b"audit-id"), [complete["auditID"].encode()])
        self.assertEqual(complete["kind"], "Event")
        self.assertEqual(complete["apiVersion"], "audit.k8s.io/v1")
        self.assertEqual(complete["level"], "Metadata")
        self.assertEqual(complete["verb"], "create")
        self.assertEqual(complete["requestURI"], CM)
        self.assertEqual(complete["user"]["username"], "orch-admin")
        self.assertEqual(complete["userAgent"], "kubectl/v1.31")
        self.assertEqual(complete["sourceIPs"][:2], ["10.0.0.1", "10.0.0.2"])
        self.assertEqual(complete["objectRef"], {"resource": "configmaps", "namespace": "default",
                                                 "name": "c", "apiVersion": "v1"})
        self.assertEqual(complete["responseStatus"], {"metadata": {}, "code": 201})
        self.assertEqual(complete["annotations"]["authorization.k8s.io/decision"], "allow")
        self.assertNotIn("requestObject", complete)
        self.assertNotIn("responseObject", complete)
        self.assertEqual(complete["requestReceivedTimestamp"], micro_time(api.clock.seconds()))
        orjson.loads(encode_event(complete))

    def test_source_ips(self):
        """X-Real-Ip counts without X-Forwarded-For; the peer comes last, once; junk is left out."""
        api = self.harness({"level": "Metadata", "omitStages": ["RequestReceived"]})
        api.call("GET", CM, headers={b"x-real-ip": [b"10.1.1.1"]})
        api.call("GET", CM, headers={b"X-Forwarded-For": [b"10.2.2.2", b"10.3.3.3, junk"],
                                     b"X-Real-Ip": [b"10.2.2.2"]})
        api.call("GET", CM)
        first, second, third = (event["sourceIPs"] for event in self.events())
        self.assertEqual(first[0], "10.1.1.1")
        self.assertEqual(second[:2], ["10.2.2.2", "10.3.3.3"])
        self.assertEqual(len(first), 2)
        self.assertEqual(len(second), 3)
        self.assertEqual(third, first[1:])
        self.assertNotIn("userAgent", third)

    def test_get_object_ref(self):
        """A get of a grouped resource names group, version, namespace and name."""
        api = self.harness({"level": "Metadata", "omitStages": ["RequestReceived"]})
        api.call("POST", "/apis/apps/v1/namespaces/default/deployments", {
            "metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
                                                "template": {"metadata": {"labels": {"a": "b"}},
                                                             "spec": {"containers": [
                                                                 {"name": "c", "image": "i"}]}}}})
        api.call("GET", "/apis/apps/v1/namespaces/default/deployments/d/scale")
        event = self.events()[-1]
        self.assertEqual(event["verb"], "get")
        self.assertEqual(event["objectRef"], {
            "resource": "deployments", "namespace": "default", "name": "d",
            "apiGroup": "apps", "apiVersion": "v1", "subresource": "scale"})
        self.assertEqual(len(api.audit.events), 2)    # no RequestReceived

    def test_request_and_response_bodies(self):
        """Request adds the request body, RequestResponse the answer, managed fields omitted."""
        api = self.harness({"level": "RequestResponse", "verbs": ["update"]},
                           {"level": "Request"}, top={"omitManagedFields": True})
        _, created, _ = api.call("POST", CM, {"metadata": {"name": "c"}, "data": {"k": "v"}})
        event = self.events()[-1]
        self.assertEqual(event["level"], "Request")
        self.assertEqual(event["requestObject"].decode(),
                         {"metadata": {"name": "c"}, "data": {"k": "v"}})
        self.assertNotIn("responseObject", event)
        created["data"] = {"k": "w"}
        api.call("PUT", CM + "/c", created)
        event = orjson.loads(encode_event(self.events()[-1]))
        self.assertEqual(event["level"], "RequestResponse")
        self.assertEqual(event["requestObject"]["data"], {"k": "w"})
        self.assertEqual(event["responseObject"]["data"], {"k": "w"})
        self.assertNotIn("managedFields", event["responseObject"]["metadata"])
        self.assertEqual(event["objectRef"]["uid"], created["metadata"]["uid"])
        self.assertEqual(event["objectRef"]["resourceVersion"],
                         created["metadata"]["resourceVersion"])

    def test_managed_fields_kept_by_default(self):
        """Without omitManagedFields the response's managed fields are logged."""
        api = self.harness({"level": "RequestResponse"})
        api.call("POST", CM + "?fieldManager=tester",
                 {"metadata": {"name": "c"}, "data": {"k": "v"}})
        body = self.events()[-1]["responseObject"].decode()
        self.assertIn("managedFields", body["metadata"])

    def test_non_resource_no_bodies(self):
        """A non-resource request is audited with its method as verb and without bodies."""
        api = self.harness({"level": "RequestResponse"})
        code, _, headers = api.call("GET", "/version")
        event = self.events()[-1]
        self.assertEqual((event["verb"], event["requestURI"]), ("get", "/version"))
        self.assertNotIn("objectRef", event)
        self.assertNotIn("responseObject", event)
        self.assertEqual(event["responseStatus"]["code"], code)

    def test_secret_bodies_at_the_policy_level(self):
        """A Secret's data is in the event only at the level the policy gives Secrets."""
        api = self.harness({"level": "Metadata", "resources": [{"group": "",
                                                                "resources": ["secrets"]}]},
                           {"level": "RequestResponse"})
        api.call("POST", SECRETS, {"metadata": {"name": "s"}, "data": {"k": "c2VjcmV0"}})
        event = self.events()[-1]
        self.assertEqual(event["level"], "Metadata")
        self.assertNotIn(b"c2VjcmV0", encode_event(event))

    def test_denied(self):
        """A 403 carries the forbid decision, the reason and the Status."""
        api = self.harness({"level": "Metadata"},
                           authorizers=[DenySecrets(), PrivilegedGroups(), AlwaysAllow()])
        api.as_user(UserInfo("eve", ("system:authenticated",)))
        code, status, headers = api.call("GET", SECRETS + "/s")
        self.assertEqual(code, 403)
        event = self.events()[-1]
        self.assertEqual(event["annotations"], {"authorization.k8s.io/decision": "forbid",
                                                "authorization.k8s.io/reason":
                                                    "secrets are off limits"})
        self.assertEqual(event["responseStatus"]["code"], 403)
        self.assertEqual(event["responseStatus"]["reason"], "Forbidden")
        self.assertEqual(event["responseStatus"]["message"], status["message"])
        self.assertEqual(headers.getRawHeaders(b"audit-id"), [event["auditID"].encode()])

    def test_too_many_requests(self):
        """A 429 is audited and answered with an Audit-ID."""
        api = self.harness({"level": "Metadata"}, user=ALICE)     # the cluster's admins are exempt
        api.resource.limiter = InflightLimiter(1, 1)
        held = api.resource.limiter.acquire(_ListInfo(), ALICE)
        self.addCleanup(api.resource.limiter.release, held)
        code, _, headers = api.call("GET", CM)
        self.assertEqual(code, 429)
        event = self.events()[-1]
        self.assertEqual(event["responseStatus"]["code"], 429)
        self.assertEqual(headers.getRawHeaders(b"audit-id"), [event["auditID"].encode()])

    def test_unauthenticated(self):
        """A 401 is one ResponseStarted event without a user, as upstream's."""
        api = self.harness({"level": "Metadata"})

        async def refuse(request):
            raise StatusError.unauthorized()
        api.authenticator.authenticate = refuse
        code, _, headers = api.call("GET", CM)
        self.assertEqual(code, 401)
        (event,) = api.audit.events
        self.assertEqual(event["stage"], "ResponseStarted")
        self.assertEqual(event["user"], {})
        self.assertEqual(event["responseStatus"]["code"], 401)
        self.assertEqual(headers.getRawHeaders(b"audit-id"), [event["auditID"].encode()])

    def test_impersonation(self):
        """The impersonated user is recorded beside the real one; the policy sees the real one."""
        api = self.harness({"level": "None", "users": ["bob"]}, {"level": "Metadata"})
        api.call("GET", CM, headers={b"Impersonate-User": [b"bob"]})
        event = self.events()[-1]
        self.assertEqual(event["user"]["username"], "orch-admin")
        self.assertEqual(event["impersonatedUser"]["username"], "bob")

    def test_incoming_audit_id_honoured(self):
        """A client's Audit-ID is used for its request's events and echoed back."""
        api = self.harness({"level": "Metadata"})
        _, _, headers = api.call("GET", CM, headers={b"Audit-ID": [b"my-trace-1"]})
        self.assertEqual(headers.getRawHeaders(b"audit-id"), [b"my-trace-1"])
        self.assertEqual(self.events()[-1]["auditID"], "my-trace-1")

    def test_audit_id_without_auditing(self):
        """Every response carries a fresh Audit-ID even when nothing is audited."""
        api = APIHarness()
        ids = {api.call("GET", CM)[2].getRawHeaders(b"audit-id")[0] for _ in range(3)}
        ids.add(api.call("GET", CM + "/missing")[2].getRawHeaders(b"audit-id")[0])
        self.assertEqual(len(ids), 4)
        self.assertEqual(api.audit.events, [])

    def test_watch_stages(self):
        """A watch has ResponseStarted when it starts and ResponseComplete when it ends."""
        api = self.harness({"level": "Metadata"})
        stream = Stream(api, CM + "?watch=true&timeoutSeconds=5")
        self.assertEqual([e["stage"] for e in api.audit.events],
                         ["RequestReceived", "ResponseStarted"])
        self.assertEqual(api.audit.events[1]["verb"], "watch")
        stream.pump(6)
        self.assertTrue(stream.ended)
        self.assertEqual([e["stage"] for e in api.audit.events],
                         ["RequestReceived", "ResponseStarted", "ResponseComplete"])
        self.assertEqual(api.audit.events[2]["responseStatus"]["code"], 200)

    def test_panic(self):
        """A bug while serving ends the event with stage Panic and a 500."""
        api = self.harness({"level": "Metadata"})

        async def broken(scope):
            raise RuntimeError("boom")
        self.patch(site, "VERB_HANDLERS", {**site.VERB_HANDLERS, "list": broken})
        code, _, _ = api.call("GET", CM)
        self.assertEqual(code, 500)
        self.flushLoggedErrors(RuntimeError)
        event = api.audit.events[-1]
        self.assertEqual(event["stage"], "Panic")
        self.assertEqual(event["responseStatus"]["code"], 500)

    def test_admission_annotation(self):
        """What an admission plugin adds with add_audit_annotation is in the event."""
        class Annotate:
            def admit(self, attributes):
                attributes.add_audit_annotation("example.orch.io/seen", attributes.name)

            def validate(self, attributes):
                pass
        api = self.harness({"level": "Metadata"}, plugins=(Annotate(),))
        api.call("POST", CM, {"metadata": {"name": "c"}})
        self.assertEqual(self.events()[-1]["annotations"]["example.orch.io/seen"], "c")

    def test_level_none_no_event(self):
        """A request the policy leaves at None has no event."""
        api = self.harness({"level": "None", "resources": [{"group": "",
                                                            "resources": ["configmaps"]}]},
                           {"level": "Metadata"})
        api.call("GET", CM)
        self.assertEqual(api.audit.events, [])

    def test_audited_request_freed_without_collector(self):
        """An audited request and its record are freed by reference counting, not left in a cycle."""
        api = self.harness({"level": "RequestResponse"})
        api.call("POST", CM, {"metadata": {"name": "c"}})
        gc.collect()
        self.addCleanup(gc.enable)
        self.addCleanup(gc.set_debug, gc.get_debug())
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        api.call("GET", CM + "/c")
        api.call("PUT", CM + "/c", {"metadata": {"name": "c"}, "data": {"k": "v"}})
        gc.collect()
        cyclic = {type(o).__name__ for o in gc.garbage}
        del gc.garbage[:]
        self.assertEqual(len(self.events()), 3)
        self.assertEqual(cyclic & {"APIRequest", "AuditRecord", "Headers"}, set())


class _ListInfo:
    is_resource_request = True
    verb = "list"
    subresource = ""


class PiecesTests(SynchronousTestCase):
    def test_body_decoding(self):
        """JSON and YAML bodies decode; others, and broken ones, are left out."""
        self.assertEqual(Body(b'{"a": 1}', b"application/json; charset=utf-8").decode(), {"a": 1})
        self.assertEqual(Body(b"a: 1\n", b"application/yaml").decode(), {"a": 1})
        self.assertIsNone(Body(b"\x0a\x00", b"application/vnd.kubernetes.protobuf").decode())
        self.assertIsNone(Body(b"{", b"application/json").decode())
        # Without a Content-Type the server reads a body as JSON, and so does the record.
        self.assertEqual(Body(b'{"a": 1}', None).decode(), {"a": 1})
        listed = Body(b'{"items": [{"metadata": {"managedFields": [], "name": "a"}}]}',
                      b"application/json", omit_managed_fields=True).decode()
        self.assertEqual(listed, {"items": [{"metadata": {"name": "a"}}]})

    def test_memory_sink(self):
        """The in-memory sink provides IAuditSink and keeps events in order."""
        sink = MemorySink()
        verifyObject(IAuditSink, sink)
        sink.write({"stage": "ResponseComplete", "n": 1})
        self.assertEqual(sink.stages(), [{"stage": "ResponseComplete", "n": 1}])


class ProtobufBodyTests(SynchronousTestCase):
    def test_protobuf_response_left_out(self):
        """A protobuf answer is not logged as a body (nor as null)."""
        api = APIHarness(audit_policy=policy({"level": "RequestResponse"}))
        api.call("POST", CM, {"metadata": {"name": "c"}})
        code, _, _ = api.call("GET", CM + "/c", headers={
            b"accept": [b"application/vnd.kubernetes.protobuf"]})
        self.assertEqual(code, 200)
        event = api.audit.stages()[-1]
        self.assertEqual(event["verb"], "get")
        self.assertNotIn("responseObject", event)
