# -*- test-case-name: tests.controllers.test_hpa -*-
"""
The HorizontalPodAutoscaler controller (upstream's
C{pkg/controller/podautoscaler/horizontal.go}), for C{autoscaling/v2}
autoscalers with resource metrics (CPU and memory, C{Utilization} of the
pods' requests or C{AverageValue}; of whole pods, C{Resource}, or of one
container of each, C{ContainerResource}).

Every L{SYNC_PERIOD} seconds each autoscaler is reconciled: its target's
C{scale} subresource is read (Deployments, ReplicaSets, StatefulSets,
ReplicationControllers, and any kind served with one), the pods its
selector picks are taken from an informer and their usage from the
resource metrics API (L{IPodMetrics}), each metric proposes a replica
count (L{orchd.controllers.hpacalc}), the highest wins, is stabilized and
limited by C{minReplicas}, C{maxReplicas} and C{behavior}, and written to
the target's scale when it differs (a C{SuccessfulRescale} event). The
status follows upstream's: C{currentReplicas}, C{desiredReplicas},
C{currentMetrics}, C{lastScaleTime}, C{observedGeneration} and the
conditions C{AbleToScale}, C{ScalingActive} and C{ScalingLimited} with
upstream's reasons and messages.

What upstream keeps in memory between syncs (recent recommendations and
scale events, for stabilization and rate limits) is kept here the same way,
per autoscaler, and forgotten when it is deleted. Pods, object and
external metrics are not served here: such a metric is invalid (as when
upstream's adapters are missing).
"""

import copy
import re
from fractions import Fraction

from zope.interface import Interface, implementer

from orchd.api.errors import StatusError
from orchd.api.groups import canonical_group
from orchd.api.kinds import METRICS
from orchd.api.meta import rfc3339
from orchd.api.quantity import DECIMAL_SI, Quantity
from orchd.api.selectors import parse_label_selector
from orchd.controllers import hpacalc as calc
from orchd.controllers.base import CacheSyncedController, write_status
from orchd.controllers.events import NORMAL, WARNING, EventRecorder
from orchd.controllers.podstate import parse_time, ready_condition
from orchd.registry.context import RequestContext
from orchd.registry.kinds.autoscaler import DEFAULT_METRICS
from orchd.registry.options import ListOptions
from orchd.storage.interfaces import DELETED

COMPONENT = "horizontal-pod-autoscaler"
#: Seconds between two reconciliations of an autoscaler
#: (upstream's C{--horizontal-pod-autoscaler-sync-period}).
SYNC_PERIOD = 15.0

_REASONS = {"Pods": "FailedGetPodsMetric", "Object": "FailedGetObjectMetric",
             "External": "FailedGetExternalMetric",
             "ContainerResource": "FailedGetContainerResourceMetric"}


class IPodMetrics(Interface):
    """Where the autoscaler reads pods' usage from."""

    def pod_metrics(namespace, selector, resource, container=None):
        """
        @param selector: the label selector text of the target's scale.
        @param container: the one container to read (a C{ContainerResource}
            metric), or None for the sum of every container's.
        @return: (awaitable) C{{pod name: PodMetric}}, usage in milli-units.
        @raise orchd.controllers.hpacalc.MetricError: when there are none to be had.
        """


_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?\Z")


def _window(text):
    match = _DURATION.match(text or "")
    if not text or match is None:
        return 0.0
    hours, minutes, seconds, millis = match.groups()
    return (int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds or 0)
            + int(millis or 0) / 1000)


