"""The DisruptionAllowed condition of a PodDisruptionBudget, as upstream's helpers set it."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.disruption import (
    conditions_up_to_date, set_status_condition, sync_failed, update_disruption_allowed,
)

T0, T1 = 1_700_000_000, 1_700_000_060


class ConditionTests(SynchronousTestCase):
    def test_transition_time_kept_while_status_holds(self):
        """A condition whose status stays keeps its lastTransitionTime; a change takes now."""
        conditions = []
        self.assertTrue(set_status_condition(conditions, {"type": "A", "status": "True",
                                                          "reason": "R"}, T0))
        self.assertEqual(conditions[0]["lastTransitionTime"], "2023-11-14T22:13:20Z")
        self.assertFalse(set_status_condition(conditions, {"type": "A", "status": "True",
                                                           "reason": "R"}, T1))
        self.assertTrue(set_status_condition(conditions, {"type": "A", "status": "True",
                                                          "reason": "S"}, T1))
        self.assertEqual(conditions[0]["lastTransitionTime"], "2023-11-14T22:13:20Z")
        self.assertTrue(set_status_condition(conditions, {"type": "A", "status": "False",
                                                          "reason": "S"}, T1))
        self.assertEqual(conditions[0]["lastTransitionTime"], "2023-11-14T22:14:20Z")

    def test_disruption_allowed_follows_the_count(self):
        """SufficientPods while disruptions are allowed, InsufficientPods at zero."""
        status = {"disruptionsAllowed": 2, "observedGeneration": 3}
        update_disruption_allowed(status, T0)
        self.assertEqual(status["conditions"], [{
            "type": "DisruptionAllowed", "status": "True", "reason": "SufficientPods",
            "message": "", "observedGeneration": 3, "lastTransitionTime": "2023-11-14T22:13:20Z"}])
        pdb = {"metadata": {"generation": 3}, "status": status}
        self.assertTrue(conditions_up_to_date(pdb))
        status["disruptionsAllowed"] = 0
        self.assertFalse(conditions_up_to_date(pdb))
        update_disruption_allowed(status, T1)
        self.assertEqual((status["conditions"][0]["status"], status["conditions"][0]["reason"]),
                         ("False", "InsufficientPods"))
        self.assertTrue(conditions_up_to_date(pdb))
        pdb["metadata"]["generation"] = 4
        self.assertFalse(conditions_up_to_date(pdb))

    def test_sync_failed(self):
        """The fail-safe status allows nothing and says why."""
        status = {"disruptionsAllowed": 3}
        sync_failed(status, "found no controllers for pod \"x\"", T0)
        self.assertEqual(status["disruptionsAllowed"], 0)
        self.assertEqual((status["conditions"][0]["reason"], status["conditions"][0]["message"]),
                         ("SyncFailed", 'found no controllers for pod "x"'))
        self.assertFalse(conditions_up_to_date({"metadata": {}, "status": status}))
