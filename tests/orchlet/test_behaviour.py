"""What a pod asks of the simulated runtime: Go durations, annotations, pull policies."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.orchlet.behaviour import (
    EXIT_AFTER, EXIT_CODE, READY_AFTER, START_AFTER, STOP_AFTER, Behaviour, format_duration,
    parse_duration, pull_policy, pullable, readiness_delay,
)


class DurationTests(SynchronousTestCase):
    def test_parse(self):
        """Go durations read as seconds: units, fractions, sums and a bare 0."""
        cases = {"0": 0.0, "5s": 5.0, "500ms": 0.5, "1m30s": 90.0, "1.5h": 5400.0,
                 "2m0.5s": 120.5, "250us": 0.00025, "10ns": 1e-8, ".5s": 0.5}
        for text, seconds in cases.items():
            self.assertAlmostEqual(parse_duration(text), seconds, msg=text)

    def test_parse_refuses(self):
        """Anything else is a ValueError: no unit, negative, unknown unit, over a year."""
        for text in ("", "5", "-1s", "1d", "s", "1s2", " 1s", "1.s.", "9999h", None, 5):
            with self.assertRaises(ValueError, msg=repr(text)):
                parse_duration(text)

    def test_format(self):
        """Durations print as Go prints them truncated to milliseconds."""
        cases = {0: "0s", 0.5: "500ms", 1: "1s", 1.2: "1.2s", 1.234: "1.234s", 90: "1m30s",
                 90.5: "1m30.5s", 3600: "1h0m0s", 0.0004: "0s"}
        for seconds, text in cases.items():
            self.assertEqual(format_duration(seconds), text, msg=seconds)


class PullTests(SynchronousTestCase):
    def test_default_pull_policy(self):
        """Always for :latest or no tag, IfNotPresent for a tag or digest; explicit wins."""
        self.assertEqual(pull_policy({"image": "nginx"}), "Always")
        self.assertEqual(pull_policy({"image": "nginx:latest"}), "Always")
        self.assertEqual(pull_policy({"image": "nginx:1.27"}), "IfNotPresent")
        self.assertEqual(pull_policy({"image": "registry:5000/app"}), "Always")
        self.assertEqual(pull_policy({"image": "app@sha256:ab"}), "IfNotPresent")
        self.assertEqual(pull_policy({"image": "nginx", "imagePullPolicy": "Never"}), "Never")
        self.assertEqual(pull_policy({"image": "nginx", "imagePullPolicy": "bogus"}), "Always")

    def test_pullable(self):
        """Images whose name contains 'invalid' cannot be pulled."""
        self.assertTrue(pullable("nginx"))
        self.assertFalse(pullable("nginx:invalid"))
        self.assertFalse(pullable("invalid/app"))

    def test_readiness_delay(self):
        """A readiness probe's initialDelaySeconds; 0 without a probe or with a bad value."""
        self.assertEqual(readiness_delay({}), 0)
        self.assertEqual(readiness_delay({"readinessProbe": {"initialDelaySeconds": 7}}), 7)
        self.assertEqual(readiness_delay({"readinessProbe": {"initialDelaySeconds": -1}}), 0)
        self.assertEqual(readiness_delay({"readinessProbe": {"initialDelaySeconds": True}}), 0)


class BehaviourTests(SynchronousTestCase):
    def test_defaults(self):
        """No annotations: simulated pulls, probe readiness, no exit, immediate stop."""
        behaviour = Behaviour.of({"metadata": {}})
        self.assertEqual((behaviour.start_after, behaviour.ready_after, behaviour.exit_after,
                          behaviour.exit_code, behaviour.stop_after, behaviour.problems),
                         (None, None, None, 0, 0.0, []))

    def test_annotations(self):
        """Every annotation of ours is read."""
        behaviour = Behaviour({START_AFTER: "2s", READY_AFTER: "5s", EXIT_AFTER: "1m",
                               EXIT_CODE: "3", STOP_AFTER: "500ms"})
        self.assertEqual((behaviour.start_after, behaviour.ready_after, behaviour.exit_after,
                          behaviour.exit_code, behaviour.stop_after), (2.0, 5.0, 60.0, 3, 0.5))
        self.assertEqual(behaviour.ready_delay({"readinessProbe": {"initialDelaySeconds": 9}}),
                         5.0)

    def test_unreadable_annotations(self):
        """Unreadable values are ignored and named in problems."""
        behaviour = Behaviour({START_AFTER: "soon", EXIT_CODE: "256", READY_AFTER: "-1s"})
        self.assertEqual((behaviour.start_after, behaviour.ready_after, behaviour.exit_code),
                         (None, None, 0))
        self.assertEqual(sorted(key for key, _ in behaviour.problems),
                         sorted([START_AFTER, EXIT_CODE, READY_AFTER]))
