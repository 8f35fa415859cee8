"""PodSecurity admission: namespace labels choose what pod writes must meet."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.admission.podsecurity.admission import PodSecurity
from orchd.admission.podsecurity.levels import AUDIT_VIOLATIONS
from orchd.storage.memory import MemoryStore
from tests.support import APIHarness

NAMESPACES = "/api/v1/namespaces"
P = "pod-security.orch.io/"
RESTRICTED_MESSAGE = (
    'allowPrivilegeEscalation != false (container "c" must set securityContext.'
    'allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set '
    'securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" '
    'must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must '
    'set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")')


def plain(name="p", **spec):
    return {"metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


def hardened(name="p"):
    pod = plain(name, securityContext={"runAsNonRoot": True,
                                       "seccompProfile": {"type": "RuntimeDefault"}})
    pod["spec"]["containers"][0]["securityContext"] = {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return pod


def warnings(headers):
    return [h.decode() for h in headers.getRawHeaders(b"warning", [])]


class PodSecurityAdmissionTests(SynchronousTestCase):
    def setUp(self):
        store = MemoryStore()
        self.api = APIHarness(store=store, plugins=(PodSecurity(store),))

    def namespace(self, name, **labels):
        code, obj, _ = self.api.call("POST", NAMESPACES, {"metadata": {
            "name": name, "labels": {P + k.replace("_", "-"): v for k, v in labels.items()}}})
        self.assertEqual(code, 201, obj)

    def pod(self, namespace, pod):
        return self.api.call("POST", f"{NAMESPACES}/{namespace}/pods", pod)

    def test_enforce_refuses(self):
        """A non-conforming pod is refused, 403, with each violated control listed."""
        self.namespace("r", enforce="restricted")
        code, obj, headers = self.pod("r", plain())
        self.assertEqual(code, 403, obj)
        self.assertEqual(obj["reason"], "Forbidden")
        self.assertEqual(obj["message"], 'pods "p" is forbidden: violates PodSecurity '
                                         f'"restricted:latest": {RESTRICTED_MESSAGE}')
        self.assertEqual(warnings(headers), [])
        code, obj, _ = self.pod("r", hardened())
        self.assertEqual(code, 201, obj)

    def test_enforce_baseline(self):
        """Baseline lets a plain pod in but not a privileged one."""
        self.namespace("b", enforce="baseline")
        self.assertEqual(self.pod("b", plain())[0], 201)
        pod = plain("q", hostNetwork=True)
        pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
        code, obj, _ = self.pod("b", pod)
        self.assertEqual(code, 403, obj)
        self.assertEqual(obj["message"], (
            'pods "q" is forbidden: violates PodSecurity "baseline:latest": host namespaces '
            '(hostNetwork=true), privileged (container "c" must not set '
            "securityContext.privileged=true)"))

    def test_enforce_version(self):
        """A pinned version applies the controls of that release."""
        self.namespace("old", enforce="restricted", enforce_version="v1.18")
        code, obj, _ = self.pod("old", plain())
        self.assertEqual(obj["message"], (
            'pods "p" is forbidden: violates PodSecurity "restricted:v1.18": '
            'allowPrivilegeEscalation != false (container "c" must set '
            "securityContext.allowPrivilegeEscalation=false), runAsNonRoot != true (pod or "
            'container "c" must set securityContext.runAsNonRoot=true)'))
        pod = plain(securityContext={"runAsNonRoot": True})
        pod["spec"]["containers"][0]["securityContext"] = {"allowPrivilegeEscalation": False}
        self.assertEqual(self.pod("old", pod)[0], 201)

    def test_privileged_allows_everything(self):
        self.namespace("priv", enforce="privileged", warn="privileged", audit="privileged")
        pod = plain(hostPID=True, volumes=[{"name": "h", "hostPath": {"path": "/"}}])
        pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
        code, obj, headers = self.pod("priv", pod)
        self.assertEqual(code, 201, obj)
        self.assertEqual(warnings(headers), [])
        self.assertNotIn("annotations", obj["metadata"])

    def test_warn(self):
        """warn admits the pod and says what it would violate."""
        self.namespace("w", warn="restricted")
        code, obj, headers = self.pod("w", plain())
        self.assertEqual(code, 201, obj)
        self.assertEqual(warnings(headers), [
            '299 - "would violate PodSecurity \\"restricted:latest\\": '
            + RESTRICTED_MESSAGE.replace('"', '\\"') + '"'])
        self.assertEqual(warnings(self.pod("w", hardened("q"))[2]), [])

    def test_no_warning_when_refused(self):
        self.namespace("rw", enforce="baseline", warn="restricted")
        code, _, headers = self.pod("rw", plain(hostIPC=True))
        self.assertEqual(code, 403)
        self.assertEqual(warnings(headers), [])

    def test_audit_annotation(self):
        """audit puts the violations in the request's audit event and leaves the pod alone."""
        store = MemoryStore()
        self.api = APIHarness(store=store, plugins=(PodSecurity(store),), audit_policy={
            "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Metadata"}]})
        self.namespace("a", audit="baseline")
        code, obj, headers = self.pod("a", plain(hostIPC=True))
        self.assertEqual(code, 201, obj)
        self.assertNotIn("annotations", obj["metadata"])
        self.assertEqual(warnings(headers), [])
        event = self.api.audit.stages()[-1]
        self.assertEqual(event["objectRef"]["resource"], "pods")
        self.assertEqual(event["annotations"][AUDIT_VIOLATIONS],
                         'would violate PodSecurity "baseline:latest": host namespaces '
                         "(hostIPC=true)")
        self.assertEqual(event["annotations"]["pod-security.kubernetes.io/enforce-policy"],
                         "privileged:latest")

    def test_audit_annotation_of_a_client_is_its_own(self):
        """A client's annotation of the same name is kept as written: the server adds none."""
        self.namespace("a", audit="baseline")
        pod = plain(hostIPC=True)
        pod["metadata"]["annotations"] = {AUDIT_VIOLATIONS: "nothing"}
        code, obj, _ = self.pod("a", pod)
        self.assertEqual(code, 201, obj)
        self.assertEqual(obj["metadata"]["annotations"], {AUDIT_VIOLATIONS: "nothing"})

    def test_updates(self):
        """Metadata and image updates are not evaluated; stricter labels warn about old pods."""
        self.namespace("u")
        self.assertEqual(self.pod("u", plain(hostPID=True))[0], 201)
        code, ns, _ = self.api.call("GET", f"{NAMESPACES}/u")
        ns["metadata"]["labels"][P + "enforce"] = "baseline"
        code, obj, headers = self.api.call("PUT", f"{NAMESPACES}/u", ns)
        self.assertEqual(code, 200, obj)
        self.assertEqual(warnings(headers), [
            '299 - "existing pods in namespace \\"u\\" violate the new PodSecurity enforce '
            'level \\"baseline:latest\\""', '299 - "p: host namespaces"'])
        code, pod, _ = self.api.call("GET", f"{NAMESPACES}/u/pods/p")
        pod["metadata"]["labels"] = {"x": "y"}
        pod["spec"]["containers"][0]["image"] = "busybox:2"
        code, obj, _ = self.api.call("PUT", f"{NAMESPACES}/u/pods/p", pod)
        self.assertEqual(code, 200, obj)

    def test_invalid_labels(self):
        """Invalid levels and versions are refused on the namespace, 422."""
        code, obj, _ = self.api.call("POST", NAMESPACES, {"metadata": {
            "name": "bad", "labels": {P + "enforce": "strict", P + "warn-version": "1.25"}}})
        self.assertEqual(code, 422, obj)
        self.assertEqual(sorted(c["field"] for c in obj["details"]["causes"]), [
            f"metadata.labels[{P}enforce]", f"metadata.labels[{P}warn-version]"])
        self.namespace("good", enforce="baseline", enforce_version="v1.24")
        code, ns, _ = self.api.call("GET", f"{NAMESPACES}/good")
        ns["metadata"]["labels"][P + "audit"] = "everything"
        code, obj, _ = self.api.call("PUT", f"{NAMESPACES}/good", ns)
        self.assertEqual(code, 422, obj)
        self.assertIn('Invalid value: "everything": must be one of privileged, baseline, '
                      "restricted", obj["message"])

    def test_workload_templates_warn_only(self):
        """A Deployment's pod template is checked against warn, never refused."""
        self.namespace("d", enforce="restricted", warn="baseline")
        template = plain(hostNetwork=True)
        template["metadata"] = {"labels": {"app": "d"}}
        deployment = {"metadata": {"name": "d"}, "spec": {
            "selector": {"matchLabels": {"app": "d"}}, "template": template}}
        code, obj, headers = self.api.call(
            "POST", f"{NAMESPACES}/d/deployments".replace("/api/v1", "/apis/apps/v1"),
            deployment)
        self.assertEqual(code, 201, obj)
        self.assertEqual(warnings(headers), [
            '299 - "would violate PodSecurity \\"baseline:latest\\": host namespaces '
            '(hostNetwork=true)"'])
