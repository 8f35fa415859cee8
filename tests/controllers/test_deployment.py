"""The Deployment controller with the ReplicaSet controller, over the API in memory."""

import orjson
from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers import deploymentutil as du
from tests.controllers.workloadsupport import (
    DEPLOYMENTS, PODS, RS, WorkloadHarness, deployment, replica_set,
)

JSON_PATCH = {b"content-type": [b"application/json-patch+json"]}


class DeploymentTests(SynchronousTestCase):
    def setUp(self):
        self.h = WorkloadHarness(self)
        self.h.replica_sets()
        self.h.deployments()

    def create(self, body=None, **kw):
        return self.h.call("POST", DEPLOYMENTS, body or deployment(**kw), 201)

    def get(self, name="web"):
        return self.h.get(f"{DEPLOYMENTS}/{name}")

    def replica_sets(self):
        """The Deployment's replica sets, oldest revision first."""
        return du.by_revision(self.h.get(RS)["items"])

    def sizes(self):
        return [rs["spec"]["replicas"] for rs in self.replica_sets()]

    def condition(self, type, name="web"):
        return du.get_condition(self.get(name)["status"], type)

    def set_image(self, image, name="web"):
        self.h.patch(f"{DEPLOYMENTS}/{name}", {"spec": {"template": {"spec": {"containers": [
            {"name": "nginx", "image": image}]}}}})

    def roll_out(self, rounds=20):
        """Make pods ready until nothing changes any more."""
        for _ in range(rounds):
            if not self.h.make_ready():
                return
        self.fail("the rollout did not settle")

    def test_first_replica_set(self):
        """A new Deployment gets <name>-<hash> with the hash label, revision 1, and its pods."""
        d = self.create(replicas=3)
        [rs] = self.replica_sets()
        meta = rs["metadata"]
        hash_ = meta["labels"][du.HASH_LABEL]
        self.assertEqual(meta["name"], f"web-{hash_}")
        self.assertEqual(rs["spec"]["selector"]["matchLabels"],
                         {"app": "web", du.HASH_LABEL: hash_})
        self.assertEqual(rs["spec"]["template"]["metadata"]["labels"],
                         {"app": "web", du.HASH_LABEL: hash_})
        self.assertEqual(meta["annotations"], {du.REVISION: "1", du.DESIRED_REPLICAS: "3",
                                               du.MAX_REPLICAS: "4"})
        [ref] = meta["ownerReferences"]
        self.assertEqual((ref["kind"], ref["uid"], ref["controller"], ref["blockOwnerDeletion"]),
                         ("Deployment", d["metadata"]["uid"], True, True))
        self.assertEqual(self.get()["metadata"]["annotations"][du.REVISION], "1")
        pods = self.h.pods()
        self.assertEqual(len(pods), 3)
        self.assertTrue(all(p["metadata"]["labels"][du.HASH_LABEL] == hash_ for p in pods))
        self.assertIn(("ScalingReplicaSet", f"Scaled up replica set {meta['name']} from 0 to 3"),
                      self.h.events("Deployment"))
        available = self.condition("Available")
        self.assertEqual((available["status"], available["reason"], available["message"]),
                         ("False", "MinimumReplicasUnavailable",
                          "Deployment does not have minimum availability."))
        self.assertEqual(self.condition("Progressing")["status"], "True")

    def test_complete_status(self):
        """Once every pod is ready the status says so, as kubectl rollout status reads it."""
        self.create(replicas=3)
        self.roll_out()
        d = self.get()
        status = d["status"]
        self.assertEqual({k: status.get(k) for k in ("observedGeneration", "replicas",
                                                     "updatedReplicas", "readyReplicas",
                                                     "availableReplicas")},
                         {"observedGeneration": 1, "replicas": 3, "updatedReplicas": 3,
                          "readyReplicas": 3, "availableReplicas": 3})
        self.assertNotIn("unavailableReplicas", status)
        rs_name = self.replica_sets()[0]["metadata"]["name"]
        progressing = self.condition("Progressing")
        self.assertEqual((progressing["status"], progressing["reason"], progressing["message"]),
                         ("True", "NewReplicaSetAvailable",
                          f'ReplicaSet "{rs_name}" has successfully progressed.'))
        available = self.condition("Available")
        self.assertEqual((available["status"], available["reason"], available["message"]),
                         ("True", "MinimumReplicasAvailable",
                          "Deployment has minimum availability."))

    def test_rolling_update_surge(self):
        """With maxSurge 1 and maxUnavailable 0, one new pod comes before each old one goes."""
        self.create(replicas=3, strategy={"type": "RollingUpdate", "rollingUpdate": {
            "maxSurge": 1, "maxUnavailable": 0}})
        self.roll_out()
        self.set_image("nginx:2")
        steps = [self.sizes()]
        for _ in range(3):
            self.h.make_ready()
            steps.append(self.sizes())
        self.assertEqual(steps, [[3, 1], [2, 2], [1, 3], [0, 3]])
        old, new = self.replica_sets()
        self.assertEqual((old["metadata"]["annotations"][du.REVISION],
                          new["metadata"]["annotations"][du.REVISION]), ("1", "2"))
        self.assertEqual(self.get()["metadata"]["annotations"][du.REVISION], "2")
        events = self.h.events("Deployment")
        self.assertIn(("ScalingReplicaSet",
                       f"Scaled down replica set {old['metadata']['name']} to 2 from 3"), events)
        self.assertIn(("ScalingReplicaSet",
                       f"Scaled up replica set {new['metadata']['name']} to 2 from 1"), events)

    def test_rolling_update_unavailable(self):
        """With maxSurge 0 and maxUnavailable 1, an old pod goes before each new one comes."""
        self.create(replicas=3, strategy={"type": "RollingUpdate", "rollingUpdate": {
            "maxSurge": 0, "maxUnavailable": 1}})
        self.roll_out()
        self.set_image("nginx:2")
        steps = [self.sizes()]
        for _ in range(3):
            self.h.make_ready()
            steps.append(self.sizes())
        self.assertEqual(steps, [[2, 1], [1, 2], [0, 3], [0, 3]])
        self.assertEqual(len(self.h.pods()), 3)

    def test_rolling_update_percentages(self):
        """25% of 10: surge rounds up to 3, unavailability down to 2."""
        self.create(replicas=10)
        self.roll_out()
        self.set_image("nginx:2")
        # The new set starts at 3 (13 at most), the old goes to 8 (8 available at
        # least), and the new grows into the room that made.
        self.assertEqual(self.sizes(), [8, 5])
        self.roll_out()
        self.assertEqual(self.sizes(), [0, 10])

    def test_recreate(self):
        """Recreate scales the old pods away and starts the new ones only once they are gone."""
        self.create(replicas=2, strategy={"type": "Recreate"})
        self.roll_out()
        lingering = self.h.pod_names()[0]
        self.h.patch(f"{PODS}/{lingering}", {"metadata": {"finalizers": ["test.orch.io/hold"]}})
        self.set_image("nginx:2")
        self.assertEqual(self.sizes(), [0])
        self.assertEqual(self.h.pods(), [])
        self.h.patch(f"{PODS}/{lingering}", {"metadata": {"finalizers": None}})
        self.assertEqual(self.sizes(), [0])     # still terminating on its node
        self.h.finish_deletions()
        self.assertEqual(self.sizes(), [0, 2])
        self.roll_out()
        self.assertEqual(self.condition("Progressing")["reason"], "NewReplicaSetAvailable")

    def test_paused(self):
        """A paused Deployment scales but starts no rollout until resumed."""
        self.create(replicas=2)
        self.roll_out()
        self.h.patch(f"{DEPLOYMENTS}/web", {"spec": {"paused": True}})
        progressing = self.condition("Progressing")
        self.assertEqual((progressing["status"], progressing["reason"], progressing["message"]),
                         ("Unknown", "DeploymentPaused", "Deployment is paused"))
        self.set_image("nginx:2")
        self.h.patch(f"{DEPLOYMENTS}/web", {"spec": {"replicas": 4}})
        self.assertEqual(self.sizes(), [4])
        self.assertEqual(self.get()["status"]["observedGeneration"], 4)
        self.h.patch(f"{DEPLOYMENTS}/web", {"spec": {"paused": False}})
        self.assertEqual(len(self.replica_sets()), 2)
        self.roll_out()
        self.assertEqual(self.sizes(), [0, 4])

    def test_proportional_scaling(self):
        """Scaling mid-rollout spreads the change over the replica sets by their size."""
        self.create(replicas=10)
        self.roll_out()
        self.set_image("nginx:2")
        old, new = (rs["metadata"]["name"] for rs in self.replica_sets())
        self.assertEqual(self.sizes(), [8, 5])
        self.h.patch(f"{DEPLOYMENTS}/web", {"spec": {"replicas": 20}})
        # 12 more fit (20 + 5 surge - 13): 8/13 and 5/13 of 25, rounded.
        events = self.h.events("Deployment")
        self.assertIn(("ScalingReplicaSet", f"Scaled up replica set {old} to 15 from 8"), events)
        self.assertIn(("ScalingReplicaSet", f"Scaled up replica set {new} to 10 from 5"), events)
        for rs in self.replica_sets():
            annotations = rs["metadata"]["annotations"]
            self.assertEqual((annotations[du.DESIRED_REPLICAS], annotations[du.MAX_REPLICAS]),
                             ("20", "25"))
        self.roll_out()
        self.assertEqual(self.sizes(), [0, 20])

    def test_progress_deadline(self):
        """No progress within progressDeadlineSeconds is ProgressDeadlineExceeded, until progress."""
        self.create(replicas=2, progressDeadlineSeconds=30)
        name = self.replica_sets()[0]["metadata"]["name"]
        self.h.clock.advance(30)
        self.assertNotEqual(self.condition("Progressing")["reason"], "ProgressDeadlineExceeded")
        self.h.clock.advance(1)
        progressing = self.condition("Progressing")
        self.assertEqual((progressing["status"], progressing["reason"], progressing["message"]),
                         ("False", "ProgressDeadlineExceeded",
                          f'ReplicaSet "{name}" has timed out progressing.'))
        self.roll_out()
        self.assertEqual(self.condition("Progressing")["reason"], "NewReplicaSetAvailable")

    def test_revision_history_limit(self):
        """Old replica sets scaled to 0 past revisionHistoryLimit are deleted, oldest first."""
        self.create(replicas=1, revisionHistoryLimit=1)
        for image in ("nginx:2", "nginx:3", "nginx:4"):
            self.roll_out()
            self.set_image(image)
        self.roll_out()
        revisions = [rs["metadata"]["annotations"][du.REVISION] for rs in self.replica_sets()]
        self.assertEqual(revisions, ["3", "4"])

    def test_rollback_by_template(self):
        """Putting back an old template (kubectl rollout undo) revives its replica set as max+1."""
        self.create(replicas=2)
        self.roll_out()
        first = self.replica_sets()[0]
        self.set_image("nginx:2")
        self.roll_out()
        template = first["spec"]["template"]
        del template["metadata"]["labels"][du.HASH_LABEL]
        annotations = dict(self.get()["metadata"]["annotations"])
        self.h.call("PATCH", f"{DEPLOYMENTS}/web", [
            {"op": "replace", "path": "/spec/template", "value": template},
            {"op": "replace", "path": "/metadata/annotations", "value": annotations}],
            200, JSON_PATCH)
        self.roll_out()
        rss = self.replica_sets()
        self.assertEqual(len(rss), 2)
        revived = rss[-1]
        self.assertEqual(revived["metadata"]["uid"], first["metadata"]["uid"])
        self.assertEqual((revived["metadata"]["annotations"][du.REVISION],
                          revived["metadata"]["annotations"][du.REVISION_HISTORY]), ("3", "1"))
        self.assertEqual(self.get()["metadata"]["annotations"][du.REVISION], "3")
        self.assertEqual(self.sizes(), [0, 2])

    def test_restart_annotation(self):
        """A restartedAt annotation on the template rolls out a new replica set."""
        self.create(replicas=1)
        self.roll_out()
        self.h.patch(f"{DEPLOYMENTS}/web", {"spec": {"template": {"metadata": {"annotations": {
            "kubectl.kubernetes.io/restartedAt": "2024-01-01T00:00:00Z"}}}}})
        self.roll_out()
        self.assertEqual(self.sizes(), [0, 1])

    def test_hash_collision(self):
        """A foreign replica set at the new one's name raises collisionCount and a new name."""
        body = deployment(replicas=1)
        body["spec"]["paused"] = True
        self.create(body)
        template = self.get()["spec"]["template"]
        taken = f"web-{du.compute_hash(template)}"
        self.h.call("POST", RS, replica_set(name=taken, replicas=0, labels={"app": "other"}), 201)
        self.h.patch(f"{DEPLOYMENTS}/web", {"spec": {"paused": False}})
        self.h.clock.advance(1)
        self.assertEqual(self.get()["status"]["collisionCount"], 1)
        names = [rs["metadata"]["name"] for rs in self.h.get(RS)["items"]]
        self.assertEqual(len(names), 2)
        [ours] = [n for n in names if n != taken]
        self.assertEqual(ours, f"web-{du.compute_hash(template, 1)}")

    def test_adopts_matching_replica_set(self):
        """An orphan replica set with the Deployment's template is adopted as its new one."""
        orphan = replica_set(name="web-manual", replicas=1, labels={"app": "web"})
        orphan["metadata"]["labels"] = {"app": "web"}
        orphan["spec"]["template"]["spec"]["containers"][0]["name"] = "nginx"
        self.h.call("POST", RS, orphan, 201)
        d = self.create(replicas=1)
        [rs] = self.replica_sets()
        self.assertEqual(rs["metadata"]["name"], "web-manual")
        self.assertEqual(rs["metadata"]["ownerReferences"][0]["uid"], d["metadata"]["uid"])
        self.assertEqual(rs["metadata"]["annotations"][du.REVISION], "1")

    def test_selecting_all(self):
        """
        The API refuses an empty selector; one stored before that rule gets a
        SelectingAll warning, no replica set, and is observed.
        """
        body = deployment(replicas=1)
        body["spec"]["selector"] = {}
        self.h.call("POST", DEPLOYMENTS, body, 422)
        body["metadata"].update(namespace="default", uid="u-old", generation=1,
                                creationTimestamp="2026-01-01T00:00:00Z")
        self.successResultOf(self.h.api.store.create(
            "/registry/apps/deployments/default/web", orjson.dumps(body)))
        self.h.clock.advance(1)
        self.assertEqual(self.h.get(RS)["items"], [])
        self.assertIn(("SelectingAll", "This deployment is selecting all pods. A non-empty "
                                       "selector is required."), self.h.events("Deployment"))
        self.assertEqual(self.get()["status"]["observedGeneration"], 1)

    def test_deleted_deployment_leaves_controller_idle(self):
        """Deleting a Deployment (its replica sets go with the collector) raises nothing."""
        self.create(replicas=1)
        self.h.call("DELETE", f"{DEPLOYMENTS}/web", code=200)
        self.h.clock.advance(1)
        self.assertIsNone(self.get())
