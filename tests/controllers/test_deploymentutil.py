"""The Deployment controller's rules on plain objects: hash, fenceposts, revisions, proportions."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers import deploymentutil as du

NOW = 1_700_000_000


def deployment(replicas=10, surge="25%", unavailable="25%", strategy="RollingUpdate", **spec):
    body = {"metadata": {"name": "web", "generation": 1, "annotations": {}},
            "spec": dict(spec, replicas=replicas, strategy={"type": strategy}), "status": {}}
    if strategy == "RollingUpdate":
        body["spec"]["strategy"]["rollingUpdate"] = {"maxSurge": surge,
                                                     "maxUnavailable": unavailable}
    return du.with_defaults(body)


def rs(name, replicas, available=0, annotations=None, created="2023-11-14T22:13:20Z"):
    return {"metadata": {"name": name, "uid": name, "annotations": dict(annotations or {}),
                         "creationTimestamp": created},
            "spec": {"replicas": replicas},
            "status": {"replicas": replicas, "availableReplicas": available}}


class HashTests(SynchronousTestCase):
    def test_safe_encode(self):
        """Digits map into the vowel-free alphabet as upstream's SafeEncodeString does."""
        self.assertEqual(du.safe_encode("0123456789"), "456789bcdf")

    def test_compute_hash(self):
        """The hash is stable, from the safe alphabet, and changes with the collision count."""
        template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}
        value = du.compute_hash(template)
        self.assertEqual(value, du.compute_hash({"spec": {"containers": []},
                                                 "metadata": {"labels": {"app": "web"}}}))
        self.assertTrue(8 <= len(value) <= 10 and set(value) <= set("456789bcdf"), value)
        self.assertNotEqual(du.compute_hash(template, 1), value)
        self.assertNotEqual(du.compute_hash(template, 1), du.compute_hash(template, 2))

    def test_fnv32a(self):
        """FNV-32a of known inputs."""
        self.assertEqual(du.fnv32a(b""), 0x811C9DC5)
        self.assertEqual(du.fnv32a(b"a"), 0xE40C292C)

    def test_equal_ignore_hash(self):
        """Templates compare equal but for the pod-template-hash label and empty fields."""
        a = {"metadata": {"labels": {"app": "web", "pod-template-hash": "abc"}},
             "spec": {"containers": [{"name": "c"}], "volumes": []}}
        b = {"metadata": {"labels": {"app": "web"}, "annotations": {}},
             "spec": {"containers": [{"name": "c"}]}}
        self.assertTrue(du.equal_ignore_hash(a, b))
        b["spec"]["containers"][0]["image"] = "x"
        self.assertFalse(du.equal_ignore_hash(a, b))


class FencepostTests(SynchronousTestCase):
    def test_percent_rounding(self):
        """Surge percentages round up, unavailability percentages down."""
        self.assertEqual(du.resolve_fenceposts("25%", "25%", 10), (3, 2))
        self.assertEqual(du.resolve_fenceposts(2, "50%", 3), (2, 1))

    def test_both_zero(self):
        """When both come to 0, one pod may be unavailable."""
        self.assertEqual(du.resolve_fenceposts("1%", "1%", 10), (1, 0))
        self.assertEqual(du.resolve_fenceposts(0, "10%", 5), (0, 1))

    def test_invalid(self):
        """A string that is not a percentage is refused."""
        self.assertRaises(ValueError, du.scaled_value, "ten", 10, True)
        self.assertEqual(du.scaled_value("7", 10, True), 7)

    def test_max_unavailable(self):
        """Recreate and empty Deployments allow no unavailability; it never passes the replicas."""
        self.assertEqual(du.max_unavailable(deployment(strategy="Recreate")), 0)
        self.assertEqual(du.max_unavailable(deployment(replicas=0)), 0)
        self.assertEqual(du.max_unavailable(deployment(replicas=2, unavailable=5)), 2)
        self.assertEqual(du.max_surge(deployment(strategy="Recreate")), 0)

    def test_defaults(self):
        """A Deployment without strategy reads as RollingUpdate 25%/25% with upstream's limits."""
        d = du.with_defaults({"metadata": {"name": "x"}, "spec": {}})
        self.assertEqual(d["spec"]["strategy"], {"type": "RollingUpdate", "rollingUpdate": {
            "maxSurge": "25%", "maxUnavailable": "25%"}})
        self.assertEqual((d["spec"]["replicas"], d["spec"]["revisionHistoryLimit"],
                          d["spec"]["progressDeadlineSeconds"]), (1, 10, 600))