@implementer(IPodMetrics)
class CatalogPodMetrics:
    """PodMetrics as the API serves them (C{metrics.orch.io}), read in-process."""

    def __init__(self, catalog):
        self._catalog = catalog

    async def pod_metrics(self, namespace, selector, resource, container=None):
        provider = self._catalog.resource(METRICS, "pods")
        if provider is None:
            raise calc.MetricError("the resource metrics API is not served")
        listed = await provider.list(self._catalog.system_context(namespace),
                                     ListOptions(label_selector=parse_label_selector(selector)))
        metrics = {}
        for item in listed.get("items") or ():
            total, found = 0, container is None
            for entry in item.get("containers") or ():
                if container is not None and entry.get("name") != container:
                    continue
                found = True
                value = (entry.get("usage") or {}).get(resource)
                if value is not None:
                    total += calc.milli(value)
            if not found:
                raise calc.MetricError(f"container {container} not present in metrics for pod "
                                       f"{namespace}/{item['metadata']['name']}")
            metrics[item["metadata"]["name"]] = calc.PodMetric(
                total, parse_time(item.get("timestamp")) or 0.0, _window(item.get("window")))
        if not metrics:
            raise calc.MetricError("no metrics returned from resource metrics API")
        return metrics


def keep_pod(pod):
    """A pod trimmed to what the autoscaler reads: labels, phase, readiness, requests."""
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    kept = {"metadata": {"name": meta["name"], "namespace": meta.get("namespace", ""),
                         "labels": meta.get("labels") or {}},
            "spec": {"containers": [
                {"name": c.get("name", ""),
                 "resources": {"requests": ((c.get("resources") or {}).get("requests") or {})}}
                for c in spec.get("containers") or () if isinstance(c, dict)]},
            "status": {"phase": status.get("phase"), "startTime": status.get("startTime")}}
    if meta.get("deletionTimestamp"):
        kept["metadata"]["deletionTimestamp"] = meta["deletionTimestamp"]
    condition = ready_condition(pod)
    if condition is not None:
        kept["status"]["conditions"] = [{key: condition.get(key) for key in
                                         ("type", "status", "lastTransitionTime")}]
    return kept


def milli_quantity(value):
    """Upstream's C{NewMilliQuantity(value, DecimalSI)} as text."""
    return str(Quantity(Fraction(value, 1000), DECIMAL_SI))


def set_condition(conditions, type, status, reason, message, now):
    """Set one condition, its transition time moving only when its status changes."""
    for condition in conditions:
        if condition.get("type") == type:
            if condition.get("status") != status:
                condition["lastTransitionTime"] = rfc3339(now)
            condition.update(status=status, reason=reason, message=message)
            return
    conditions.append({"type": type, "status": status, "lastTransitionTime": rfc3339(now),
                       "reason": reason, "message": message})


class _Failed(Exception):
    """A reconciliation step failed; the status and event are already set."""


