"""DefaultTolerationSeconds: pods tolerate not-ready and unreachable for a while."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.admission.defaulttolerationseconds import DefaultTolerationSeconds
from orchd.api import taints as t
from tests.support import APIHarness

PODS = "/api/v1/namespaces/default/pods"


def default(key, seconds=300):
    return {"key": key, "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": seconds}


class DefaultTolerationSecondsTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness(plugins=(DefaultTolerationSeconds(120),))

    def create(self, name, tolerations=None):
        spec = {"containers": [{"name": "c", "image": "busybox"}]}
        if tolerations is not None:
            spec["tolerations"] = tolerations
        code, obj, _ = self.api.call("POST", PODS, {"metadata": {"name": name}, "spec": spec})
        self.assertEqual(code, 201, obj)
        return obj["spec"].get("tolerations")

    def test_added(self):
        """A pod without tolerations gets both, with the configured seconds."""
        self.assertEqual(self.create("a"), [default(t.NOT_READY, 120),
                                            default(t.UNREACHABLE, 120)])

    def test_default_is_300(self):
        self.assertEqual(DefaultTolerationSeconds()._seconds, 300)

    def test_existing_kept(self):
        """A pod tolerating one key keeps its own toleration and gets only the other."""
        own = {"key": t.UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
               "tolerationSeconds": 5}
        other = {"key": "example.com/x", "operator": "Exists"}
        self.assertEqual(self.create("a", [own, other]),
                         [own, other, default(t.NOT_READY, 120)])

    def test_wildcard_tolerates_all(self):
        """An empty key (or an empty effect) already covers both keys."""
        self.assertEqual(self.create("a", [{"operator": "Exists"}]), [{"operator": "Exists"}])
        mine = {"key": t.NOT_READY, "operator": "Exists"}
        self.assertEqual(self.create("b", [mine]), [mine, default(t.UNREACHABLE, 120)])

    def test_other_kinds_untouched(self):
        code, obj, _ = self.api.call("POST", "/api/v1/namespaces/default/configmaps",
                                     {"metadata": {"name": "c"}})
        self.assertEqual(code, 201, obj)
        self.assertNotIn("spec", obj)
