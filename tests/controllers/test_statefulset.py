"""The StatefulSet controller, driven through the API in memory."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.garbagecollector import GarbageCollector
from orchd.controllers.statefulset import StatefulSetController
from tests.controllers.workloadsupport import EVENTS, PODS, WorkloadHarness

STS = "/apis/apps/v1/namespaces/default/statefulsets"
REVISIONS = "/apis/apps/v1/namespaces/default/controllerrevisions"
CLAIMS = "/api/v1/namespaces/default/persistentvolumeclaims"


def stateful_set(name="web", replicas=3, image="nginx:1", claims=False, **spec):
    labels = {"app": name}
    spec.update(replicas=replicas, serviceName="nginx", selector={"matchLabels": labels},
                template={"metadata": {"labels": labels},
                          "spec": {"containers": [{"name": "c", "image": image}]}})
    if claims:
        spec["volumeClaimTemplates"] = [{
            "metadata": {"name": "www", "labels": {"tier": "data"}},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}}]
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": spec}


class StatefulSetTests(SynchronousTestCase):
    def setUp(self):
        self.h = WorkloadHarness(self)
        self.controller = None

    def create(self, **kw):
        if self.controller is None:
            self.controller = self.h.start(
                StatefulSetController(self.h.api.catalog, self.h.clock))
        return self.h.call("POST", STS, stateful_set(**kw), 201)

    def sts(self, name="web"):
        return self.h.get(f"{STS}/{name}")

    def step(self):
        """The kubelet: finish deletions and make every pod Running and Ready."""
        self.h.make_ready()
        self.h.finish_deletions()

    def settle(self, rounds=10):
        for _ in range(rounds):
            if not self.h.make_ready():
                break

    def images(self):
        return [p["spec"]["containers"][0]["image"] for p in self.h.pods()]

    def revisions(self):
        return sorted(self.h.get(REVISIONS)["items"], key=lambda r: r["revision"])

    def test_ordered_ready_creation(self):
        """OrderedReady makes web-0 first and web-1 only once web-0 is Running and Ready."""
        self.create()
        self.assertEqual(self.h.pod_names(), ["web-0"])
        self.h.set_pod_status("web-0", ready=False)
        self.assertEqual(self.h.pod_names(), ["web-0"])
        self.h.set_pod_status("web-0")
        self.assertEqual(self.h.pod_names(), ["web-0", "web-1"])
        self.settle()
        self.assertEqual(self.h.pod_names(), ["web-0", "web-1", "web-2"])
        self.assertEqual([e for e in self.h.events("StatefulSet")][:1],
                         [("SuccessfulCreate", "create Pod web-0 in StatefulSet web successful")])

    def test_pod_identity(self):
        """Pods have hostname, subdomain, the revision, pod-name and pod-index labels, and an owner."""
        sts = self.create(replicas=1)
        pod = self.h.get(f"{PODS}/web-0")
        self.assertEqual((pod["spec"]["hostname"], pod["spec"]["subdomain"]), ("web-0", "nginx"))
        labels = pod["metadata"]["labels"]
        revision = self.revisions()[0]
        self.assertEqual(labels, {"app": "web", "controller-revision-hash":
                                  revision["metadata"]["name"],
                                  "statefulset.orch.io/pod-name": "web-0",
                                  "apps.orch.io/pod-index": "0"})
        self.assertTrue(revision["metadata"]["name"].startswith("web-"))
        self.assertEqual(revision["metadata"]["labels"]["controller.orch.io/hash"],
                         revision["metadata"]["name"][len("web-"):])
        self.assertEqual(pod["metadata"]["ownerReferences"][0]["uid"], sts["metadata"]["uid"])

    def test_status(self):
        """The status counts pods and names the revisions; current becomes update once rolled out."""
        self.create()
        self.settle()
        status = self.sts()["status"]
        name = self.revisions()[0]["metadata"]["name"]
        self.assertEqual({k: status[k] for k in (
            "replicas", "readyReplicas", "availableReplicas", "currentReplicas",
            "updatedReplicas", "currentRevision", "updateRevision", "observedGeneration",
            "collisionCount")},
            {"replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "currentReplicas": 3,
             "updatedReplicas": 3, "currentRevision": name, "updateRevision": name,
             "observedGeneration": 1, "collisionCount": 0})

    def test_parallel(self):
        """Parallel makes every pod at once and deletes the surplus at once."""
        self.create(replicas=4, podManagementPolicy="Parallel")
        self.assertEqual(self.h.pod_names(), ["web-0", "web-1", "web-2", "web-3"])
        self.h.patch(f"{STS}/web", {"spec": {"replicas": 1}})
        self.h.finish_deletions()
        self.assertEqual(self.h.pod_names(), ["web-0"])

    def test_ordered_scale_down(self):
        """OrderedReady scales down from the highest ordinal, one pod at a time."""
        self.create()
        self.settle()
        self.h.patch(f"{STS}/web", {"spec": {"replicas": 1}})
        self.assertEqual(self.h.pod_names(), ["web-0", "web-1"])
        self.h.finish_deletions()
        self.assertEqual(self.h.pod_names(), ["web-0"])
        deletes = [m for r, m in self.h.events("StatefulSet") if r == "SuccessfulDelete"]
        self.assertEqual(deletes, ["delete Pod web-2 in StatefulSet web successful",
                                   "delete Pod web-1 in StatefulSet web successful"])

    def test_failed_pod_is_remade(self):
        """A failed pod is deleted and made again under the same name."""
        self.create(replicas=1)
        self.settle()
        uid = self.h.get(f"{PODS}/web-0")["metadata"]["uid"]
        self.h.set_pod_status("web-0", phase="Failed", ready=False)
        self.h.finish_deletions()
        pod = self.h.get(f"{PODS}/web-0")
        self.assertNotEqual(pod["metadata"]["uid"], uid)
        self.assertIn(("RecreatingFailedPod",
                       "StatefulSet default/web is recreating failed Pod web-0"),
                      self.h.events("StatefulSet"))

    def update_image(self, image):
        self.h.patch(f"{STS}/web", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": image}]}}}})

    def test_rolling_update(self):
        """A rolling update replaces pods from the highest ordinal, each after the last is ready."""
        self.create()
        self.settle()
        old = self.sts()["status"]["currentRevision"]
        self.update_image("nginx:2")
        self.assertEqual(self.h.pod_names(), ["web-0", "web-1"])
        self.h.finish_deletions()
        self.assertEqual(self.images(), ["nginx:1", "nginx:1", "nginx:2"])
        self.h.finish_deletions()
        self.assertEqual(self.h.pod_names(), ["web-0", "web-1", "web-2"])
        status = self.sts()["status"]
        self.assertEqual((status["currentRevision"], status["updatedReplicas"]), (old, 1))
        self.assertNotEqual(status["updateRevision"], old)
        for _ in range(6):
            self.step()
        self.assertEqual(self.images(), ["nginx:2"] * 3)
        status = self.sts()["status"]
        self.assertEqual(status["currentRevision"], status["updateRevision"])
        self.assertEqual([r["revision"] for r in self.revisions()], [1, 2])

    def test_partition(self):
        """Pods below the partition stay at the current revision, and are remade at it."""
        self.create(updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 2}})
        self.settle()
        self.update_image("nginx:2")
        for _ in range(4):
            self.step()
        self.assertEqual(self.images(), ["nginx:1", "nginx:1", "nginx:2"])
        self.h.call("DELETE", f"{PODS}/web-0")
        for _ in range(3):
            self.step()
        self.assertEqual(self.images(), ["nginx:1", "nginx:1", "nginx:2"])
        status = self.sts()["status"]
        self.assertEqual((status["currentReplicas"], status["updatedReplicas"]), (2, 1))

    def test_on_delete(self):
        """OnDelete replaces only the pods the user deletes."""
        self.create(replicas=2, updateStrategy={"type": "OnDelete"})
        self.settle()
        self.update_image("nginx:2")
        self.step()
        self.assertEqual(self.images(), ["nginx:1", "nginx:1"])
        self.h.call("DELETE", f"{PODS}/web-1")
        self.step()
        self.step()
        self.assertEqual(self.images(), ["nginx:1", "nginx:2"])

    def test_rollback_renumbers(self):
        """Setting an earlier template again reuses its revision, numbered max + 1."""
        self.create(replicas=1)
        first = self.revisions()[0]["metadata"]["name"]
        self.update_image("nginx:2")
        self.update_image("nginx:1")
        revisions = self.revisions()
        self.assertEqual([(r["metadata"]["name"] == first, r["revision"]) for r in revisions],
                         [(False, 2), (True, 3)])
        self.assertEqual(self.sts()["status"]["updateRevision"], first)

    def test_claims(self):
        """Each pod gets its claims <template>-<pod>, made before it, labelled and named in its volumes."""
        self.create(replicas=2, claims=True)
        self.settle()
        claims = sorted(c["metadata"]["name"] for c in self.h.get(CLAIMS)["items"])
        self.assertEqual(claims, ["www-web-0", "www-web-1"])
        claim = self.h.get(f"{CLAIMS}/www-web-0")
        self.assertEqual(claim["metadata"]["labels"], {"tier": "data", "app": "web"})
        self.assertNotIn("ownerReferences", claim["metadata"])
        pod = self.h.get(f"{PODS}/web-0")
        self.assertIn({"name": "www", "persistentVolumeClaim": {"claimName": "www-web-0"}},
                      pod["spec"]["volumes"])
        self.assertIn(("SuccessfulCreate", "create Claim www-web-0 Pod web-0 in StatefulSet "
                                           "web success"), self.h.events("StatefulSet"))
        self.h.patch(f"{STS}/web", {"spec": {"replicas": 1}})
        self.h.finish_deletions()
        self.assertEqual(len(self.h.get(CLAIMS)["items"]), 2)

    def test_claims_deleted_with_the_set(self):
        """With whenDeleted Delete the claims belong to the set and go with it."""
        sts = self.create(replicas=1, claims=True, persistentVolumeClaimRetentionPolicy={
            "whenDeleted": "Delete", "whenScaled": "Retain"})
        claim = self.h.get(f"{CLAIMS}/www-web-0")
        self.assertEqual([r["uid"] for r in claim["metadata"]["ownerReferences"]],
                         [sts["metadata"]["uid"]])
        self.h.start(GarbageCollector(self.h.api.catalog, self.h.clock))
        self.h.call("DELETE", f"{STS}/web")
        for _ in range(5):
            self.h.clock.advance(1)
            self.h.finish_deletions()
        self.assertEqual(self.h.get(CLAIMS)["items"], [])
        self.assertEqual(self.h.pods(), [])
        self.assertEqual(self.h.get(REVISIONS)["items"], [])

    def test_claims_deleted_when_scaled(self):
        """With whenScaled Delete a scaled-down pod's claims are given to the pod and go with it."""
        self.create(replicas=2, claims=True, persistentVolumeClaimRetentionPolicy={
            "whenDeleted": "Retain", "whenScaled": "Delete"})
        self.settle()
        self.h.start(GarbageCollector(self.h.api.catalog, self.h.clock))
        pod_uid = self.h.get(f"{PODS}/web-1")["metadata"]["uid"]
        self.h.patch(f"{STS}/web", {"spec": {"replicas": 1}})
        claim = self.h.get(f"{CLAIMS}/www-web-1")
        self.assertEqual([r["uid"] for r in claim["metadata"]["ownerReferences"]], [pod_uid])
        for _ in range(5):
            self.h.clock.advance(1)
            self.h.finish_deletions()
        self.assertEqual([c["metadata"]["name"] for c in self.h.get(CLAIMS)["items"]],
                         ["www-web-0"])

    def test_history_limit(self):
        """Revisions beyond revisionHistoryLimit that no pod uses are deleted."""
        self.create(replicas=1, revisionHistoryLimit=1, updateStrategy={"type": "OnDelete"})
        for i in range(2, 6):
            self.update_image(f"nginx:{i}")
        images = [r["data"]["spec"]["template"]["spec"]["containers"][0]["image"]
                  for r in self.revisions()]
        self.assertEqual(images, ["nginx:1", "nginx:4", "nginx:5"])

    def test_start_ordinal(self):
        """spec.ordinals.start numbers the pods from there."""
        self.create(replicas=2, podManagementPolicy="Parallel", ordinals={"start": 5})
        self.assertEqual(self.h.pod_names(), ["web-5", "web-6"])

    def test_refused_pod_is_an_event(self):
        """A pod the API refuses (a name too long for its labels) gives FailedCreate and a retry."""
        body = stateful_set(name="s" * 60, replicas=1)
        self.create(replicas=0)
        self.h.call("POST", STS, body, 201)
        failed = [m for r, m in self.h.events("StatefulSet") if r == "FailedCreate"]
        self.assertEqual(len(failed), 1)
        self.assertTrue(failed[0].startswith(f"create Pod {'s' * 60}-0 in StatefulSet "
                                             f"{'s' * 60} failed error: "), failed[0])
        before = self.failed_creates()
        self.h.clock.advance(5)
        self.assertGreater(self.failed_creates(), before)

    def failed_creates(self):
        self.h.clock.advance(0)
        return sum(e.get("count") or 1 for e in self.h.get(EVENTS)["items"]
                   if e["reason"] == "FailedCreate")

    def test_scale_down_past_an_unhealthy_pod(self):
        """Scaling down deletes healthy pods above the first unhealthy one, then that one."""
        self.create()
        self.settle()
        self.h.set_pod_status("web-1", ready=False)
        self.h.patch(f"{STS}/web", {"spec": {"replicas": 0}})
        self.assertEqual(self.h.pod_names(), ["web-0", "web-1"])
        self.h.finish_deletions()
        self.assertEqual(self.h.pod_names(), ["web-0"])
        self.h.finish_deletions()
        self.assertEqual(self.h.pod_names(), [])

    def test_name_collision(self):
        """A revision name taken by other data makes a new name and counts the collision."""
        self.create(replicas=0)
        taken = self.revisions()[0]["metadata"]["name"]
        self.h.call("POST", "/api/v1/namespaces", {"metadata": {"name": "other"}}, 201)
        other = "/apis/apps/v1/namespaces/other"
        self.h.call("POST", f"{other}/controllerrevisions", {
            "metadata": {"name": taken}, "data": {"unrelated": True}, "revision": 1}, 201)
        self.h.call("POST", f"{other}/statefulsets", stateful_set(replicas=0), 201)
        status = self.h.get(f"{other}/statefulsets/web")["status"]
        self.assertEqual(status["collisionCount"], 1)
        self.assertNotEqual(status["updateRevision"], taken)
        self.assertIsNotNone(self.h.get(f"{other}/controllerrevisions/{status['updateRevision']}"))

    def test_identity_restored(self):
        """A pod-name or pod-index label changed by a user is put back."""
        self.create(replicas=1)
        self.settle()
        self.h.patch(f"{PODS}/web-0", {"metadata": {"labels": {
            "statefulset.orch.io/pod-name": None, "apps.orch.io/pod-index": "7"}}})
        labels = self.h.get(f"{PODS}/web-0")["metadata"]["labels"]
        self.assertEqual((labels["statefulset.orch.io/pod-name"], labels["apps.orch.io/pod-index"]),
                         ("web-0", "0"))

    def test_missing_claim_of_a_pending_pod_is_made_again(self):
        """A claim deleted while its pod waits to start is made again."""
        self.create(replicas=1, claims=True)
        self.h.call("DELETE", f"{CLAIMS}/www-web-0")
        self.h.patch(f"{STS}/web", {"metadata": {"labels": {"poke": "1"}}})
        self.assertIsNotNone(self.h.get(f"{CLAIMS}/www-web-0"))
