"""
Tests for L{orchd.auth.authz.webhook}: decisions, caching and failures with a
fake HTTP client and a L{Clock}. The end-to-end run over real TLS is in
L{tests.integration.test_authz_webhook}.
"""

import json

from twisted.internet.defer import CancelledError, Deferred, fail, succeed
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.task import Clock
from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from orchd.tls.certs import certificate_pem, create_ca, issue_certificate
from orchd.auth.attributes import Attributes
from orchd.auth.authz.webhook import (
    ExpiringCache, WebhookAuthorizer, parse_status, review_body, review_spec,
)
from orchd.auth.interfaces import AuthorizerError, Decision, IAuthorizer
from orchd.auth.user import AUTHENTICATED, UserInfo
from orchd.client.orchconfig import write_orchconfig

URL = "https://authz.example/authorize"
ALICE = UserInfo("alice", ("devs", AUTHENTICATED), uid="u-1", extra={"scopes": ["a", "b"]})
GET_PODS = Attributes(ALICE, "get", namespace="team-a", api_version="v1", resource="pods",
                      name="web")


class FakeResponse:
    def __init__(self, code, body):
        self.code = code
        self._body = body

    def content(self):
        return succeed(self._body)


class FakeClient:
    """Records each POST and leaves it pending until the test answers it."""

    def __init__(self):
        self.requests = []

    def post(self, url, data=None, headers=None):
        request = {"url": url, "body": json.loads(data), "headers": headers,
                   "cancelled": False}
        request["result"] = Deferred(lambda _: request.update(cancelled=True))
        self.requests.append(request)
        return request["result"]

    def answer(self, code=200, body=None, **status):
        if body is None:
            body = json.dumps({"apiVersion": "authorization.orch.io/v1beta1",
                               "kind": "SubjectAccessReview", "status": status}).encode()
        self.requests[-1]["result"].callback(FakeResponse(code, body))


class WebhookTestCase(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.client = FakeClient()
        self.events = []
        self.authorizer = self.make()

    def make(self, **settings):
        authorizer = WebhookAuthorizer(self.client, URL, self.clock, **settings)
        authorizer.log = Logger(observer=self.events.append)
        return authorizer

    def ask(self, attributes=GET_PODS, authorizer=None):
        """Start an authorization; the result Deferred."""
        return Deferred.fromCoroutine((authorizer or self.authorizer).authorize(attributes))

    def decide(self, attributes=GET_PODS, **status):
        """Ask, answer with C{status} if a request went out, return the decision."""
        before = len(self.client.requests)
        result = self.ask(attributes)
        if len(self.client.requests) > before:
            self.client.answer(**status)
        return self.successResultOf(result)


class RequestTests(WebhookTestCase):
    def test_interface(self):
        """The authorizer provides IAuthorizer and cannot enumerate rules."""
        verifyObject(IAuthorizer, self.authorizer)
        self.assertEqual(self.authorizer.rules_for(ALICE, "team-a"), ([], [], True))

    def test_v1beta1_body(self):
        """v1beta1 reviews spell the groups field C{group}; empty attributes are left out."""
        self.decide(allowed=True)
        request = self.client.requests[0]
        self.assertEqual(request["url"], URL)
        self.assertEqual(request["headers"][b"content-type"], [b"application/json"])
        self.assertEqual(request["body"], {
            "apiVersion": "authorization.orch.io/v1beta1",
            "kind": "SubjectAccessReview",
            "spec": {
                "resourceAttributes": {"namespace": "team-a", "verb": "get", "version": "v1",
                                       "resource": "pods", "name": "web"},
                "user": "alice", "group": ["devs", AUTHENTICATED],
                "extra": {"scopes": ["a", "b"]}, "uid": "u-1",
            },
        })

    def test_v1_body(self):
        """v1 reviews use C{groups}; non-resource requests send path and verb."""
        authorizer = self.make(version="v1")
        result = self.ask(Attributes(UserInfo("bob", ("ops",)), "get", False, "/healthz"),
                          authorizer)
        self.client.answer(allowed=True)
        self.successResultOf(result)
        self.assertEqual(self.client.requests[0]["body"], {
            "apiVersion": "authorization.orch.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"},
                     "user": "bob", "groups": ["ops"]},
        })

    def test_spec_helpers(self):
        """An empty resource request still names resourceAttributes; v1 bodies keep groups."""
        spec = review_spec(Attributes(UserInfo(""), ""))
        self.assertEqual(spec, {"resourceAttributes": {}})
        self.assertEqual(review_body({"groups": ["g"]}, "v1")["spec"], {"groups": ["g"]})
        self.assertEqual(review_body({"groups": ["g"]}, "v1beta1")["spec"], {"group": ["g"]})

    def test_bad_version(self):
        """Only v1 and v1beta1 are spoken."""
        self.assertRaises(ValueError, WebhookAuthorizer, self.client, URL, self.clock, "v2")