class HorizontalPodAutoscalerController(CacheSyncedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    @param metrics: the L{IPodMetrics}; the served metrics API by default.
    """

    name = "horizontalpodautoscaling"

    def __init__(self, catalog, clock, metrics=None, recorder=None, sync_period=SYNC_PERIOD):
        super().__init__(catalog, clock)
        self._provider = catalog.resource("autoscaling", "horizontalpodautoscalers")
        self._prefix = self._provider.info.key_prefix()
        self._pods_prefix = catalog.resource("", "pods").info.key_prefix()
        self._metrics = metrics or CatalogPodMetrics(catalog)
        self._recorder = recorder or EventRecorder(catalog, clock, COMPONENT)
        self._sync_period = sync_period
        self._memory = {}
        self._autoscalers = self.follow("autoscaling", "horizontalpodautoscalers",
                                        self._changed)
        self._pods = self.follow("", "pods", lambda *_: None, keep=keep_pod)

    @classmethod
    def from_environment(cls, env):
        period = getattr(env.config, "horizontal_pod_autoscaler_sync_period", None)
        return cls(env.catalog, env.clock, sync_period=period or SYNC_PERIOD)

    def _changed(self, type, obj, old):
        meta = obj["metadata"]
        key = f"{meta.get('namespace', '')}/{meta['name']}"
        if type == DELETED:
            self._memory.pop(key, None)
        elif old is None or (old.get("metadata") or {}).get("generation") != meta.get(
                "generation"):
            self.enqueue(key)

    def _context(self, namespace):
        return RequestContext(self._catalog.system_context().user, namespace,
                              field_manager=COMPONENT)

    async def _sync(self, key):
        hpa = self._autoscalers.cache.get(self._prefix + key)
        if hpa is None:
            self._memory.pop(key, None)
            return
        try:
            await self.reconcile(key, copy.deepcopy(hpa))
        finally:
            if self._prefix + key in self._autoscalers.cache:
                self.enqueue(key, after=self._sync_period)

    # -- one reconciliation ------------------------------------------------------------

    async def reconcile(self, key, hpa):
        """Upstream's C{reconcileAutoscaler} for one autoscaler (a copy, changed here)."""
        now = self._clock.seconds()
        meta, spec = hpa["metadata"], hpa.get("spec") or {}
        original = copy.deepcopy(hpa.get("status") or {})
        status = hpa["status"] = copy.deepcopy(original)
        status["observedGeneration"] = meta.get("generation", 1)
        conditions = status.setdefault("conditions", [])
        memory = self._memory.setdefault(key, calc.Recommendations())
        try:
            connector, scale = await self._scale(hpa, now)
        except _Failed:
            await self._write_status(hpa, original)
            return
        set_condition(conditions, "AbleToScale", "True", "SucceededGetScale",
                      "the HPA controller was able to get the target's current scale", now)
        current = (scale.get("spec") or {}).get("replicas") or 0
        memory.record_initial(current, now)
        minimum = spec.get("minReplicas")
        minimum = 1 if minimum is None else minimum
        maximum = spec.get("maxReplicas") or 0
        statuses = []
        rescale, reason, desired = False, "", current
        if current == 0 and minimum != 0:
            set_condition(conditions, "ScalingActive", "False", "ScalingDisabled",
                          "scaling is disabled since the replica count of the target is zero",
                          now)
        elif current > maximum:
            reason, desired, rescale = "Current number of replicas above Spec.MaxReplicas", \
                maximum, True
        elif current < minimum:
            reason, desired, rescale = "Current number of replicas below Spec.MinReplicas", \
                minimum, True
        else:
            try:
                proposal, metric_name, statuses = await self._replicas_for_metrics(
                    hpa, scale, current, now)
            except _Failed as failed:
                status.update(currentReplicas=current, desiredReplicas=status.get(
                    "desiredReplicas", 0), currentMetrics=failed.args[0] or None)
                if status["currentMetrics"] is None:
                    del status["currentMetrics"]
                await self._write_status(hpa, original)
                self._recorder.record(hpa, WARNING, "FailedComputeMetricsReplicas",
                                      failed.args[1])
                return
            desired = proposal
            if desired > current:
                reason = f"{metric_name} above target"
            elif desired < current:
                reason = "All metrics below target"
            desired = self._normalize(hpa, memory, current, desired, minimum, maximum, now)
            rescale = desired != current
        if rescale:
            try:
                await connector.update(self._context(meta.get("namespace", "")),
                                       scale["metadata"]["name"],
                                       dict(scale, spec={"replicas": desired}))
            except StatusError as e:
                self._recorder.record(hpa, WARNING, "FailedRescale",
                                      f"New size: {desired}; reason: {reason}; "
                                      f"error: {e.message}")
                set_condition(conditions, "AbleToScale", "False", "FailedUpdateScale",
                              "the HPA controller was unable to update the target scale: "
                              f"{e.message}", now)
                status.update(currentReplicas=current)
                self._set_metrics(status, statuses)
                await self._write_status(hpa, original)
                raise
            set_condition(conditions, "AbleToScale", "True", "SucceededRescale",
                          f"the HPA controller was able to update the target scale to {desired}",
                          now)
            self._recorder.record(hpa, NORMAL, "SuccessfulRescale",
                                  f"New size: {desired}; reason: {reason}")
            memory.record_change(current, desired, now,
                                 calc.longest_period(spec.get("behavior")))
            self.log.info("Rescaled {key} from {current} to {desired}: {reason}", key=key,
                          current=current, desired=desired, reason=reason)
            status["lastScaleTime"] = rfc3339(now)
        else:
            desired = current
        status.update(currentReplicas=current, desiredReplicas=desired)
        self._set_metrics(status, statuses)
        await self._write_status(hpa, original)

    @staticmethod
    def _set_metrics(status, statuses):
        if statuses:
            status["currentMetrics"] = statuses
        else:
            status.pop("currentMetrics", None)

    async def _scale(self, hpa, now):
        """The target's scale connector and Scale; on failure, say so and raise L{_Failed}."""
        ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
        group, _, version = (ref.get("apiVersion") or "").rpartition("/")
        group = canonical_group(group)
        kind, name = ref.get("kind", ""), ref.get("name", "")
        info = next((info for info in self._catalog.served_kinds
                     if info.group == group and info.kind == kind
                     and (info.version == version or not version)), None)
        if info is None:
            info = next((info for info in self._catalog.served_kinds
                         if info.group == group and info.kind == kind), None)
        connector = None if info is None else self._catalog.connector(
            info.group, info.resource, "scale", info.version)
        try:
            if info is None:
                raise StatusError.bad_request(
                    f'no matches for kind "{kind}" in group "{group}"')
            if connector is None:
                raise StatusError.not_found(f"{info.resource}/scale", info.group, name)
            scale = await connector.get(self._context(hpa["metadata"].get("namespace", "")),
                                        name)
        except StatusError as e:
            message = e.message
            if info is None:
                message = f"unable to determine resource for scale target reference: {message}"
            self._recorder.record(hpa, WARNING, "FailedGetScale", message)
            set_condition(hpa["status"]["conditions"], "AbleToScale", "False", "FailedGetScale",
                          f"the HPA controller was unable to get the target's current scale: "
                          f"{message}", now)
            raise _Failed() from None
        return connector, scale

    async def _replicas_for_metrics(self, hpa, scale, current, now):
        """
        Upstream's C{computeReplicasForMetrics}: C{(replicas, metric name,
        statuses)}; raises L{_Failed} with C{(statuses, message)} when no
        count can be had (or some metrics fail and the rest would scale down).
        """
        conditions = hpa["status"]["conditions"]
        namespace = hpa["metadata"].get("namespace", "")
        specs = (hpa.get("spec") or {}).get("metrics") or DEFAULT_METRICS
        selector = (scale.get("status") or {}).get("selector") or ""
        if not selector:
            self._recorder.record(hpa, WARNING, "SelectorRequired", "selector is required")
            set_condition(conditions, "ScalingActive", "False", "InvalidSelector",
                          "the HPA target's scale is missing a selector", now)
            raise _Failed([], "selector is required")
        try:
            parsed = parse_label_selector(selector)
        except StatusError as e:
            message = f"couldn't convert selector into a corresponding internal selector " \
                      f"object: {e.message}"
            self._recorder.record(hpa, WARNING, "InvalidSelector", message)
            set_condition(conditions, "ScalingActive", "False", "InvalidSelector", message, now)
            raise _Failed([], message) from None
        pods = [pod for pod in self._pods.cache.values()
                if pod["metadata"]["namespace"] == namespace
                and parsed.matches(pod["metadata"].get("labels") or {})]
        replicas, metric_name, statuses = 0, "", []
        invalid, first = 0, None
        for spec in specs:
            try:
                proposal, name, metric_status = await self._replicas_for_metric(
                    spec, namespace, selector, pods, current, now)
            except calc.MetricError as e:
                statuses.append({"type": ""})
                reason = _REASONS.get(spec.get("type"), "FailedGetResourceMetric")
                if invalid == 0:
                    first = (reason, str(e))
                invalid += 1
                self._recorder.record(hpa, WARNING, reason, str(e))
                continue
            statuses.append(metric_status)
            if replicas == 0 or proposal > replicas:
                replicas, metric_name = proposal, name
        if invalid >= len(specs) or (invalid and replicas < current):
            reason, message = first
            set_condition(conditions, "ScalingActive", "False", reason,
                          f"the HPA was unable to compute the replica count: {message}", now)
            raise _Failed(statuses, f"invalid metrics ({invalid} invalid out of {len(specs)}), "
                                    f"first error is: {message}")
        set_condition(conditions, "ScalingActive", "True", "ValidMetricFound",
                      f"the HPA was able to successfully calculate a replica count from "
                      f"{metric_name}", now)
        return replicas, metric_name, statuses

    async def _replicas_for_metric(self, spec, namespace, selector, pods, current, now):
        kind = spec.get("type")
        if kind not in ("Resource", "ContainerResource"):
            raise calc.MetricError(f"unable to get metric of type {kind}: only resource "
                                   "metrics are served (no custom or external metrics API)")
        field = "resource" if kind == "Resource" else "containerResource"
        source = spec.get(field) or {}
        resource = source.get("name", "")
        container = source.get("container") if kind == "ContainerResource" else None
        what = f"{resource} resource" if container is None else f"{resource} container resource"
        target = source.get("target") or {}
        if target.get("type") == calc.UTILIZATION and target.get("averageUtilization"):
            target_type, target_value = calc.UTILIZATION, target["averageUtilization"]
            name = f"{what} utilization (percentage of request)"
        elif target.get("type") == calc.AVERAGE_VALUE and target.get("averageValue"):
            target_type = calc.AVERAGE_VALUE
            try:
                target_value = calc.milli(target["averageValue"])
            except (TypeError, ValueError):
                raise calc.MetricError("invalid resource metric source: averageValue is not a "
                                       "quantity") from None
            name = what
        else:
            raise calc.MetricError("invalid resource metric source: neither a utilization "
                                   "target nor a value target was set")
        try:
            metrics = await self._metrics.pod_metrics(namespace, selector, resource, container)
        except calc.MetricError as e:
            raise calc.MetricError(f"failed to get {resource} utilization: unable to get "
                                   f"metrics for resource {resource}: {e}") from None
        proposal, utilization, average, _ = calc.replicas_for(
            current, pods, metrics, resource, target_type, target_value, now, container)
        current_value = {"averageValue": milli_quantity(average)}
        if utilization is not None:
            current_value["averageUtilization"] = utilization
        status = {"name": resource, "current": current_value}
        if container is not None:
            status = {"name": resource, "container": container, "current": current_value}
        return proposal, name, {"type": kind, field: status}

    def _normalize(self, hpa, memory, current, desired, minimum, maximum, now):
        """Stabilize and limit a proposal, setting AbleToScale and ScalingLimited."""
        conditions = hpa["status"]["conditions"]
        behavior = (hpa.get("spec") or {}).get("behavior")
        if behavior is None:
            stabilized = calc.stabilize_default(memory, desired, now)
            if stabilized != desired:
                set_condition(conditions, "AbleToScale", "True", "ScaleDownStabilized",
                              "recent recommendations were higher than current one, applying "
                              "the highest recent recommendation", now)
            else:
                set_condition(conditions, "AbleToScale", "True", "ReadyForNewScale",
                              "recommended size matches current size", now)
            limited, reason, message = calc.limit_default(current, stabilized, minimum, maximum)
        else:
            up = calc.default_rules(behavior.get("scaleUp"), up=True)
            down = calc.default_rules(behavior.get("scaleDown"), up=False)
            stabilized, reason, message = calc.stabilize_with_behavior(
                memory, current, desired, up, down, now)
            if stabilized != desired:
                set_condition(conditions, "AbleToScale", "True", reason, message, now)
            else:
                set_condition(conditions, "AbleToScale", "True", "ReadyForNewScale",
                              "recommended size matches current size", now)
            limited, reason, message = calc.limit_with_behavior(
                memory, current, stabilized, minimum, maximum, up, down, now)
        set_condition(conditions, "ScalingLimited",
                      "False" if limited == stabilized else "True", reason, message, now)
        return limited

    async def _write_status(self, hpa, original):
        status = hpa["status"]
        if status == original:
            return
        meta = hpa["metadata"]
        written = copy.deepcopy(status)
        await write_status(self._provider, self._context(meta.get("namespace", "")), meta,
                           lambda stored: copy.deepcopy(written))
