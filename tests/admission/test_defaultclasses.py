"""DefaultIngressClass and DefaultStorageClass: new objects without a class get the default."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.admission.defaultingressclass import DefaultIngressClass
from orchd.admission.defaultstorageclass import DefaultStorageClass
from orchd.storage.memory import MemoryStore
from tests.support import APIHarness

INGRESS_CLASSES = "/apis/networking.orch.io/v1/ingressclasses"
INGRESSES = "/apis/networking.orch.io/v1/namespaces/default/ingresses"
STORAGE_CLASSES = "/apis/storage.orch.io/v1/storageclasses"
CLAIMS = "/api/v1/namespaces/default/persistentvolumeclaims"
INGRESS_DEFAULT = "ingressclass.orch.io/is-default-class"
STORAGE_DEFAULT = "storageclass.orch.io/is-default-class"
STORAGE_BETA_DEFAULT = "storageclass.beta.orch.io/is-default-class"
CLAIM_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


def harness():
    store = MemoryStore()
    return APIHarness(store=store, plugins=(DefaultIngressClass(store),
                                            DefaultStorageClass(store)))


class DefaultIngressClassTests(SynchronousTestCase):
    def setUp(self):
        self.api = harness()

    def ingress_class(self, name, value=None):
        annotations = {} if value is None else {INGRESS_DEFAULT: value}
        code, _, _ = self.api.call("POST", INGRESS_CLASSES, {
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"controller": "example.org/ingress"}})
        self.assertEqual(code, 201)

    def create(self, name="web", spec=None, annotations=None):
        body = {"metadata": {"name": name}}
        if spec is not None:
            body["spec"] = spec
        if annotations is not None:
            body["metadata"]["annotations"] = annotations
        return self.api.call("POST", INGRESSES, body)[:2]

    def test_no_default_untouched(self):
        self.ingress_class("a")
        self.ingress_class("b", "false")
        code, created = self.create(spec={"defaultBackend": {"service": {
            "name": "s", "port": {"number": 80}}}})
        self.assertEqual(code, 201)
        self.assertNotIn("ingressClassName", created["spec"])
        code, created = self.create("bare")
        self.assertEqual(code, 201)
        self.assertNotIn("spec", created)

    def test_one_default_set(self):
        self.ingress_class("a")
        self.ingress_class("nginx", "true")
        code, created = self.create()
        self.assertEqual(code, 201)
        self.assertEqual(created["spec"]["ingressClassName"], "nginx")

    def test_explicit_class_untouched(self):
        """The field, even empty, or the old class annotation: no default."""
        self.ingress_class("nginx", "true")
        self.assertEqual(self.create("a", spec={"ingressClassName": "other"})[1]["spec"],
                         {"ingressClassName": "other"})
        self.assertEqual(self.create("b", spec={"ingressClassName": ""})[1]["spec"],
                         {"ingressClassName": ""})
        code, created = self.create("c", annotations={"orch.io/ingress.class": "x"})
        self.assertEqual(code, 201)
        self.assertNotIn("ingressClassName", created.get("spec", {}))

    def test_value_must_be_exactly_true(self):
        for name, value in (("a", "True"), ("b", "yes"), ("c", "1"), ("d", "true ")):
            self.ingress_class(name, value)
        code, created = self.create()
        self.assertEqual(code, 201)
        self.assertNotIn("spec", created)

    def test_two_defaults_refused(self):
        self.ingress_class("a", "true")
        self.ingress_class("b", "true")
        code, status = self.create()
        self.assertEqual(code, 403)
        self.assertEqual(status["reason"], "Forbidden")
        self.assertEqual(status["message"],
                         'ingresses.networking.orch.io "web" is forbidden: Internal error '
                         "occurred: 2 default IngressClasses were found, only 1 allowed")
        # An explicit class needs no default.
        self.assertEqual(self.create(spec={"ingressClassName": "a"})[0], 201)

    def test_update_untouched(self):
        """Only creates are defaulted."""
        self.create()
        self.ingress_class("nginx", "true")
        code, updated, _ = self.api.call("PUT", INGRESSES + "/web", {
            "metadata": {"name": "web"}, "spec": {}})
        self.assertEqual(code, 200)
        self.assertEqual(updated["spec"], {})


class DefaultStorageClassTests(SynchronousTestCase):
    def setUp(self):
        self.api = harness()

    def storage_class(self, name, annotations=None):
        code, _, _ = self.api.call("POST", STORAGE_CLASSES, {
            "metadata": {"name": name, "annotations": annotations or {}},
            "provisioner": "example.org/disk"})
        self.assertEqual(code, 201)

    def create(self, name="data", annotations=None, **spec):
        body = {"metadata": {"name": name}, "spec": dict(CLAIM_SPEC, **spec)}
        if annotations is not None:
            body["metadata"]["annotations"] = annotations
        return self.api.call("POST", CLAIMS, body)[:2]

    def test_no_default_untouched(self):
        self.storage_class("slow", {STORAGE_DEFAULT: "false"})
        code, created = self.create()
        self.assertEqual(code, 201)
        self.assertNotIn("storageClassName", created["spec"])

    def test_one_default_set(self):
        self.storage_class("slow")
        self.storage_class("fast", {STORAGE_DEFAULT: "true"})
        code, created = self.create()
        self.assertEqual(code, 201)
        self.assertEqual(created["spec"]["storageClassName"], "fast")

    def test_beta_default_annotation(self):
        self.storage_class("fast", {STORAGE_BETA_DEFAULT: "true"})
        self.assertEqual(self.create()[1]["spec"]["storageClassName"], "fast")

    def test_explicit_class_untouched(self):
        """A class name, the empty name (no class), or the beta annotation: kept."""
        self.storage_class("fast", {STORAGE_DEFAULT: "true"})
        self.assertEqual(self.create("a", storageClassName="slow")[1]["spec"]
                         ["storageClassName"], "slow")
        self.assertEqual(self.create("b", storageClassName="")[1]["spec"]
                         ["storageClassName"], "")
        code, created = self.create(
            "c", annotations={"volume.beta.orch.io/storage-class": "slow"})
        self.assertEqual(code, 201)
        self.assertNotIn("storageClassName", created["spec"])

    def test_value_must_be_exactly_true(self):
        self.storage_class("a", {STORAGE_DEFAULT: "TRUE"})
        self.storage_class("b", {STORAGE_BETA_DEFAULT: "yes"})
        code, created = self.create()
        self.assertEqual(code, 201)
        self.assertNotIn("storageClassName", created["spec"])

    def test_newest_of_two_defaults_wins(self):
        """With two defaults the newer one is set, as upstream's GetDefaultClass picks."""
        self.storage_class("b", {STORAGE_DEFAULT: "true"})
        self.api.clock.advance(5)
        self.storage_class("a", {STORAGE_BETA_DEFAULT: "true"})
        code, created = self.create()
        self.assertEqual(code, 201)
        self.assertEqual(created["spec"]["storageClassName"], "a")

    def test_equally_new_defaults_first_by_name(self):
        """Two defaults made in the same second: the first by name is set."""
        self.storage_class("b", {STORAGE_DEFAULT: "true"})
        self.storage_class("a", {STORAGE_DEFAULT: "true"})
        self.assertEqual(self.create()[1]["spec"]["storageClassName"], "a")

    def test_upstream_default_annotation(self):
        """The upstream spelling that public manifests carry also marks the default."""
        self.storage_class("local-path", {"storageclass.kubernetes.io/is-default-class": "true"})
        self.assertEqual(self.create()[1]["spec"]["storageClassName"], "local-path")
