"""Service-account admission: pods get an existing account and its token volume."""

import random

from twisted.trial.unittest import SynchronousTestCase

from orchd.admission.serviceaccount import MOUNT_PATH, ServiceAccountAdmission, token_volume
from orchd.storage.memory import MemoryStore
from tests.support import APIHarness

PODS = "/api/v1/namespaces/default/pods"
SAS = "/api/v1/namespaces/default/serviceaccounts"


def pod(name="p", containers=("c",), **spec):
    return {"metadata": {"name": name},
            "spec": dict({"containers": [{"name": c, "image": "i"} for c in containers]},
                         **spec)}


class ServiceAccountAdmissionTests(SynchronousTestCase):
    def setUp(self):
        store = MemoryStore()
        self.plugin = ServiceAccountAdmission(store, random.Random(7))
        self.api = APIHarness(store=store, plugins=(self.plugin,))
        self.account("default")

    def account(self, name, **fields):
        code, _, _ = self.api.call("POST", SAS, dict({"metadata": {"name": name}}, **fields))
        self.assertEqual(code, 201)

    def create(self, body):
        return self.api.call("POST", PODS, body)[:2]

    def test_default_account_and_volume(self):
        """No account named: C{default}, and the projected volume in every container."""
        code, created = self.create(pod(containers=("a", "b"),
                                        initContainers=[{"name": "i", "image": "i"}]))
        self.assertEqual(code, 201)
        spec = created["spec"]
        self.assertEqual((spec["serviceAccountName"], spec["serviceAccount"]),
                         ("default", "default"))
        [volume] = spec["volumes"]
        self.assertTrue(volume["name"].startswith("orch-api-access-"))
        self.assertEqual(len(volume["name"]), len("orch-api-access-") + 5)
        self.assertEqual(volume, token_volume(volume["name"]))
        self.assertEqual(volume["projected"]["defaultMode"], 420)
        sources = volume["projected"]["sources"]
        self.assertEqual(sources[0]["serviceAccountToken"],
                         {"path": "token", "expirationSeconds": 3607})
        self.assertEqual(sources[1]["configMap"]["name"], "orch-root-ca.crt")
        mount = {"name": volume["name"], "readOnly": True, "mountPath": MOUNT_PATH}
        for container in spec["containers"] + spec["initContainers"]:
            self.assertEqual(container["volumeMounts"], [mount])

    def test_missing_account_refused(self):
        code, status = self.create(pod(serviceAccountName="robot"))
        self.assertEqual(code, 403)
        self.assertEqual(status["reason"], "Forbidden")
        self.assertEqual(status["message"], 'pods "p" is forbidden: error looking up service '
                                            'account default/robot: serviceaccount "robot" '
                                            'not found')

    def test_missing_default_refused(self):
        self.api.call("DELETE", f"{SAS}/default")
        code, status = self.create(pod())
        self.assertEqual(code, 403)
        self.assertIn("default/default", status["message"])

    def test_deprecated_field(self):
        """C{spec.serviceAccount} alone names the account."""
        self.account("robot")
        code, created = self.create(pod(serviceAccount="robot"))
        self.assertEqual(code, 201)
        self.assertEqual(created["spec"]["serviceAccountName"], "robot")

    def test_automount_off(self):
        """Off on the account: no volume; the pod's own setting wins either way."""
        self.account("quiet", automountServiceAccountToken=False)
        created = self.create(pod("a", serviceAccountName="quiet"))[1]
        self.assertNotIn("volumes", created["spec"])
        created = self.create(pod("b", serviceAccountName="quiet",
                                  automountServiceAccountToken=True))[1]
        self.assertEqual(len(created["spec"]["volumes"]), 1)
        created = self.create(pod("c", automountServiceAccountToken=False))[1]
        self.assertNotIn("volumes", created["spec"])

    def test_existing_mount_kept(self):
        """A container that mounts something at the path keeps it; others get the token."""
        body = pod(containers=("a", "b"), volumes=[{"name": "mine", "emptyDir": {}}])
        body["spec"]["containers"][0]["volumeMounts"] = [{"name": "mine",
                                                          "mountPath": MOUNT_PATH}]
        spec = self.create(body)[1]["spec"]
        self.assertEqual(spec["containers"][0]["volumeMounts"],
                         [{"name": "mine", "mountPath": MOUNT_PATH}])
        self.assertEqual(len(spec["containers"][1]["volumeMounts"]), 1)
        self.assertEqual([v["name"][:16] for v in spec["volumes"]], ["mine", "orch-api-access-"])

    def test_image_pull_secrets(self):
        """Copied from the account when the pod has none; the pod's own win."""
        self.account("puller", imagePullSecrets=[{"name": "reg"}])
        spec = self.create(pod("a", serviceAccountName="puller"))[1]["spec"]
        self.assertEqual(spec["imagePullSecrets"], [{"name": "reg"}])
        spec = self.create(pod("b", serviceAccountName="puller",
                               imagePullSecrets=[{"name": "own"}]))[1]["spec"]
        self.assertEqual(spec["imagePullSecrets"], [{"name": "own"}])

    def test_mirror_pods(self):
        """Mirror pods are not changed, and may not use an account or secrets."""
        mirror = {"orch.io/config.mirror": "hash"}
        body = pod("m")
        body["metadata"]["annotations"] = mirror
        code, created = self.create(body)
        self.assertEqual(code, 201)
        self.assertNotIn("serviceAccountName", created["spec"])
        self.assertNotIn("volumes", created["spec"])
        body = pod("m2", serviceAccountName="default")
        body["metadata"]["annotations"] = mirror
        code, status = self.create(body)
        self.assertEqual(code, 403)
        self.assertIn("may not reference service accounts", status["message"])
        body = pod("m3", volumes=[{"name": "s", "secret": {"secretName": "x"}}])
        body["metadata"]["annotations"] = mirror
        self.assertIn("may not reference secrets", self.create(body)[1]["message"])

    def test_updates_untouched(self):
        """Only creation is admitted: an update is not given another volume."""
        created = self.create(pod())[1]
        code, updated, _ = self.api.call("PUT", f"{PODS}/p", created)
        self.assertEqual(code, 200)
        self.assertEqual(len(updated["spec"]["volumes"]), 1)
