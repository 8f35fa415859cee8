"""The AdmissionReview sent to webhooks and the reading of their answers."""

import base64
import json

from twisted.trial.unittest import SynchronousTestCase

from orchd.admission.interfaces import CREATE, AdmissionAttributes
from orchd.admission.webhook.review import (
    CallError, call_failure, denial, parse_answer, review_body, review_request,
)
from orchd.api.kinds import KindInfo
from orchd.auth.user import UserInfo


def answer(version="v1", group="admission.orch.io", **response):
    return json.dumps({"apiVersion": f"{group}/{version}", "kind": "AdmissionReview",
                       "response": {"uid": "u", "allowed": True, **response}}).encode()


class ParseAnswerTests(SynchronousTestCase):
    def test_allowed(self):
        """An allowing answer in either spelling of the group is read."""
        for group in ("admission.orch.io", "admission.k8s.io"):
            self.assertTrue(parse_answer(answer(group=group), "u", "v1", False).allowed)

    def test_patch(self):
        """A mutating webhook's base64 JSONPatch is decoded."""
        operations = [{"op": "add", "path": "/a", "value": 1}]
        patch = base64.b64encode(json.dumps(operations).encode()).decode()
        parsed = parse_answer(answer(patchType="JSONPatch", patch=patch), "u", "v1", True)
        self.assertEqual(parsed.patch, operations)

    def test_refused(self):
        """Upstream's reasons for unusable answers."""
        patch = base64.b64encode(b"[]").decode()
        for content, mutating, reason in (
                (answer(uid="v"), False, "expected response.uid='u', got 'v'"),
                (answer(version="v1beta1"), False, "expected webhook response of "
                 "admission.orch.io/v1, Kind=AdmissionReview, got admission.orch.io/v1beta1"),
                (answer(patch=patch), True,
                 "webhook returned response.patch but not response.patchType"),
                (answer(patchType="JSONPatch"), True,
                 "webhook returned response.patchType but not response.patch"),
                (answer(patchType="Merge", patch=patch), True,
                 "webhook returned invalid response.patchType of 'Merge'"),
                (answer(patchType="JSONPatch", patch=patch), False,
                 "validating webhooks may not return patches"),
                (answer(allowed="yes"), False,
                 "received invalid webhook response: response.allowed is not a boolean"),
                (b'{"apiVersion": "admission.orch.io/v1", "kind": "AdmissionReview"}', False,
                 "webhook response was absent"),
                (b"[" * 20000, False, "received invalid webhook response")):
            with self.assertRaises(CallError, msg=reason) as raised:
                parse_answer(content, "u", "v1", mutating)
            self.assertTrue(str(raised.exception).startswith(reason), str(raised.exception))

    def test_v1beta1_uid_not_checked(self):
        """A v1beta1 answer is not held to the uid, as upstream."""
        self.assertTrue(parse_answer(answer(version="v1beta1", uid="other"), "u", "v1beta1",
                                     False).allowed)


class MessageTests(SynchronousTestCase):
    def test_denial(self):
        """A denial keeps the webhook's code, reason and details; its message is prefixed."""
        error = denial("w.example.com", {"code": 403, "reason": "Forbidden", "message": "no",
                                         "details": {"name": "x"}})
        self.assertEqual((error.code, error.reason, error.message, error.details),
                         (403, "Forbidden", 'admission webhook "w.example.com" denied the '
                                            'request: no', {"name": "x"}))
        self.assertEqual(denial("w.example.com", {"reason": "Why"}).message,
                         'admission webhook "w.example.com" denied the request: Why')

    def test_call_failure(self):
        """A failed call under Fail is upstream's internal error."""
        error = call_failure("w.example.com", "boom")
        self.assertEqual((error.code, error.message),
                         (500, 'Internal error occurred: failed calling webhook '
                               '"w.example.com": boom'))

    def test_review_group(self):
        """The review's group is admission.orch.io, or admission.k8s.io with upstream names."""
        self.assertEqual(json.loads(review_body({}, "v1"))["apiVersion"], "admission.orch.io/v1")
        self.assertEqual(json.loads(review_body({}, "v1", True))["apiVersion"],
                         "admission.k8s.io/v1")


class ReviewRequestTests(SynchronousTestCase):
    def _attributes(self):
        info = KindInfo("rbac.authorization.orch.io", "v1", "roles", "Role", True)
        role = {"apiVersion": "rbac.authorization.orch.io/v1", "kind": "Role",
                "metadata": {"name": "r", "namespace": "ns"}, "rules": []}
        return AdmissionAttributes(CREATE, info, "ns", "r", role, None,
                                   UserInfo("alice", ("devs",)))

    def test_orch_spelling(self):
        """By default a renamed group is sent as the server names it."""
        request = review_request(self._attributes(), "u", "v1")
        self.assertEqual(request["kind"]["group"], "rbac.authorization.orch.io")
        self.assertEqual(request["object"]["apiVersion"], "rbac.authorization.orch.io/v1")

    def test_upstream_spelling(self):
        """With upstream group names, kinds, resources and objects name the group upstream's way."""
        attributes = self._attributes()
        request = review_request(attributes, "u", "v1", upstream_group_names=True)
        for field in ("kind", "resource", "requestKind", "requestResource"):
            self.assertEqual(request[field]["group"], "rbac.authorization.k8s.io", field)
        self.assertEqual(request["object"]["apiVersion"], "rbac.authorization.k8s.io/v1")
        # The object under review keeps the server's spelling.
        self.assertEqual(attributes.obj["apiVersion"], "rbac.authorization.orch.io/v1")