class DecisionTests(WebhookTestCase):
    def test_allowed(self):
        """allowed allows, with the service's reason."""
        self.assertEqual(self.decide(allowed=True, reason="policy 7"),
                         (Decision.ALLOW, "policy 7"))

    def test_denied(self):
        """denied denies, so later modes are not asked."""
        self.assertEqual(self.decide(allowed=False, denied=True, reason="no"),
                         (Decision.DENY, "no"))

    def test_neither(self):
        """Neither allowed nor denied is no opinion, with the reason."""
        self.assertEqual(self.decide(allowed=False, reason="not mine"),
                         (Decision.NO_OPINION, "not mine"))
        self.assertEqual(self.decide(Attributes(ALICE, "list", resource="nodes")),
                         (Decision.NO_OPINION, ""))

    def test_both(self):
        """An answer both allowed and denied denies, and is logged."""
        self.assertEqual(self.decide(allowed=True, denied=True, reason="confused"),
                         (Decision.DENY, "confused"))
        self.assertEqual([e["log_level"].name for e in self.events], ["error"])

    def test_evaluation_error(self):
        """An evaluation error is read (and logged) without changing the decision."""
        self.assertEqual(self.decide(allowed=False, evaluationError="rule 3 broken"),
                         (Decision.NO_OPINION, ""))
        self.assertIn("rule 3 broken", [e.get("error") for e in self.events])

    def test_parse_status(self):
        """Any apiVersion is accepted; a missing status means no opinion."""
        status = parse_status(b'{"apiVersion": "authorization.k8s.io/v1", "kind": '
                              b'"SubjectAccessReview", "status": {"allowed": true}}')
        self.assertTrue(status.allowed)
        self.assertFalse(parse_status(b"{}").allowed)


class CacheTests(WebhookTestCase):
    def test_allow_cached_for_authorized_ttl(self):
        """An allow is reused until authorized_ttl has passed."""
        self.decide(allowed=True)
        self.clock.advance(299)
        self.assertEqual(self.decide(), (Decision.ALLOW, ""))
        self.assertEqual(len(self.client.requests), 1)
        self.clock.advance(1)
        self.decide(allowed=True)
        self.assertEqual(len(self.client.requests), 2)

    def test_other_answers_cached_for_unauthorized_ttl(self):
        """Denials and no-opinions are reused for the shorter unauthorized_ttl."""
        self.assertEqual(self.decide(denied=True, reason="no"), (Decision.DENY, "no"))
        self.clock.advance(29)
        self.assertEqual(self.decide(), (Decision.DENY, "no"))
        self.assertEqual(len(self.client.requests), 1)
        self.clock.advance(1)
        self.assertEqual(self.decide(allowed=True), (Decision.ALLOW, ""))
        self.assertEqual(len(self.client.requests), 2)

    def test_key_is_the_whole_spec(self):
        """Another verb, user, group or extra value is asked about separately."""
        self.decide(allowed=True)
        for attributes in (
            Attributes(ALICE, "delete", namespace="team-a", api_version="v1",
                       resource="pods", name="web"),
            Attributes(UserInfo("alice", ("devs", AUTHENTICATED), uid="u-1"), "get",
                       namespace="team-a", api_version="v1", resource="pods", name="web"),
            Attributes(UserInfo("bob"), "get", namespace="team-a", api_version="v1",
                       resource="pods", name="web"),
        ):
            self.decide(attributes, allowed=False)
        self.assertEqual(len(self.client.requests), 4)

    def test_configured_ttls(self):
        """The TTLs come from the constructor; zero means not cached."""
        authorizer = self.make(authorized_ttl=0, unauthorized_ttl=5)
        for _ in range(2):
            result = self.ask(authorizer=authorizer)
            self.client.answer(allowed=True)
            self.successResultOf(result)
        self.assertEqual(len(self.client.requests), 2)

    def test_large_requests_not_cached(self):
        """Requests whose own attributes are huge are not cached."""
        huge = Attributes(ALICE, "get", namespace="a", resource="pods", name="x" * 10000)
        self.decide(huge, allowed=True)
        self.decide(huge, allowed=True)
        self.assertEqual(len(self.client.requests), 2)

    def test_cache_is_bounded(self):
        """The least recently used entry goes when the cache is full."""
        clock = Clock()
        cache = ExpiringCache(clock, size=2)
        cache.put("a", 1, 10)
        cache.put("b", 2, 10)
        self.assertEqual(cache.get("a"), 1)
        cache.put("c", 3, 10)
        self.assertEqual((cache.get("a"), cache.get("b"), cache.get("c")), (1, None, 3))
        self.assertEqual(len(cache), 2)
        clock.advance(10)
        self.assertIsNone(cache.get("a"))
        self.assertEqual(len(cache), 1)


