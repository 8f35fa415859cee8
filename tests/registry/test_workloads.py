"""Deployments, ReplicaSets, StatefulSets, DaemonSets and ReplicationControllers:
upstream's defaults, the checks users meet, and the status fields always present."""

import orjson
from twisted.trial.unittest import SynchronousTestCase

from tests.support import APIHarness, _result

APPS = "/apis/apps/v1/namespaces/default/"
RCS = "/api/v1/namespaces/default/replicationcontrollers"
MERGE_PATCH = b"application/merge-patch+json"


def template(labels=None, **spec):
    spec.setdefault("containers", [{"name": "c", "image": "nginx"}])
    return {"metadata": {"labels": labels if labels is not None else {"app": "web"}},
            "spec": spec}


def workload(name="web", selector=None, labels=None, **spec):
    spec.setdefault("selector", selector if selector is not None
                    else {"matchLabels": {"app": "web"}})
    spec.setdefault("template", template(labels))
    return {"metadata": {"name": name}, "spec": spec}


class WorkloadTestCase(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def create(self, resource, body, code=201):
        got, obj, _ = self.api.call("POST", APPS + resource, body)
        self.assertEqual(got, code, obj)
        return obj

    def causes(self, resource, body):
        got, status, _ = self.api.call("POST", APPS + resource, body)
        self.assertEqual(got, 422, status)
        return [f"{c['field']}: {c['message']}" for c in status["details"]["causes"]]


class DefaultsTests(WorkloadTestCase):
    def test_deployment(self):
        """A Deployment gets replicas 1, RollingUpdate 25%/25%, 10 revisions and 600 s."""
        spec = self.create("deployments", workload())["spec"]
        self.assertEqual(
            {k: spec[k] for k in ("replicas", "strategy", "revisionHistoryLimit",
                                  "progressDeadlineSeconds")},
            {"replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
             "strategy": {"type": "RollingUpdate",
                          "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}})
        pod_spec = spec["template"]["spec"]
        self.assertEqual((pod_spec["restartPolicy"], pod_spec["dnsPolicy"],
                          pod_spec["containers"][0]["imagePullPolicy"]),
                         ("Always", "ClusterFirst", "Always"))

    def test_empty_strategy(self):
        """kubectl create deployment's `strategy: {}` becomes the rolling update default."""
        spec = self.create("deployments", workload(strategy={}))["spec"]
        self.assertEqual(spec["strategy"]["rollingUpdate"],
                         {"maxUnavailable": "25%", "maxSurge": "25%"})
        spec = self.create("deployments", workload(
            "half", strategy={"rollingUpdate": {"maxSurge": 2}}))["spec"]
        self.assertEqual(spec["strategy"], {"type": "RollingUpdate", "rollingUpdate": {
            "maxSurge": 2, "maxUnavailable": "25%"}})

    def test_recreate_has_no_rolling_update(self):
        """A Recreate Deployment gets no rollingUpdate."""
        spec = self.create("deployments", workload(strategy={"type": "Recreate"}))["spec"]
        self.assertEqual(spec["strategy"], {"type": "Recreate"})

    def test_defaults_on_patch(self):
        """Defaults hold after a patch that removes them, as upstream's decoding gives them."""
        self.create("deployments", workload())
        code, obj, _ = self.api.call("PATCH", APPS + "deployments/web",
                                     {"spec": {"revisionHistoryLimit": None, "strategy": None}},
                                     content_type=MERGE_PATCH)
        self.assertEqual((code, obj["spec"]["revisionHistoryLimit"]), (200, 10))
        self.assertEqual(obj["spec"]["strategy"]["type"], "RollingUpdate")
        self.assertEqual(obj["metadata"]["generation"], 1)

    def test_replica_set(self):
        """A ReplicaSet gets one replica and starts with status.replicas 0."""
        obj = self.create("replicasets", workload())
        self.assertEqual((obj["spec"]["replicas"], obj["status"]), (1, {"replicas": 0}))

    def test_stateful_set(self):
        """A StatefulSet gets OrderedReady, RollingUpdate partition 0 and Retain/Retain."""
        obj = self.create("statefulsets", workload(serviceName="web"))
        spec = obj["spec"]
        self.assertEqual(
            {k: spec[k] for k in ("podManagementPolicy", "updateStrategy", "replicas",
                                  "revisionHistoryLimit", "persistentVolumeClaimRetentionPolicy")},
            {"podManagementPolicy": "OrderedReady", "replicas": 1, "revisionHistoryLimit": 10,
             "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
             "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain",
                                                      "whenScaled": "Retain"}})
        self.assertEqual(obj["status"], {"replicas": 0, "availableReplicas": 0})

    def test_daemon_set(self):
        """A DaemonSet gets RollingUpdate with maxUnavailable 1 and maxSurge 0."""
        obj = self.create("daemonsets", workload())
        self.assertEqual(obj["spec"]["updateStrategy"], {
            "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        self.assertEqual(obj["spec"]["revisionHistoryLimit"], 10)
        self.assertEqual(obj["status"], {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                                         "desiredNumberScheduled": 0, "numberReady": 0})

    def test_replication_controller(self):
        """A ReplicationController's selector and labels default to its template's labels."""
        code, obj, _ = self.api.call("POST", RCS, {"metadata": {"name": "rc"}, "spec": {
            "template": template({"app": "web", "tier": "front"})}})
        self.assertEqual(code, 201, obj)
        self.assertEqual(obj["spec"]["selector"], {"app": "web", "tier": "front"})
        self.assertEqual(obj["metadata"]["labels"], {"app": "web", "tier": "front"})
        self.assertEqual((obj["spec"]["replicas"], obj["status"]), (1, {"replicas": 0}))

    def test_template_quantities(self):
        """A template's requests and limits are written in canonical form."""
        obj = self.create("deployments", workload(labels={"app": "web"}, template=template(
            containers=[{"name": "c", "image": "i",
                         "resources": {"requests": {"cpu": "0.25", "memory": "1024Mi"}}}])))
        self.assertEqual(obj["spec"]["template"]["spec"]["containers"][0]["resources"],
                         {"requests": {"cpu": "250m", "memory": "1Gi"}})
        code, status, _ = self.api.call("POST", APPS + "deployments", workload(
            "bad", template=template(containers=[{"name": "c", "image": "i", "resources": {
                "limits": {"cpu": "lots"}}}])))
        self.assertEqual(code, 400)
        self.assertTrue(status["message"].startswith(
            'Deployment in version "v1" cannot be handled as a Deployment: quantities must '
            'match the regular expression'))


class StatusFieldTests(WorkloadTestCase):
    def test_status_write_keeps_required_fields(self):
        """A status write that leaves out a field upstream always writes gets it at zero."""
        self.create("replicasets", workload())
        code, obj, _ = self.api.call("PUT", APPS + "replicasets/web/status", dict(
            workload(), status={"readyReplicas": 1}))
        self.assertEqual((code, obj["status"]), (200, {"readyReplicas": 1, "replicas": 0}))
        self.create("daemonsets", workload())
        code, obj, _ = self.api.call("PATCH", APPS + "daemonsets/web/status",
                                     {"status": None}, content_type=MERGE_PATCH)
        self.assertEqual(obj["status"]["desiredNumberScheduled"], 0)

    def test_deployment_status_starts_empty(self):
        """A Deployment's status starts empty, as upstream writes it, whatever was sent."""
        body = workload()
        body["status"] = {"replicas": 5}
        self.assertEqual(self.create("deployments", body)["status"], {})

    def test_autoscaler_and_budget(self):
        """HorizontalPodAutoscalers and PodDisruptionBudgets start with their required counts."""
        code, hpa, _ = self.api.call(
            "POST", "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
            {"metadata": {"name": "h"}, "spec": {"maxReplicas": 3, "scaleTargetRef": {
                "apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}})
        self.assertEqual((code, hpa["status"]), (201, {"desiredReplicas": 0}))
        code, pdb, _ = self.api.call(
            "POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
            {"metadata": {"name": "p"}, "spec": {"minAvailable": 1}})
        self.assertEqual((code, pdb["status"]), (201, {
            "disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
            "expectedPods": 0}))

    def test_ingress_and_volume_attachment(self):
        """Ingresses start with status.loadBalancer, VolumeAttachments with attached false."""
        code, ingress, _ = self.api.call(
            "POST", "/apis/networking.orch.io/v1/namespaces/default/ingresses",
            {"metadata": {"name": "i"}, "spec": {"defaultBackend": {"service": {
                "name": "web", "port": {"number": 80}}}}})
        self.assertEqual((code, ingress["status"]), (201, {"loadBalancer": {}}))
        code, attachment, _ = self.api.call(
            "POST", "/apis/storage.orch.io/v1/volumeattachments",
            {"metadata": {"name": "a"}, "spec": {"attacher": "x", "nodeName": "n",
                                                 "source": {"persistentVolumeName": "pv"}}})
        self.assertEqual((code, attachment["status"]), (201, {"attached": False}))
        code, attachment, _ = self.api.call(
            "PATCH", "/apis/storage.orch.io/v1/volumeattachments/a/status",
            {"status": {"attachmentMetadata": {"k": "v"}, "attached": None}},
            content_type=MERGE_PATCH)
        self.assertEqual(attachment["status"], {"attachmentMetadata": {"k": "v"},
                                                "attached": False})


class ValidationTests(WorkloadTestCase):
    def test_selector_must_match_template(self):
        """A selector that does not pick the template's labels is refused with upstream's text."""
        self.assertEqual(self.causes("deployments", workload(labels={"app": "other"})), [
            'spec.template.metadata.labels: Invalid value: {"app":"other"}: '
            "`selector` does not match template `labels`"])
        self.assertEqual(self.causes("replicasets", workload(labels={})), [
            "spec.template.metadata.labels: Invalid value: {}: "
            "`selector` does not match template `labels`"])

    def test_negative_replicas(self):
        """Replicas below zero are refused."""
        self.assertEqual(self.causes("deployments", workload(replicas=-1)),
                         ["spec.replicas: Invalid value: -1: must be greater than or equal to 0"])
        code, status, _ = self.api.call("POST", RCS, {"metadata": {"name": "rc"}, "spec": {
            "replicas": -3, "template": template()}})
        self.assertEqual(status["details"]["causes"][0]["field"], "spec.replicas")

    def test_selector_required_and_not_empty(self):
        """A missing selector is required; an empty one is invalid for the kind."""
        body = workload()
        del body["spec"]["selector"]
        self.assertEqual(self.causes("deployments", body), ["spec.selector: Required value"])
        self.assertEqual(self.causes("deployments", workload(selector={})),
                         ["spec.selector: Invalid value: {}: "
                          "empty selector is invalid for deployment"])
        self.assertEqual(self.causes("daemonsets", workload(selector={"matchExpressions": [
            {"key": "app", "operator": "Near"}]})), [
            'spec.selector.matchExpressions[0].operator: Invalid value: "Near": '
            "not a valid selector operator"])

    def test_selector_is_immutable(self):
        """A Deployment's, ReplicaSet's or DaemonSet's selector cannot change."""
        for resource in ("deployments", "replicasets", "daemonsets"):
            self.create(resource, workload())
            body = {"spec": {"selector": {"matchLabels": {"app": "web", "x": "y"}},
                             "template": {"metadata": {"labels": {"x": "y"}}}}}
            code, status, _ = self.api.call("PATCH", APPS + resource + "/web", body,
                                            content_type=MERGE_PATCH)
            self.assertEqual(code, 422, resource)
            self.assertIn("spec.selector: Invalid value: ", status["message"])
            self.assertIn("field is immutable", status["message"])

    def test_replication_controller_selector_may_change(self):
        """A ReplicationController's selector may change, as upstream allows."""
        self.api.call("POST", RCS, {"metadata": {"name": "rc"},
                                    "spec": {"template": template()}})
        code, obj, _ = self.api.call("PATCH", RCS + "/rc", {"spec": {
            "selector": {"app": "web", "v": "2"},
            "template": {"metadata": {"labels": {"v": "2"}}}}}, content_type=MERGE_PATCH)
        self.assertEqual((code, obj["spec"]["selector"]), (200, {"app": "web", "v": "2"}))

    def test_restart_policy_always(self):
        """Replicated pods must restart Always, and have no active deadline."""
        self.assertEqual(self.causes("replicasets", workload(template=template(
            restartPolicy="OnFailure", activeDeadlineSeconds=5))), [
            'spec.template.spec.restartPolicy: Unsupported value: "OnFailure": '
            'supported values: "Always"',
            "spec.template.spec.activeDeadlineSeconds: Invalid value: 5: "
            "activeDeadlineSeconds in ReplicaSet is not Supported"])

    def test_template_pod_spec(self):
        """The template's pod spec gets the pod checks (containers are required)."""
        self.assertEqual(self.causes("deployments", workload(template=template(containers=[]))),
                         ["spec.template.spec.containers: Required value"])

    def test_rolling_update_bounds(self):
        """maxSurge and maxUnavailable may not both be 0; percents are checked."""
        self.assertEqual(self.causes("deployments", workload(strategy={
            "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}})),
            ['spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "0%": '
             "may not be 0 when `maxSurge` is 0"])
        self.assertEqual(self.causes("deployments", workload(strategy={
            "rollingUpdate": {"maxSurge": "half", "maxUnavailable": "120%"}})), [
            'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "120%": '
            "must not be greater than 100%",
            'spec.strategy.rollingUpdate.maxSurge: Invalid value: "half": a valid percent '
            "string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', "
            "regex used for validation is '[0-9]+%')"])
        self.assertEqual(self.causes("deployments", workload(strategy={
            "type": "Recreate", "rollingUpdate": {"maxSurge": 1}})), [
            "spec.strategy.rollingUpdate: Forbidden: "
            "may not be specified when strategy `type` is 'Recreate'"])

    def test_progress_deadline_above_min_ready(self):
        """progressDeadlineSeconds must exceed minReadySeconds."""
        self.assertEqual(self.causes("deployments", workload(minReadySeconds=30,
                                                             progressDeadlineSeconds=30)),
                         ["spec.progressDeadlineSeconds: Invalid value: 30: "
                          "must be greater than minReadySeconds"])

    def test_daemon_set_rolling_update(self):
        """A DaemonSet's rolling update has exactly one of maxUnavailable and maxSurge set."""
        self.assertEqual(self.causes("daemonsets", workload(updateStrategy={
            "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}})),
            ["spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: "
             "may not be set when maxUnavailable is non-zero"])
        self.assertEqual(self.causes("daemonsets", workload(updateStrategy={
            "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}})),
            ["spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: "
             "cannot be 0 when maxSurge is 0"])

    def test_stateful_set_updates(self):
        """Only some fields of a StatefulSet's spec may change, as upstream."""
        self.create("statefulsets", workload(serviceName="web"))
        code, obj, _ = self.api.call("PATCH", APPS + "statefulsets/web",
                                     {"spec": {"replicas": 3}}, content_type=MERGE_PATCH)
        self.assertEqual((code, obj["spec"]["replicas"]), (200, 3))
        code, status, _ = self.api.call("PATCH", APPS + "statefulsets/web",
                                        {"spec": {"serviceName": "other"}},
                                        content_type=MERGE_PATCH)
        self.assertEqual(code, 422)
        self.assertEqual(status["details"]["causes"][0]["message"],
                         "Forbidden: updates to statefulset spec for fields other than "
                         "'replicas', 'ordinals', 'template', 'updateStrategy', "
                         "'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and "
                         "'minReadySeconds' are forbidden")
        self.assertEqual(self.causes("statefulsets", workload("s2", podManagementPolicy="Fast")),
                         ['spec.podManagementPolicy: Unsupported value: "Fast": '
                          'supported values: "OrderedReady", "Parallel"'])


class StatusWriteTests(WorkloadTestCase):
    def test_status_write_of_an_old_object(self):
        """A status write to a workload stored before the spec rules is not refused for them."""
        self.create("replicasets", workload())
        key = self.api.catalog.resource("apps", "replicasets").info.key("default", "web")
        kv = _result(self.api.store.get(key))
        old = orjson.loads(kv.value)
        old["spec"] = {"replicas": 1}
        _result(self.api.store.update(key, orjson.dumps(old), kv.mod_revision))
        code, obj, _ = self.api.call("PATCH", APPS + "replicasets/web/status",
                                     {"status": {"replicas": 1}}, content_type=MERGE_PATCH)
        self.assertEqual((code, obj["status"]), (200, {"replicas": 1}), obj)
        code, _, _ = self.api.call("PATCH", APPS + "replicasets/web",
                                   {"spec": {"minReadySeconds": 5}}, content_type=MERGE_PATCH)
        self.assertEqual(code, 422)
