"""The HorizontalPodAutoscaler controller: scale targets from pods' usage, as upstream's."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from orchd.api.meta import rfc3339
from orchd.controllers import hpacalc as calc
from orchd.controllers.hpa import (
    CatalogPodMetrics, HorizontalPodAutoscalerController, IPodMetrics, milli_quantity,
)
from orchd.registry.resourcemetrics import MetricsCache, point, resource_metrics_providers
from tests.controllers.test_statefulset import stateful_set
from tests.crdfixtures import CRDS, WIDGETS, widget, widget_crd
from tests.controllers.workloadsupport import PODS, WorkloadHarness, deployment, replica_set
from tests.support import APIHarness

HPAS = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
HPAS_V1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"
RSS = "/apis/apps/v1/namespaces/default/replicasets"


@implementer(IPodMetrics)
class FakeMetrics:
    """Usage set by the test: C{cpu} in millicores per pod, for every pod of a selector."""

    def __init__(self, clock):
        self.clock = clock
        self.cpu = {}
        self.error = None
        self.containers = []

    async def pod_metrics(self, namespace, selector, resource, container=None):
        self.containers.append(container)
        if self.error is not None:
            raise calc.MetricError(self.error)
        return {name: calc.PodMetric(value, self.clock.seconds(), 15)
                for name, value in self.cpu.items()}


def hpa(name="web", minimum=1, maximum=10, target=50, behavior=None, kind="ReplicaSet",
        metrics=None):
    spec = {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": kind, "name": "web"},
            "minReplicas": minimum, "maxReplicas": maximum,
            "metrics": metrics or [{"type": "Resource", "resource": {
                "name": "cpu", "target": {"type": "Utilization",
                                          "averageUtilization": target}}}]}
    if behavior is not None:
        spec["behavior"] = behavior
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name}, "spec": spec}


class HPATests(SynchronousTestCase):
    def setUp(self):
        self.h = WorkloadHarness(self)
        self.clock = self.h.clock
        self.clock.advance(1_700_000_000)
        self.metrics = FakeMetrics(self.clock)
        self.h.call("POST", RSS, replica_set(replicas=2), 201)
        self.pods(2)

    def pods(self, count):
        """C{count} running, ready pods of the ReplicaSet, each requesting one CPU."""
        for index in range(count):
            name = f"web-{index}"
            if self.h.get(f"{PODS}/{name}") is None:
                self.h.call("POST", PODS, {"metadata": {"name": name, "labels": {"app": "web"}},
                                           "spec": {"containers": [{
                                               "name": "c", "image": "nginx",
                                               "resources": {"requests": {"cpu": "1"}}}]}}, 201)
                self.h.set_pod_status(name, since=self.clock.seconds() - 600,
                                      startTime=rfc3339(self.clock.seconds() - 610))
            self.metrics.cpu.setdefault(name, 500)

    def start(self):
        controller = HorizontalPodAutoscalerController(self.h.api.catalog, self.clock,
                                                       metrics=self.metrics)
        return self.h.start(controller)

    def replicas(self):
        return self.h.get(f"{RSS}/web")["spec"]["replicas"]

    def status(self, name="web"):
        return self.h.get(f"{HPAS}/{name}")["status"]

    def conditions(self, name="web"):
        return {c["type"]: (c["status"], c["reason"]) for c in self.status(name)["conditions"]}

    def test_scales_up_and_reports(self):
        """Usage over the target scales the target up, with status, conditions and an event."""
        self.metrics.cpu = {"web-0": 900, "web-1": 900}
        self.h.call("POST", HPAS, hpa(), 201)
        self.start()
        self.assertEqual(self.replicas(), 4)
        status = self.status()
        self.assertEqual((status["currentReplicas"], status["desiredReplicas"]), (2, 4))
        self.assertEqual(status["currentMetrics"], [{"type": "Resource", "resource": {
            "name": "cpu", "current": {"averageUtilization": 90, "averageValue": "900m"}}}])
        self.assertEqual(status["lastScaleTime"], rfc3339(self.clock.seconds()))
        self.assertEqual(status["observedGeneration"], 1)
        self.assertEqual(self.conditions(), {
            "AbleToScale": ("True", "SucceededRescale"),
            "ScalingActive": ("True", "ValidMetricFound"),
            "ScalingLimited": ("False", "DesiredWithinRange")})
        self.assertIn(("SuccessfulRescale",
                       "New size: 4; reason: cpu resource utilization (percentage of request) "
                       "above target"), self.h.events("HorizontalPodAutoscaler"))

    def test_v1_autoscaler_scales(self):
        """An HPA created in autoscaling/v1 scales its target; v1 reads show the controller's status."""
        self.metrics.cpu = {"web-0": 900, "web-1": 900}
        self.h.call("POST", HPAS_V1, {
            "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                        "name": "web"},
                     "minReplicas": 1, "maxReplicas": 10,
                     "targetCPUUtilizationPercentage": 50}}, 201)
        self.start()
        self.assertEqual(self.replicas(), 4)
        v1 = self.h.get(f"{HPAS_V1}/web")
        self.assertEqual(v1["status"]["currentCPUUtilizationPercentage"], 90)
        self.assertEqual(v1["status"]["desiredReplicas"], 4)
        self.assertIn("autoscaling.alpha.kubernetes.io/conditions", v1["metadata"]["annotations"])

    def test_within_tolerance_and_resync(self):
        """Usage near the target keeps the count; the next sync 15 s later sees new usage."""
        self.metrics.cpu = {"web-0": 520, "web-1": 520}
        self.h.call("POST", HPAS, hpa(), 201)
        self.start()
        self.assertEqual(self.replicas(), 2)
        self.assertEqual(self.conditions()["AbleToScale"], ("True", "ReadyForNewScale"))
        self.metrics.cpu = {"web-0": 1000, "web-1": 1000}
        self.clock.advance(14)
        self.assertEqual(self.replicas(), 2)
        self.clock.advance(1)
        self.assertEqual(self.replicas(), 4)

    def test_scale_down_stabilized_for_five_minutes(self):
        """Without behavior a lower recommendation waits 5 minutes."""
        self.metrics.cpu = {"web-0": 100, "web-1": 100}
        self.h.call("POST", HPAS, hpa(), 201)
        self.start()
        self.assertEqual(self.replicas(), 2)
        self.assertEqual(self.conditions()["AbleToScale"], ("True", "ScaleDownStabilized"))
        for _ in range(20):
            self.clock.advance(15)
        self.assertEqual(self.replicas(), 1)
        self.assertIn(("SuccessfulRescale", "New size: 1; reason: All metrics below target"),
                      self.h.events("HorizontalPodAutoscaler"))

    def test_behavior_rate_limit(self):
        """A Pods policy of 1 per minute adds one replica a minute, ScalingLimited meanwhile."""
        behavior = {"scaleUp": {"policies": [{"type": "Pods", "value": 1,
                                              "periodSeconds": 60}]}}
        self.metrics.cpu = {"web-0": 2000, "web-1": 2000}
        self.h.call("POST", HPAS, hpa(behavior=behavior), 201)
        self.start()
        self.assertEqual(self.replicas(), 3)
        self.assertEqual(self.conditions()["ScalingLimited"], ("True", "ScaleUpLimit"))
        self.clock.advance(45)
        self.assertEqual(self.replicas(), 3)
        self.clock.advance(30)
        self.assertEqual(self.replicas(), 4)

    def test_bounds(self):
        """Replicas outside min and max go to the bound, whatever the metrics."""
        self.metrics.error = "no metrics"
        self.h.call("POST", HPAS, hpa(minimum=3), 201)
        self.start()
        self.assertEqual(self.replicas(), 3)
        self.assertIn(("SuccessfulRescale",
                       "New size: 3; reason: Current number of replicas below Spec.MinReplicas"),
                      self.h.events("HorizontalPodAutoscaler"))

    def test_max_replicas_limits(self):
        """A proposal above maxReplicas stops there, ScalingLimited TooManyReplicas."""
        self.metrics.cpu = {"web-0": 5000, "web-1": 5000}
        self.h.call("POST", HPAS, hpa(maximum=3), 201)
        self.start()
        self.assertEqual(self.replicas(), 3)
        self.assertEqual(self.conditions()["ScalingLimited"], ("True", "TooManyReplicas"))

    def test_metrics_unavailable(self):
        """No metrics: ScalingActive False FailedGetResourceMetric, nothing scaled."""
        self.metrics.error = "no metrics returned from resource metrics API"
        self.h.call("POST", HPAS, hpa(), 201)
        self.start()
        self.assertEqual(self.replicas(), 2)
        self.assertEqual(self.conditions()["ScalingActive"],
                         ("False", "FailedGetResourceMetric"))
        status = self.status()
        self.assertEqual((status["currentReplicas"], status["currentMetrics"]),
                         (2, [{"type": ""}]))
        reasons = [reason for reason, _ in self.h.events("HorizontalPodAutoscaler")]
        self.assertIn("FailedGetResourceMetric", reasons)
        self.assertIn("FailedComputeMetricsReplicas", reasons)

    def test_missing_request(self):
        """Utilization of pods without requests is an error naming the container."""
        self.h.call("POST", PODS, {"metadata": {"name": "bare", "labels": {"app": "web"}},
                                   "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
                    201)
        self.h.call("POST", HPAS, hpa(), 201)
        self.start()
        condition = [c for c in self.status()["conditions"] if c["type"] == "ScalingActive"][0]
        self.assertEqual(condition["message"], "the HPA was unable to compute the replica count: "
                         "missing request for cpu in container c of Pod bare")

    def test_unknown_target(self):
        """A target kind that is not served: AbleToScale False FailedGetScale."""
        self.h.call("POST", HPAS, hpa(kind="Nothing"), 201)
        self.start()
        self.assertEqual(self.conditions(), {"AbleToScale": ("False", "FailedGetScale")})
        self.h.call("POST", HPAS, dict(hpa(name="other"), spec=dict(
            hpa()["spec"], scaleTargetRef={"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                           "name": "missing"})), 201)
        self.clock.advance(0)
        self.assertEqual(self.conditions("other")["AbleToScale"], ("False", "FailedGetScale"))

    def test_zero_replicas_disable(self):
        """A target at 0 replicas is not autoscaled (ScalingDisabled)."""
        self.h.patch(f"{RSS}/web", {"spec": {"replicas": 0}})
        self.h.call("POST", HPAS, hpa(), 201)
        self.start()
        self.assertEqual(self.replicas(), 0)
        self.assertEqual(self.conditions()["ScalingActive"], ("False", "ScalingDisabled"))

    def test_average_value_memory(self):
        """An AverageValue target on memory, with its current average in the status."""
        self.metrics.cpu = {"web-0": 300 * 2**20 * 1000, "web-1": 300 * 2**20 * 1000}
        metrics = [{"type": "Resource", "resource": {
            "name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}}]
        self.h.call("POST", HPAS, hpa(metrics=metrics), 201)
        self.start()
        self.assertEqual(self.replicas(), 4)         # ceil(3 * 2) = 6, at most doubled
        self.assertEqual(self.status()["currentMetrics"][0]["resource"]["current"],
                         {"averageValue": "314572800"})

    def test_deleted_autoscaler_forgotten(self):
        """A deleted autoscaler stops being synced."""
        self.h.call("POST", HPAS, hpa(), 201)
        controller = self.start()
        self.h.call("DELETE", f"{HPAS}/web", code=200)
        self.clock.advance(15)
        self.assertEqual(controller._memory, {})

    def test_statefulsets_and_deployments(self):
        """StatefulSets and Deployments are scaled through their scale subresource too."""
        self.metrics.cpu = {"web-0": 900, "web-1": 900}
        apps = "/apis/apps/v1/namespaces/default"
        self.h.call("POST", f"{apps}/statefulsets", stateful_set(replicas=2), 201)
        self.h.call("POST", f"{apps}/deployments", deployment(replicas=2), 201)
        self.h.call("POST", HPAS, hpa(name="sts", kind="StatefulSet"), 201)
        self.h.call("POST", HPAS, hpa(name="deploy", kind="Deployment"), 201)
        self.start()
        self.assertEqual(self.h.get(f"{apps}/statefulsets/web")["spec"]["replicas"], 4)
        self.assertEqual(self.h.get(f"{apps}/deployments/web")["spec"]["replicas"], 4)
        self.assertEqual(self.status("sts")["desiredReplicas"], 4)

    def test_container_resource(self):
        """A ContainerResource metric reads one container, against that container's request."""
        self.metrics.cpu = {"web-0": 900, "web-1": 900}
        metrics = [{"type": "ContainerResource", "containerResource": {
            "name": "cpu", "container": "c",
            "target": {"type": "Utilization", "averageUtilization": 50}}}]
        self.h.call("POST", HPAS, hpa(metrics=metrics), 201)
        self.start()
        self.assertEqual(self.replicas(), 4)
        self.assertEqual(self.metrics.containers, ["c"])
        self.assertEqual(self.status()["currentMetrics"], [{
            "type": "ContainerResource", "containerResource": {
                "name": "cpu", "container": "c",
                "current": {"averageUtilization": 90, "averageValue": "900m"}}}])
        self.assertIn("cpu container resource utilization (percentage of request) above target",
                      self.h.events("HorizontalPodAutoscaler")[-1][1])

    def test_custom_resource_with_scale(self):
        """A custom resource whose definition has a scale subresource is scaled like the rest."""
        self.metrics.cpu = {"web-0": 900, "web-1": 900}
        self.h.call("POST", CRDS, widget_crd(), 201)
        self.h.call("POST", WIDGETS, widget("web", replicas=2, selector="app=web"), 201)
        self.h.call("POST", HPAS, dict(hpa(), spec=dict(hpa()["spec"], scaleTargetRef={
            "apiVersion": "example.com/v1", "kind": "Widget", "name": "web"})), 201)
        self.start()
        self.assertEqual(self.h.get(f"{WIDGETS}/web")["spec"]["replicas"], 4)

    def test_milli_quantity(self):
        """Milli-units print as upstream's DecimalSI quantities."""
        self.assertEqual([milli_quantity(v) for v in (900, 1000, 1500, 64_000)],
                         ["900m", "1", "1500m", "64"])


class CatalogMetricsTests(SynchronousTestCase):
    """The served PodMetrics as the autoscaler reads them."""

    def test_reads_served_pod_metrics(self):
        """Each pod's containers are summed, in milli-units, with the metrics' time and window."""
        cache = MetricsCache()
        api = APIHarness(virtual=resource_metrics_providers(cache, lambda: api.catalog,
                                                            Clock()))
        api.call("POST", "/api/v1/namespaces/default/pods", {
            "metadata": {"name": "web-0", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "x"}]}})
        t0 = 1_700_000_000
        cache.store("n1", None, {("default", "web-0"): {
            "a": point(1.0, 1024, t0, t0 - 10), "b": point(2.0, 1024, t0, t0 - 10)}})
        source = CatalogPodMetrics(api.catalog)
        verifyObject(IPodMetrics, source)
        result = api.run(source.pod_metrics("default", "app=web", "cpu"))
        metric = result["web-0"]
        self.assertEqual((metric.value, metric.timestamp, metric.window), (300, t0, 10.0))
        with self.assertRaises(calc.MetricError):
            api.run(source.pod_metrics("default", "app=none", "cpu"))
        only = api.run(source.pod_metrics("default", "app=web", "cpu", "b"))
        self.assertEqual(only["web-0"].value, 200)
        with self.assertRaises(calc.MetricError) as e:
            api.run(source.pod_metrics("default", "app=web", "cpu", "sidecar"))
        self.assertEqual(str(e.exception),
                         "container sidecar not present in metrics for pod default/web-0")


class EnvironmentTests(SynchronousTestCase):
    """The controller as the manager builds it."""

    def test_sync_period_flag(self):
        """--horizontal-pod-autoscaler-sync-period sets how often each autoscaler is synced."""
        from orchd.controllers.manager import ControllerEnvironment
        from tests.app.test_config import parse
        api = APIHarness()
        config = parse("--horizontal-pod-autoscaler-sync-period", "30s")
        controller = HorizontalPodAutoscalerController.from_environment(
            ControllerEnvironment(api.catalog, api.clock, config=config))
        self.assertEqual(controller._sync_period, 30.0)
