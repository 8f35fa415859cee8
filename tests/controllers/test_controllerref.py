"""Claiming pods through owner references: adopt matching orphans, release the rest."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.api.selectors import selector_from_label_selector_object
from orchd.controllers.controllerref import ControllerRefManager, recheck_owner
from tests.controllers.workloadsupport import PODS, RS, WorkloadHarness, pod, replica_set


class ClaimTests(SynchronousTestCase):
    def setUp(self):
        self.h = WorkloadHarness(self)
        self.catalog = self.h.api.catalog
        self.owner = self.h.call("POST", RS, replica_set(replicas=0), 201)

    def manager(self, owner=None, can_adopt=None):
        owner = owner or self.owner
        rs = self.catalog.resource("apps", "replicasets")
        return ControllerRefManager(
            self.catalog.resource("", "pods"), owner, "apps/v1", "ReplicaSet",
            selector_from_label_selector_object(owner["spec"]["selector"]),
            can_adopt or recheck_owner(rs, owner, self.catalog.system_context().user),
            self.catalog.system_context("default"))

    def claim(self, *names, manager=None):
        pods = [self.h.get(f"{PODS}/{name}") for name in names]
        claimed, errors = self.h.api.run((manager or self.manager()).claim(pods))
        return [p["metadata"]["name"] for p in claimed], errors

    def refs(self, name):
        return self.h.get(f"{PODS}/{name}")["metadata"].get("ownerReferences")

    def test_adopt_and_release(self):
        """A matching orphan is adopted; an owned pod that stopped matching is released."""
        self.h.call("POST", PODS, pod("orphan"), 201)
        self.h.call("POST", PODS, pod("stray", labels={"app": "other"}), 201)
        self.assertEqual(self.claim("orphan", "stray"), (["orphan"], []))
        [ref] = self.refs("orphan")
        self.assertEqual((ref["uid"], ref["controller"], ref["blockOwnerDeletion"]),
                         (self.owner["metadata"]["uid"], True, True))
        self.assertIsNone(self.refs("stray"))
        self.h.patch(f"{PODS}/orphan", {"metadata": {"labels": {"app": "moved"}}})
        self.assertEqual(self.claim("orphan"), ([], []))
        self.assertIsNone(self.refs("orphan"))

    def test_keeps_other_references(self):
        """Adoption and release leave other owners' references in place."""
        other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "cm-uid"}
        self.h.call("POST", PODS, pod("shared", owner=other), 201)
        self.claim("shared")
        self.assertEqual(len(self.refs("shared")), 2)
        self.h.patch(f"{PODS}/shared", {"metadata": {"labels": {"app": "moved"}}})
        self.claim("shared")
        self.assertEqual(self.refs("shared"), [other])

    def test_refused_when_owner_replaced(self):
        """An owner whose uid changed in the store adopts nothing, and says why."""
        self.h.call("POST", PODS, pod("orphan"), 201)
        stale = dict(self.owner, metadata=dict(self.owner["metadata"], uid="old-uid"))
        claimed, [error] = self.claim("orphan", manager=self.manager(owner=stale))
        self.assertEqual(claimed, [])
        self.assertIn("is gone: got uid", error.message)
        self.assertIsNone(self.refs("orphan"))

    def test_owner_checked_once(self):
        """The owner is read from the store once per claim, before the first adoption only."""
        calls = []

        async def can_adopt():
            calls.append(1)

        for name in ("a", "b"):
            self.h.call("POST", PODS, pod(name), 201)
        self.claim("a", "b", manager=self.manager(can_adopt=can_adopt))
        self.assertEqual(len(calls), 1)

    def test_replaced_pod_left_alone(self):
        """A pod replaced under the same name since it was cached is not adopted."""
        self.h.call("POST", PODS, pod("orphan"), 201)
        cached = self.h.get(f"{PODS}/orphan")
        self.h.call("DELETE", f"{PODS}/orphan", code=200)
        self.h.call("POST", PODS, pod("orphan"), 201)
        claimed, errors = self.h.api.run(self.manager().claim([cached]))
        self.assertEqual((claimed, errors), ([], []))
        self.assertIsNone(self.refs("orphan"))

    def test_gone_pod_is_no_error(self):
        """A pod deleted since it was cached is skipped without error."""
        self.h.call("POST", PODS, pod("orphan"), 201)
        cached = self.h.get(f"{PODS}/orphan")
        self.h.call("DELETE", f"{PODS}/orphan", code=200)
        self.assertEqual(self.h.api.run(self.manager().claim([cached])), ([], []))

    def test_adoption_refused_by_validation(self):
        """An adoption the API refuses is reported, not raised."""
        self.h.call("POST", PODS, pod("orphan"), 201)
        cached = self.h.get(f"{PODS}/orphan")
        other = {"apiVersion": "v1", "kind": "ReplicationController", "name": "rc",
                 "uid": "rc-uid", "controller": True}
        self.h.patch(f"{PODS}/orphan", {"metadata": {"ownerReferences": [other]}})
        claimed, [error] = self.h.api.run(self.manager().claim([cached]))
        self.assertIsInstance(error, StatusError)
        self.assertEqual(error.code, 422)
        self.assertEqual(self.refs("orphan"), [other])