class FailureTests(WebhookTestCase):
    def assertFailed(self, result, text):
        """The call could not decide (naming C{text}), was logged, and the next call asks again."""
        error = self.failureResultOf(result, AuthorizerError).value
        self.assertIn(text, str(error))
        self.assertTrue(any(e["log_level"].name == "error" and text in e.get("error", "")
                            for e in self.events), self.events)
        before = len(self.client.requests)
        again = self.ask()
        self.assertEqual(len(self.client.requests), before + 1)
        again.cancel()
        self.failureResultOf(again, CancelledError)

    def test_http_error(self):
        """A non-2xx answer is a failure, not cached."""
        result = self.ask()
        self.client.answer(code=500, allowed=True)
        self.assertFailed(result, "HTTP 500")

    def test_bad_bodies(self):
        """Bodies that are not a SubjectAccessReview are failures."""
        bodies = [(b"<html>", "not JSON"), (b"[]", "not a JSON object"),
                  (b'{"kind": "Status", "status": "Failure"}', "Status"),
                  (b'{"status": []}', "not an object"),
                  (b'{"status": {"allowed": "yes"}}', "status.allowed"),
                  (b'{"status": {"reason": 3}}', "status.reason")]
        for body, text in bodies:
            result = self.ask()
            self.client.answer(body=body)
            self.assertFailed(result, text)

    def test_connection_error(self):
        """A connection that cannot be made is a failure, described by its cause."""
        result = self.ask()
        self.client.requests[-1]["result"].errback(ConnectionRefusedError())
        self.assertFailed(result, "Connection was refused")

    def test_timeout(self):
        """No answer within the timeout cancels the call and is a failure."""
        result = self.ask()
        self.assertNoResult(result)
        self.clock.advance(29)
        self.assertNoResult(result)
        self.clock.advance(1)
        self.assertTrue(self.client.requests[0]["cancelled"])
        self.assertFailed(result, "no answer within 30 s")

    def test_cancelled_by_caller(self):
        """When the caller gives up, the call is cancelled and nothing is logged."""
        result = self.ask()
        result.cancel()
        self.failureResultOf(result, CancelledError)
        self.assertTrue(self.client.requests[0]["cancelled"])
        self.assertEqual(self.events, [])

    def test_unexpected_client_error(self):
        """Even an unexpected exception from the client is an AuthorizerError, nothing else."""
        class Broken:
            def post(self, url, data=None, headers=None):
                return fail(RuntimeError("boom"))
        authorizer = WebhookAuthorizer(Broken(), URL, self.clock)
        authorizer.log = Logger(observer=self.events.append)
        error = self.failureResultOf(self.ask(authorizer=authorizer), AuthorizerError).value
        self.assertIn("boom", str(error))


class ConfigTests(SynchronousTestCase):
    def test_unusable_configs(self):
        """A bad version, missing file, non-URL server or lone certificate is refused."""
        ca, ca_key = create_ca()
        cert, _ = issue_certificate(ca, ca_key, "apiserver", client=True)
        missing = self.mktemp()
        no_scheme, lone_cert = self.mktemp(), self.mktemp()
        write_orchconfig(no_scheme, "authz.example:443", certificate_pem(ca))
        write_orchconfig(lone_cert, URL, certificate_pem(ca), certificate_pem(cert))
        cases = [(missing, "v1beta1", missing), (missing, "v2", "v2"),
                 (no_scheme, "v1", "https://"), (lone_cert, "v1", "certificate")]
        for path, version, text in cases:
            with self.assertRaises(ValueError) as caught:
                WebhookAuthorizer.from_config_file(path, Clock(), version)
            message = str(caught.exception)
            self.assertIn(text, message)
            self.assertNotIn("\n", message)
