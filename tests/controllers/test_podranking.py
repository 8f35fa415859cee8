"""The order in which a replica set deletes its surplus pods."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.meta import rfc3339
from orchd.controllers.podranking import pods_to_delete, ranks_on_nodes

NOW = 1_700_000_000
COST = "controller.orch.io/pod-deletion-cost"


def pod(name, node="n1", phase="Running", ready=True, ready_since=NOW - 100,
        created=NOW - 1000, cost=None, restarts=0, uid=None):
    meta = {"name": name, "uid": uid or name, "creationTimestamp": rfc3339(created)}
    if cost is not None:
        meta["annotations"] = {COST: cost}
    status = {"phase": phase, "conditions": [
        {"type": "Ready", "status": "True" if ready else "False",
         "lastTransitionTime": rfc3339(ready_since)}],
        "containerStatuses": [{"restartCount": restarts}]}
    return {"metadata": meta, "spec": {"nodeName": node}, "status": status}


class RankingTests(SynchronousTestCase):
    def first(self, *pods, related=None):
        return pods_to_delete(list(pods), related if related is not None else list(pods), 1,
                              NOW)[0]["metadata"]["name"]

    def test_unassigned_first(self):
        """A pod on no node goes before a pod on one."""
        self.assertEqual(self.first(pod("a"), pod("b", node="")), "b")

    def test_phase_order(self):
        """Pending goes before Unknown, which goes before Running."""
        self.assertEqual(self.first(pod("r"), pod("u", phase="Unknown")), "u")
        self.assertEqual(self.first(pod("u", phase="Unknown"), pod("p", phase="Pending")), "p")

    def test_not_ready_first(self):
        """A pod not ready goes before a ready one."""
        self.assertEqual(self.first(pod("a"), pod("b", ready=False)), "b")

    def test_deletion_cost(self):
        """Lower deletion cost goes first; an invalid cost counts as 0."""
        self.assertEqual(self.first(pod("a", cost="5"), pod("b", cost="1")), "b")
        self.assertEqual(self.first(pod("a", cost="1"), pod("b", cost="bad")), "b")
        self.assertEqual(self.first(pod("a", cost="-1"), pod("b")), "a")

    def test_doubled_up(self):
        """A pod sharing its node with more related active pods goes first."""
        a, b = pod("a", node="n1"), pod("b", node="n2")
        related = [a, b, pod("c", node="n2"), pod("gone", node="n1", phase="Succeeded")]
        self.assertEqual(ranks_on_nodes([a, b], related), [1, 2])
        self.assertEqual(self.first(a, b, related=related), "b")

    def test_ready_for_less_time_first(self):
        """Of two ready pods, the one ready for less time (a smaller log2 bucket) goes first."""
        self.assertEqual(self.first(pod("old", ready_since=NOW - 10_000),
                                    pod("new", ready_since=NOW - 10)), "new")

    def test_same_bucket_by_uid(self):
        """Ready times in the same log2 bucket are ordered by UID, not exact time."""
        self.assertEqual(self.first(pod("a", ready_since=NOW - 70, uid="2"),
                                    pod("b", ready_since=NOW - 100, uid="1")), "b")

    def test_more_restarts_first(self):
        """A pod with more restarts goes first."""
        self.assertEqual(self.first(pod("a"), pod("b", restarts=3)), "b")

    def test_newer_first(self):
        """The newer pod goes first."""
        self.assertEqual(self.first(pod("old", created=NOW - 10_000),
                                    pod("new", created=NOW - 10)), "new")

    def test_all_when_count_covers(self):
        """Asking for as many as there are returns them all."""
        pods = [pod("a"), pod("b")]
        self.assertEqual(pods_to_delete(pods, pods, 5, NOW), pods)
