"""Reserved pod keys: the deletion cost (int32) and the Job completion index."""

import orjson
from twisted.trial.unittest import SynchronousTestCase

from orchd.registry.kinds.pod import (
    COMPLETION_INDEX, DELETION_COST, valid_completion_index, valid_deletion_cost,
)
from tests.support import APIHarness

PODS = "/api/v1/namespaces/default/pods"
MERGE_PATCH = b"application/merge-patch+json"
JOB_OWNER = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u1",
             "controller": True}


def pod(name="p", annotations=None, labels=None, owners=None):
    meta = {"name": name}
    if annotations is not None:
        meta["annotations"] = annotations
    if labels is not None:
        meta["labels"] = labels
    if owners is not None:
        meta["ownerReferences"] = owners
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "i"}]}}


class ValueTests(SynchronousTestCase):
    def test_deletion_cost_values(self):
        """Canonical decimal int32 only: no '+', no leading zeros, within bounds."""
        for good in ("0", "-5", "10", "2147483647", "-2147483648"):
            self.assertTrue(valid_deletion_cost(good), good)
        for bad in ("", "+10", "008", "-0", "2147483648", "-2147483649", "x", "-", " 1",
                    "1.5", "١", "10\n"):
            self.assertFalse(valid_deletion_cost(bad), bad)

    def test_completion_index_values(self):
        for good in ("0", "1", "42", "2147483647"):
            self.assertTrue(valid_completion_index(good), good)
        for bad in ("", "-1", "+1", "01", "2147483648", "a", "1e3", "1\n"):
            self.assertFalse(valid_completion_index(bad), bad)


class DeletionCostTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def test_valid_accepted(self):
        for i, value in enumerate(("-2147483648", "0", "2147483647")):
            code, created, _ = self.api.call("POST", PODS, pod(f"p{i}", {DELETION_COST: value}))
            self.assertEqual(code, 201, created)
            self.assertEqual(created["metadata"]["annotations"][DELETION_COST], value)

    def test_invalid_refused(self):
        """A value out of int32 range: 422 with upstream's message."""
        code, status, _ = self.api.call("POST", PODS, pod(annotations={
            DELETION_COST: "2147483648"}))
        self.assertEqual(code, 422)
        self.assertEqual(status["reason"], "Invalid")
        [cause] = status["details"]["causes"]
        self.assertEqual(cause["field"], f"metadata.annotations[{DELETION_COST}]")
        self.assertIn("must be a 32bit integer", cause["message"])
        self.assertIn('"2147483648"', status["message"])

    def test_invalid_on_update(self):
        self.assertEqual(self.api.call("POST", PODS, pod())[0], 201)
        code, _, _ = self.api.call("PATCH", PODS + "/p", {"metadata": {"annotations": {
            DELETION_COST: "+1"}}}, content_type=MERGE_PATCH)
        self.assertEqual(code, 422)

    def test_stored_invalid_value_ratchets(self):
        """An update of a pod whose stored cost is already invalid is not refused for it."""
        raw = pod(annotations={DELETION_COST: "abc"})
        raw.update(apiVersion="v1", kind="Pod")
        raw["metadata"].update(namespace="default", uid="u",
                               creationTimestamp="2023-11-14T22:13:20Z")
        self.api.store.create("/registry/pods/default/p", orjson.dumps(raw))
        code, updated, _ = self.api.call("PATCH", PODS + "/p", {"metadata": {"labels": {
            "a": "b"}}}, content_type=MERGE_PATCH)
        self.assertEqual(code, 200, updated)
        self.assertEqual(updated["metadata"]["labels"], {"a": "b"})


class CompletionIndexTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def test_job_pod_accepted(self):
        """A pod controlled by a Job may carry the index as annotation and label."""
        code, created, _ = self.api.call("POST", PODS, pod(
            annotations={COMPLETION_INDEX: "3"}, labels={COMPLETION_INDEX: "3"},
            owners=[JOB_OWNER]))
        self.assertEqual(code, 201, created)

    def test_invalid_value_refused(self):
        for value in ("-1", "01", "x"):
            code, status, _ = self.api.call("POST", PODS, pod(
                annotations={COMPLETION_INDEX: value}, owners=[JOB_OWNER]))
            self.assertEqual(code, 422, value)
            [cause] = status["details"]["causes"]
            self.assertEqual(cause["field"], f"metadata.annotations[{COMPLETION_INDEX}]")
            self.assertIn("must be a non-negative integer", cause["message"])

    def test_reserved_for_jobs(self):
        """Without a controlling batch/v1 Job owner the key is refused."""
        not_jobs = (None, [dict(JOB_OWNER, controller=False)],
                    [dict(JOB_OWNER, kind="ReplicaSet", apiVersion="apps/v1")],
                    [dict(JOB_OWNER, apiVersion="batch/v2")])
        for owners in not_jobs:
            code, status, _ = self.api.call("POST", PODS, pod(
                labels={COMPLETION_INDEX: "0"}, owners=owners))
            self.assertEqual(code, 422, owners)
            [cause] = status["details"]["causes"]
            self.assertEqual(cause["field"], f"metadata.labels[{COMPLETION_INDEX}]")
            self.assertEqual(cause["reason"], "FieldValueForbidden")
            self.assertIn("reserved for the Job controller", cause["message"])

    def test_orphaned_pod_keeps_index(self):
        """Dropping the owner (orphaning) keeps the unchanged index; changing it is refused."""
        self.api.call("POST", PODS, pod(annotations={COMPLETION_INDEX: "2"},
                                        owners=[JOB_OWNER]))
        code, updated, _ = self.api.call("PATCH", PODS + "/p", {"metadata": {
            "ownerReferences": None}}, content_type=MERGE_PATCH)
        self.assertEqual(code, 200, updated)
        self.assertEqual(updated["metadata"]["annotations"], {COMPLETION_INDEX: "2"})
        code, _, _ = self.api.call("PATCH", PODS + "/p", {"metadata": {"annotations": {
            COMPLETION_INDEX: "5"}}}, content_type=MERGE_PATCH)
        self.assertEqual(code, 422)

    def test_pods_keep_field_selectors(self):
        """The pod strategy still serves the pod field selectors."""
        self.api.call("POST", PODS, pod())
        code, listed, _ = self.api.call("GET", PODS + "?fieldSelector=status.phase%3DPending")
        self.assertEqual(code, 200, listed)
        code, _, _ = self.api.call("GET", PODS + "?fieldSelector=spec.nodeName%3D")
        self.assertEqual(code, 200)