class ReplicaSetRuleTests(SynchronousTestCase):
    def test_new_replica_set_annotations(self):
        """The new RS takes the Deployment's annotations but the skipped ones, and max+1 revision."""
        d = deployment()
        d["metadata"]["annotations"] = {"kubernetes.io/change-cause": "v2",
                                        du.LAST_APPLIED: "{}", du.REVISION: "4"}
        new = rs("web-1", 0)
        self.assertTrue(du.set_new_replica_set_annotations(d, new, "5", False))
        self.assertEqual(new["metadata"]["annotations"], {
            "kubernetes.io/change-cause": "v2", du.REVISION: "5", du.DESIRED_REPLICAS: "10",
            du.MAX_REPLICAS: "13"})
        self.assertFalse(du.set_new_replica_set_annotations(d, new, "5", True))

    def test_revision_history(self):
        """An old RS becoming new again keeps its former revisions in revision-history."""
        d = deployment()
        old = rs("web-1", 0, annotations={du.REVISION: "1"})
        du.set_new_replica_set_annotations(d, old, "3", True)
        self.assertEqual(old["metadata"]["annotations"][du.REVISION_HISTORY], "1")
        du.set_new_replica_set_annotations(d, old, "5", True)
        self.assertEqual(old["metadata"]["annotations"][du.REVISION_HISTORY], "1,3")

    def test_max_revision_skips_garbage(self):
        """Unparseable revisions are skipped."""
        self.assertEqual(du.max_revision([rs("a", 0, annotations={du.REVISION: "2"}),
                                          rs("b", 0, annotations={du.REVISION: "x"}), rs("c", 0)]), 2)

    def test_new_rs_new_replicas(self):
        """The new RS grows by the surge room, never past the replicas wanted."""
        d = deployment(replicas=10)
        old, new = rs("old", 10), rs("new", 0)
        self.assertEqual(du.new_rs_new_replicas(d, [old, new], new), 3)
        self.assertEqual(du.new_rs_new_replicas(d, [rs("old", 8), rs("new", 5)], rs("new", 5)), 5)
        self.assertEqual(du.new_rs_new_replicas(d, [rs("old", 1), rs("new", 5)], rs("new", 5)), 10)
        self.assertEqual(du.new_rs_new_replicas(deployment(strategy="Recreate"), [new], new), 10)

    def test_proportion(self):
        """A replica set's share of a scaling follows its max-replicas annotation."""
        d = deployment(replicas=20)
        old = rs("old", 8, annotations={du.MAX_REPLICAS: "13"})
        self.assertEqual(du.proportion(old, d, 14, 0), 7)
        self.assertEqual(du.proportion(old, d, 3, 0), 3, "never more than what is left")
        self.assertEqual(du.proportion(rs("empty", 0), d, 14, 0), 0)
        shrink = deployment(replicas=0)
        self.assertEqual(du.proportion(old, shrink, -11, 0), -8)

    def test_active_or_latest(self):
        """The only active RS, the newest when none is active, None when several are."""
        a = rs("a", 0, created="2023-11-14T22:00:00Z")
        b = rs("b", 0, created="2023-11-14T23:00:00Z")
        self.assertIs(du.find_active_or_latest(None, [a, b]), b)
        c = rs("c", 2)
        self.assertIs(du.find_active_or_latest(c, [a, b]), c)
        self.assertIsNone(du.find_active_or_latest(c, [rs("d", 1)]))

    def test_sorting(self):
        """By size (older or newer first among equals) and by revision."""
        a = rs("a", 2, created="2023-11-14T22:00:00Z", annotations={du.REVISION: "3"})
        b = rs("b", 2, created="2023-11-14T23:00:00Z", annotations={du.REVISION: "1"})
        c = rs("c", 5, created="2023-11-14T23:30:00Z", annotations={du.REVISION: "2"})
        names = lambda rss: [r["metadata"]["name"] for r in rss]  # noqa: E731
        self.assertEqual(names(du.by_size_older([b, a, c])), ["c", "a", "b"])
        self.assertEqual(names(du.by_size_newer([a, b, c])), ["c", "b", "a"])
        self.assertEqual(names(du.by_revision([a, b, c])), ["b", "c", "a"])


class ConditionTests(SynchronousTestCase):
    def test_set_condition_keeps_transition_time(self):
        """Same status and reason change nothing; a new reason keeps the transition time."""
        status = {}
        du.set_condition(status, du.new_condition("Progressing", "True", "A", "m", NOW))
        du.set_condition(status, du.new_condition("Progressing", "True", "A", "m2", NOW + 5))
        self.assertEqual(status["conditions"][0]["message"], "m")
        du.set_condition(status, du.new_condition("Progressing", "True", "B", "m3", NOW + 9))
        [condition] = status["conditions"]
        self.assertEqual((condition["reason"], condition["lastTransitionTime"],
                          condition["lastUpdateTime"]),
                         ("B", "2023-11-14T22:13:20Z", "2023-11-14T22:13:29Z"))

    def test_timed_out(self):
        """No progress for longer than the deadline (strictly) is a timeout."""
        d = deployment(progressDeadlineSeconds=60)
        status = {}
        du.set_condition(status, du.new_condition("Progressing", "True", "ReplicaSetUpdated",
                                                  "", NOW))
        self.assertFalse(du.deployment_timed_out(d, status, NOW + 60))
        self.assertTrue(du.deployment_timed_out(d, status, NOW + 61))
        status["conditions"][0]["reason"] = du.NEW_RS_AVAILABLE
        self.assertFalse(du.deployment_timed_out(d, status, NOW + 600))

    def test_calculate_status(self):
        """Counts come from the replica sets; Available follows maxUnavailable."""
        d = deployment(replicas=4)
        new, old = rs("new", 2, available=2), rs("old", 2, available=1)
        status = du.calculate_status([old, new], new, d, NOW)
        self.assertEqual((status["replicas"], status["updatedReplicas"],
                          status["availableReplicas"], status["unavailableReplicas"]),
                         (4, 2, 3, 1))
        [available] = status["conditions"]
        self.assertEqual((available["type"], available["status"], available["reason"],
                          available["message"]),
                         ("Available", "True", "MinimumReplicasAvailable",
                          "Deployment has minimum availability."))
        old["status"]["availableReplicas"] = 0
        status = du.calculate_status([old, new], new, d, NOW)
        self.assertEqual(status["conditions"][0]["message"],
                         "Deployment does not have minimum availability.")
