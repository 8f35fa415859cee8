"""Pods made from templates, and the slow start that creates them in growing batches."""

from twisted.internet.defer import ensureDeferred
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.controllers.podcontrol import namespace_terminating, pod_from_template, slow_start_batch

REF = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u",
       "controller": True, "blockOwnerDeletion": True}


class PodFromTemplateTests(SynchronousTestCase):
    def test_copies_template(self):
        """The pod takes the template's labels, annotations, finalizers and spec, and the owner."""
        template = {"metadata": {"labels": {"app": "web"}, "annotations": {"a": "1"},
                                 "finalizers": ["x.orch.io/f"], "name": "ignored"},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
        pod = pod_from_template(template, "web-abc", "ns", REF)
        self.assertEqual(pod["metadata"], {
            "namespace": "ns", "generateName": "web-abc-", "labels": {"app": "web"},
            "annotations": {"a": "1"}, "finalizers": ["x.orch.io/f"], "ownerReferences": [REF]})
        self.assertEqual(pod["spec"], template["spec"])
        pod["spec"]["containers"][0]["image"] = "changed"
        self.assertEqual(template["spec"]["containers"][0]["image"], "nginx")

    def test_no_labels(self):
        """A template without labels makes no pod."""
        with self.assertRaises(StatusError) as caught:
            pod_from_template({"spec": {}}, "web", "ns", REF)
        self.assertIn("no labels", caught.exception.message)

    def test_namespace_terminating(self):
        """The refusal of a create in a namespace being deleted is recognised."""
        self.assertTrue(namespace_terminating(StatusError.forbidden(
            "pods", "", "p", "unable to create new content in namespace ns because it is being "
            "terminated")))
        self.assertFalse(namespace_terminating(StatusError.forbidden("pods", "", "p", "quota")))


class SlowStartTests(SynchronousTestCase):
    def run_batches(self, count, fail_at=None):
        calls = []

        async def create():
            calls.append(1)
            if fail_at is not None and len(calls) >= fail_at:
                raise StatusError.forbidden("pods", "", "", "no")

        result = self.successResultOf(ensureDeferred(slow_start_batch(count, create)))
        return result, len(calls)

    def test_all_succeed(self):
        """Every create runs when none fails."""
        (successes, error), calls = self.run_batches(10)
        self.assertEqual((successes, error, calls), (10, None, 10))

    def test_stops_after_failing_batch(self):
        """Batches of 1, 2, 4: a failure in the third batch ends it, later batches never run."""
        (successes, error), calls = self.run_batches(20, fail_at=5)
        self.assertEqual((successes, calls), (4, 7))
        self.assertEqual(error.code, 403)

    def test_first_failure(self):
        """A failing first create means one attempt only."""
        (successes, error), calls = self.run_batches(500, fail_at=1)
        self.assertEqual((successes, calls), (0, 1))
