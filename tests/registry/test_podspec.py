"""Pods and pod templates: upstream's defaults, a new pod's status, resource quantities."""

import orjson
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.quantity import FORMAT_ERROR
from orchd.registry.kinds.podspec import image_tag, qos_class
from tests.support import APIHarness, _result as result_of

PODS = "/api/v1/namespaces/default/pods"
TEMPLATES = "/api/v1/namespaces/default/podtemplates"
MERGE_PATCH = b"application/merge-patch+json"


def pod(name="p", **container):
    container.setdefault("name", "c")
    container.setdefault("image", "nginx")
    return {"metadata": {"name": name}, "spec": {"containers": [container]}}


def resources(requests=None, limits=None):
    out = {}
    if requests is not None:
        out["requests"] = requests
    if limits is not None:
        out["limits"] = limits
    return out


class PodDefaultsTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def create(self, body):
        code, obj, _ = self.api.call("POST", PODS, body)
        self.assertEqual(code, 201, obj)
        return obj

    def test_spec_defaults(self):
        """A bare pod gets upstream's pod and container defaults."""
        spec = self.create(pod(ports=[{"containerPort": 80}]))["spec"]
        self.assertEqual(
            {k: spec[k] for k in ("dnsPolicy", "restartPolicy", "securityContext",
                                  "terminationGracePeriodSeconds", "schedulerName",
                                  "enableServiceLinks")},
            {"dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "securityContext": {},
             "terminationGracePeriodSeconds": 30, "schedulerName": "default-scheduler",
             "enableServiceLinks": True})
        self.assertEqual(spec["containers"][0], {
            "name": "c", "image": "nginx", "imagePullPolicy": "Always",
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "ports": [{"containerPort": 80, "protocol": "TCP"}]})

    def test_pull_policy_follows_the_tag(self):
        """Always for :latest or no tag, IfNotPresent for any other tag or a digest alone."""
        for image, policy in (("nginx", "Always"), ("nginx:latest", "Always"),
                              ("nginx:1.27", "IfNotPresent"),
                              ("registry:5000/team/app", "Always"),
                              ("registry:5000/team/app:v2", "IfNotPresent"),
                              ("nginx@sha256:" + "a" * 64, "IfNotPresent")):
            obj = self.create(pod(name=f"p{abs(hash(image)) % 10000}", image=image))
            self.assertEqual(obj["spec"]["containers"][0]["imagePullPolicy"], policy, image)
        self.assertEqual(image_tag("a:latest@sha256:x"), "latest")

    def test_set_values_are_kept(self):
        """Defaults never override what the pod says."""
        body = pod(imagePullPolicy="Never", terminationMessagePolicy="FallbackToLogsOnError")
        body["spec"].update(restartPolicy="Never", dnsPolicy="Default",
                            terminationGracePeriodSeconds=0, schedulerName="other")
        spec = self.create(body)["spec"]
        self.assertEqual((spec["restartPolicy"], spec["dnsPolicy"],
                          spec["terminationGracePeriodSeconds"], spec["schedulerName"]),
                         ("Never", "Default", 0, "other"))
        self.assertEqual(spec["containers"][0]["imagePullPolicy"], "Never")
        self.assertEqual(spec["containers"][0]["terminationMessagePolicy"],
                         "FallbackToLogsOnError")

    def test_probe_volume_and_env_defaults(self):
        """Probes, HTTP actions, volume sources and field references get their defaults."""
        body = pod(readinessProbe={"httpGet": {"port": 80}},
                   env=[{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}])
        body["spec"]["volumes"] = [{"name": "scratch"}, {"name": "cfg", "configMap": {"name": "x"}},
                                   {"name": "host", "hostPath": {"path": "/tmp"}}]
        spec = self.create(body)["spec"]
        self.assertEqual(spec["containers"][0]["readinessProbe"], {
            "httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
            "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        self.assertEqual(spec["containers"][0]["env"][0]["valueFrom"]["fieldRef"]["apiVersion"],
                         "v1")
        self.assertEqual(spec["volumes"], [
            {"name": "scratch", "emptyDir": {}},
            {"name": "cfg", "configMap": {"name": "x", "defaultMode": 420}},
            {"name": "host", "hostPath": {"path": "/tmp", "type": ""}}])

    def test_requests_default_to_limits(self):
        """A pod's unset requests are its limits, and host networking makes ports host ports."""
        body = pod(resources=resources(requests={"memory": "64Mi"},
                                       limits={"cpu": "1", "memory": "128Mi"}),
                   ports=[{"containerPort": 8080}])
        body["spec"]["hostNetwork"] = True
        container = self.create(body)["spec"]["containers"][0]
        self.assertEqual(container["resources"]["requests"], {"memory": "64Mi", "cpu": "1"})
        self.assertEqual(container["ports"][0]["hostPort"], 8080)

    def test_defaults_on_update_and_patch(self):
        """A patch that drops a defaulted field gets it back, without a new generation."""
        self.create(pod())
        code, obj, _ = self.api.call("PATCH", PODS + "/p", {"spec": {"dnsPolicy": None}},
                                     content_type=MERGE_PATCH)
        self.assertEqual((code, obj["spec"]["dnsPolicy"]), (200, "ClusterFirst"))
        self.assertEqual(obj["metadata"]["generation"], 1)

    def test_quantities_in_canonical_form(self):
        """Requests and limits are stored as upstream writes them, rounded up to a milli."""
        container = self.create(pod(resources=resources(
            requests={"cpu": "0.0001", "memory": "1024Ki", "ephemeral-storage": 1000},
            limits={"cpu": "0.5", "memory": "1.5Gi"})))["spec"]["containers"][0]
        self.assertEqual(container["resources"], {
            "requests": {"cpu": "1m", "memory": "1Mi", "ephemeral-storage": "1k"},
            "limits": {"cpu": "500m", "memory": "1536Mi"}})


class NewPodStatusTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def test_pending_with_qos(self):
        """A new pod is Pending with its QoS class, whatever status was sent."""
        body = pod()
        body["status"] = {"phase": "Running", "podIP": "10.0.0.1"}
        code, obj, _ = self.api.call("POST", PODS, body)
        self.assertEqual((code, obj["status"]), (201, {"phase": "Pending",
                                                       "qosClass": "BestEffort"}))

    def test_spec_update_keeps_status(self):
        """A spec write leaves the status as the status subresource set it."""
        self.api.call("POST", PODS, pod())
        self.api.call("PATCH", PODS + "/p/status", {"status": {"phase": "Running"}},
                      content_type=MERGE_PATCH)
        code, obj, _ = self.api.call("PATCH", PODS + "/p",
                                     {"metadata": {"labels": {"a": "b"}},
                                      "spec": {"activeDeadlineSeconds": 5},
                                      "status": {"phase": "Failed"}},
                                     content_type=MERGE_PATCH)
        self.assertEqual((code, obj["status"]), (200, {"phase": "Running",
                                                       "qosClass": "BestEffort"}))

    def test_qos_classes(self):
        """Guaranteed, Burstable and BestEffort as upstream computes them."""
        def spec(*containers):
            return {"containers": [{"resources": r} for r in containers]}
        both = {"cpu": "1", "memory": "1Gi"}
        self.assertEqual(qos_class(spec({})), "BestEffort")
        self.assertEqual(qos_class(spec({"requests": {"cpu": "0"}})), "BestEffort")
        self.assertEqual(qos_class(spec({"requests": {"nvidia.com/gpu": "1"}})), "BestEffort")
        self.assertEqual(qos_class(spec({"requests": both, "limits": both})), "Guaranteed")
        self.assertEqual(qos_class(spec({"requests": {"cpu": "1000m", "memory": "1024Mi"},
                                         "limits": both})), "Guaranteed")
        self.assertEqual(qos_class(spec({"requests": both, "limits": both}, {})), "Burstable")
        self.assertEqual(qos_class(spec({"requests": {"cpu": "500m"}, "limits": both})),
                         "Burstable")
        self.assertEqual(qos_class(spec({"limits": {"cpu": "1"}})), "Burstable")

    def test_limits_only_pod_is_guaranteed(self):
        """Limits alone make a Guaranteed pod, since requests default to them first."""
        code, obj, _ = self.api.call("POST", PODS, pod(resources=resources(
            limits={"cpu": "1", "memory": "1Gi"})))
        self.assertEqual((code, obj["status"]["qosClass"]), (201, "Guaranteed"))


class PodValidationTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def causes(self, body, code=422):
        got, status, _ = self.api.call("POST", PODS, body)
        self.assertEqual(got, code, status)
        return [f"{c['field']}: {c['message']}" for c in status["details"]["causes"]]

    def test_spec_that_is_no_object_is_a_client_error(self):
        """A pod whose spec is a list or a string is refused (4xx), never a 500."""
        for spec in ([], "x", 5):
            code, status, _ = self.api.call("POST", PODS, {"metadata": {"name": "p"},
                                                          "spec": spec})
            self.assertIn(code, (400, 422), (spec, status))

    def test_invalid_quantity_is_a_decoding_error(self):
        """A request that is no quantity fails as upstream's decoding does: 400, its message."""
        for value in ("abc", "1.5.5", "", True, {"a": 1}, "1e"):
            code, status, _ = self.api.call("POST", PODS, pod(
                resources=resources(requests={"cpu": value})))
            self.assertEqual(code, 400, value)
            self.assertTrue(status["message"].startswith(
                'Pod in version "v1" cannot be handled as a Pod: '), status["message"])
        code, status, _ = self.api.call("POST", PODS, pod(
            resources=resources(requests={"cpu": "abc"})))
        self.assertEqual(status["message"],
                         'Pod in version "v1" cannot be handled as a Pod: ' + FORMAT_ERROR)

    def test_negative_quantity(self):
        """A negative request or limit is 422 with upstream's message."""
        self.assertEqual(self.causes(pod(resources=resources(requests={"cpu": "-1"}))),
                         ['spec.containers[0].resources.requests[cpu]: Invalid value: "-1": '
                          "must be greater than or equal to 0"])

    def test_request_above_limit(self):
        """A request above its limit is 422 naming the limit."""
        self.assertEqual(
            self.causes(pod(resources=resources(requests={"cpu": "2"}, limits={"cpu": "1"}))),
            ['spec.containers[0].resources.requests: Invalid value: "2": '
             "must be less than or equal to cpu limit of 1"])

    def test_resource_names(self):
        """Unknown plain resource names, and extended ones without equal limits, are refused."""
        self.assertEqual(self.causes(pod(resources=resources(requests={"foo": "1"}))), [
            'spec.containers[0].resources.requests[foo]: Invalid value: "foo": '
            "must be a standard resource type or fully qualified",
            'spec.containers[0].resources.requests[foo]: Invalid value: "foo": '
            "must be a standard resource for containers"])
        self.assertEqual(
            self.causes(pod(resources=resources(requests={"example.com/gpu": "1"}))),
            ["spec.containers[0].resources.limits: Required value: "
             "Limit must be set for non overcommitable resources"])
        self.assertEqual(
            self.causes(pod(resources=resources(requests={"example.com/gpu": "500m"},
                                                limits={"example.com/gpu": "500m"}))),
            ['spec.containers[0].resources.limits[example.com/gpu]: Invalid value: "500m": '
             "must be an integer",
             'spec.containers[0].resources.requests[example.com/gpu]: Invalid value: "500m": '
             "must be an integer"])

    def test_containers(self):
        """Containers are required, named once each as DNS labels, with an image."""
        self.assertEqual(self.causes({"metadata": {"name": "p"}}),
                         ["spec.containers: Required value"])
        body = pod()
        body["spec"]["containers"].append({"name": "c"})
        self.assertEqual(self.causes(body), ['spec.containers[1].name: Duplicate value: "c"',
                                             "spec.containers[1].image: Required value"])

    def test_policies(self):
        """Restart and DNS policies are refused outside upstream's values."""
        body = pod()
        body["spec"].update(restartPolicy="Sometimes", dnsPolicy="Mine")
        self.assertEqual(self.causes(body), [
            'spec.restartPolicy: Unsupported value: "Sometimes": supported values: '
            '"Always", "OnFailure", "Never"',
            'spec.dnsPolicy: Unsupported value: "Mine": supported values: '
            '"ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"'])

    def test_status_write_of_an_old_pod(self):
        """A pod stored before the spec rules keeps taking status writes."""
        self.api.call("POST", PODS, pod())
        key = self.api.catalog.resource("", "pods").info.key("default", "p")
        kv = result_of(self.api.store.get(key))
        old = orjson.loads(kv.value)
        old["spec"] = {}
        result_of(self.api.store.update(key, orjson.dumps(old), kv.mod_revision))
        code, obj, _ = self.api.call("PATCH", PODS + "/p/status",
                                     {"status": {"phase": "Running"}}, content_type=MERGE_PATCH)
        self.assertEqual((code, obj["status"]["phase"]), (200, "Running"), obj)


class PodTemplateTests(SynchronousTestCase):
    def test_template_defaults_and_checks(self):
        """A PodTemplate's template gets the pod spec defaults and checks."""
        api = APIHarness()
        code, obj, _ = api.call("POST", TEMPLATES, {
            "metadata": {"name": "t"},
            "template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}})
        self.assertEqual(code, 201, obj)
        spec = obj["template"]["spec"]
        self.assertEqual((spec["restartPolicy"], spec["containers"][0]["imagePullPolicy"]),
                         ("Always", "IfNotPresent"))
        code, status, _ = api.call("POST", TEMPLATES, {"metadata": {"name": "u"}})
        self.assertEqual((code, status["details"]["causes"][0]["field"]),
                         (422, "template.spec.containers"))
