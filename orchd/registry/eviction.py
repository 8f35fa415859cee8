# -*- test-case-name: tests.registry.test_eviction -*-
"""
Evicting a pod: C{POST .../pods/<name>/eviction} with a C{policy/v1}
(or C{policy/v1beta1}) Eviction.

Follows upstream's C{EvictionREST} (C{pkg/registry/core/pod/storage/eviction.go}).
A pod that has already stopped disrupting nothing more (Pending, Succeeded,
Failed, or being deleted) is deleted at once. Otherwise the one
PodDisruptionBudget that selects it must allow a disruption: its
C{disruptionsAllowed} is decremented, and the pod entered in
C{disruptedPods}, by a compare-and-swap write of the budget before the pod
is touched, so two evictions racing for a budget of one cannot both pass
(the loser decides again from the state that won, and gets the 429). Then
the pod gets the C{DisruptionTarget} condition and is deleted with the
Eviction's C{deleteOptions} (grace period, preconditions, dry run).

A budget that forbids answers 429 C{TooManyRequests} with upstream's
message and a C{DisruptionBudget} cause, which C{kubectl drain} retries; a
budget not yet processed by the disruption controller (its
C{observedGeneration} behind) answers 429 with C{Retry-After: 10}; a pod
that two budgets select answers 500, as upstream does not support that.
An unready pod may go without spending the budget while the budget is met
(or always, with C{unhealthyPodEvictionPolicy: AlwaysAllow}), pinned to the
resourceVersion it was judged at.
"""

from zope.interface import implementer

from orchd.admission.interfaces import CREATE, AdmissionAttributes
from orchd.api.disruption import (
    EVICTION_BY_API, disruption_target, update_disruption_allowed,
)
from orchd.api.errors import FieldError, StatusError
from orchd.api.kinds import subresource_kind
from orchd.api.meta import rfc3339
from orchd.api.selectors import selector_from_label_selector_object
from orchd.api.strategic import json_kind
from orchd.registry.binding import set_pod_condition
from orchd.registry.catalog import IConnector
from orchd.registry.context import RequestContext
from orchd.registry.options import DeleteOptions, ListOptions

#: Upstream's bound on C{status.disruptedPods}: past it, evictions are
#: refused until the disruption controller catches up.
MAX_DISRUPTED_PODS = 2000
#: Tries of a pod delete that loses races (upstream's C{EvictionsRetry} steps).
RETRIES = 20
#: What the budget's cause type is called (policy/v1 C{DisruptionBudgetCause}).
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE_BUDGETS = ("This pod has more than one PodDisruptionBudget, which the eviction "
                    "subresource does not support.")
_POLICIES = ("Orphan", "Background", "Foreground")
_ACCEPTED = ("policy/v1", "policy/v1beta1")


def eviction_connector():
    """The Catalog's C{connectors} entry for C{pods/eviction}: C{{key: factory(catalog)}}."""
    return {("", "pods", "eviction"): PodEviction}


def too_many_requests(cause, retry_after=0):
    """Upstream's C{NewTooManyRequests} with one C{DisruptionBudget} cause."""
    details = {"causes": [{"reason": DISRUPTION_BUDGET_CAUSE, "message": cause}]}
    headers = {}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return StatusError(429, "TooManyRequests", VIOLATION, details, headers)


def _still_processing(name):
    """The 429 of a budget the controller has not caught up with (Retry-After 10)."""
    return too_many_requests(f"The disruption budget {name} is still being processed by the "
                             "server.", 10)


def _is_ready(pod):
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def _can_ignore_budget(pod):
    """A pod whose eviction disrupts nothing more: not started, finished, or going."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Pending", "Succeeded", "Failed") or \
        bool(pod["metadata"].get("deletionTimestamp"))


def _enforce_version(pod):
    """Pin the delete to the pod as judged, unless it is finished or going anyway."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


@implementer(IConnector)
class PodEviction:
    """
    C{pods/eviction} of the pods a catalog serves.

    @ivar accepted_api_versions: the Eviction versions a body may spell
        (the answer is a C{Status} either way).
    """

    accepted_api_versions = _ACCEPTED

    def __init__(self, catalog):
        self._catalog = catalog
        self._pods = catalog.resource("", "pods")
        self.info = subresource_kind(self._pods.info, "eviction")
        self.clock = catalog.clock

    @property
    def _budgets(self):
        return self._catalog.resource("policy", "poddisruptionbudgets")

    async def connect(self, ctx, name, eviction):
        meta = eviction.get("metadata")
        if meta is None:
            meta = eviction["metadata"] = {}
        elif not isinstance(meta, dict):
            raise _not_of_type(meta, "Eviction.metadata", "v1.ObjectMeta")
        if meta.get("name") != name:
            raise StatusError.bad_request("name in URL does not match name in Eviction object")
        namespace = meta.get("namespace")
        if namespace and namespace != ctx.namespace:
            raise StatusError.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request")
        options = self._delete_options(ctx, eviction.get("deleteOptions"))
        pods = self._pods
        attributes = AdmissionAttributes.of_request(ctx, CREATE, pods.info, name, eviction, None,
                                                    "eviction")
        await pods.admission.admit(attributes)
        await pods.admission.validate(attributes)
        pod = await self._delete_if_undisrupting(ctx, name, options)
        if pod is not None:
            await self._spend_budget_and_delete(ctx, name, pod, options)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "code": 201}

    async def _delete_if_undisrupting(self, ctx, name, options):
        """
        Delete the pod at once if no budget applies to its eviction; else
        return it as read, for the budget checks.
        """
        tries = RETRIES if options.resource_version is None else 1
        for attempt in range(tries):
            pod = await self._pods.get(ctx, name)
            if not _can_ignore_budget(pod):
                return pod
            pinned = options
            if _enforce_version(pod) and options.resource_version is None:
                pinned = _with_version(options, pod["metadata"]["resourceVersion"])
            try:
                await self._mark_and_delete(ctx, name, pinned)
            except StatusError as e:
                if e.code != 409 or attempt == tries - 1:
                    raise
                continue
            return None
        return None     # not reached: the last attempt returns or raises

    async def _spend_budget_and_delete(self, ctx, name, pod, options):
        budgets = []
        if self._budgets is not None:   # None: --runtime-config turned policy/v1 off
            budgets = self._selecting_budgets(pod, await self._budgets.list(
                RequestContext(ctx.user, ctx.namespace), ListOptions(resource_version="0")))
        if len(budgets) > 1:
            raise StatusError(500, "", MULTIPLE_BUDGETS)
        pinned, budget_name = options, None
        if budgets:
            budget = budgets[0]
            budget_name = budget["metadata"]["name"]
            status = budget.get("status") or {}
            spec = budget.get("spec") or {}
            current, desired = status.get("currentHealthy") or 0, status.get("desiredHealthy") or 0
            if not _is_ready(pod) and (spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
                                       or (current >= desired and desired > 0)):
                # An unready pod adds nothing to the budget's healthy count: it
                # may go while it stays as judged, without spending the budget.
                pinned = _with_version(options, pod["metadata"]["resourceVersion"])
            else:
                await self._decrement(ctx, name, budget)
        try:
            await self._mark_and_delete(ctx, name, pinned)
        except StatusError as e:
            if e.code == 409 and pinned is not options and options.resource_version is None:
                # The pod changed (became ready, say) since it was judged.
                raise _still_processing(budget_name) from None
            raise

    @staticmethod
    def _selecting_budgets(pod, listing):
        """The budgets whose selector is not empty and matches the pod's labels."""
        labels = pod["metadata"].get("labels") or {}
        selected = []
        for budget in listing["items"]:
            try:
                selector = selector_from_label_selector_object(
                    (budget.get("spec") or {}).get("selector"))
            except StatusError:
                continue    # an invalid selector selects nothing
            if not selector.empty and selector.matches(labels):
                selected.append(budget)
        return selected

    async def _decrement(self, ctx, pod_name, budget):
        """
        Take one disruption from C{budget}, recording the pod in
        C{disruptedPods}: a compare-and-swap on the budget, decided again
        from the winning state when another write got there first.
        """
        name = budget["metadata"]["name"]
        now = self.clock.seconds()

        def take(pdb):
            status = pdb.get("status")
            if not isinstance(status, dict):
                status = pdb["status"] = {}
            generation = pdb["metadata"].get("generation") or 0
            if (status.get("observedGeneration") or 0) < generation:
                raise _still_processing(name)
            allowed = status.get("disruptionsAllowed") or 0
            if allowed < 0:
                raise StatusError.forbidden("poddisruptionbudget", "policy", name,
                                            "pdb disruptions allowed is negative")
            disrupted = status.get("disruptedPods")
            if isinstance(disrupted, dict) and len(disrupted) > MAX_DISRUPTED_PODS:
                raise StatusError.forbidden(
                    "poddisruptionbudget", "policy", name,
                    "DisruptedPods map too big - too many evictions not confirmed by PDB "
                    "controller")
            if allowed == 0:
                raise too_many_requests(
                    f"The disruption budget {name} needs {status.get('desiredHealthy') or 0} "
                    f"healthy pods and has {status.get('currentHealthy') or 0} currently")
            status["disruptionsAllowed"] = allowed - 1
            if allowed == 1:
                update_disruption_allowed(status, now)
            if not isinstance(disrupted, dict):
                disrupted = status["disruptedPods"] = {}
            disrupted[pod_name] = rfc3339(now)
            return pdb

        budgets = self._budgets
        cache = budgets.cache
        suggestion = cache.get(budgets.info.key(ctx.namespace, name)) if cache else None
        write_ctx = RequestContext(ctx.user, ctx.namespace, dry_run=ctx.dry_run,
                                   audit=ctx.audit, timing=ctx.timing)
        try:
            await budgets.rewrite(write_ctx, name, take, suggestion=suggestion)
        except StatusError as e:
            if e.code == 409:
                raise StatusError.timeout(
                    f'couldn\'t update PodDisruptionBudget "{name}" due to conflicts',
                    10) from None
            if e.code == 404:
                raise _still_processing(name) from None
            raise

    async def _mark_and_delete(self, ctx, name, options):
        """
        Set C{DisruptionTarget} on the pod (checking the preconditions), then
        delete it; a precondition on its resourceVersion follows our own write.
        """
        if not ctx.dry_run:
            condition = disruption_target(EVICTION_BY_API, "Eviction API: evicting",
                                          self.clock.seconds())

            def mark(pod):
                status = pod.get("status")
                if not isinstance(status, dict):
                    status = pod["status"] = {}
                return pod if set_pod_condition(status, dict(condition)) else None

            written = await self._pods.rewrite(ctx, name, mark, options)
            if options.resource_version is not None:
                options = _with_version(options, written["metadata"]["resourceVersion"])
        await self._pods.delete(ctx, name, options)

    @staticmethod
    def _delete_options(ctx, document):
        """
        The Eviction's C{deleteOptions} as L{DeleteOptions}; its C{dryRun}
        and the request's must agree (upstream's C{propagateDryRun}).
        """
        if document is None:
            return DeleteOptions()
        if not isinstance(document, dict):
            raise _not_of_type(document, "Eviction.deleteOptions", "v1.DeleteOptions")
        preconditions = document.get("preconditions")
        if preconditions is None:
            preconditions = {}
        elif not isinstance(preconditions, dict):
            raise _not_of_type(preconditions, "DeleteOptions.preconditions", "v1.Preconditions")
        for field in ("uid", "resourceVersion"):
            value = preconditions.get(field)
            if value is not None and not isinstance(value, str):
                raise _not_of_type(value, f"Preconditions.preconditions.{field}", "string")
        errors = []
        grace = document.get("gracePeriodSeconds")
        # A negative grace period is read as 1 s by the pod's delete, as upstream.
        if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int)):
            errors.append(FieldError.invalid("gracePeriodSeconds", grace, "must be an integer"))
        policy = document.get("propagationPolicy")
        if policy is not None and policy not in _POLICIES:
            errors.append(FieldError.not_supported("propagationPolicy", policy, _POLICIES))
        orphan = document.get("orphanDependents")
        if orphan is not None and not isinstance(orphan, bool):
            raise _not_of_type(orphan, "DeleteOptions.orphanDependents", "bool")
        if orphan is not None and policy is not None:
            errors.append(FieldError.invalid(
                "propagationPolicy", policy,
                "orphanDependents and deletionPropagation cannot be both set"))
        dry_run = document.get("dryRun") or []
        if not isinstance(dry_run, list):
            raise _not_of_type(dry_run, "DeleteOptions.dryRun", "[]string")
        if dry_run and dry_run != ["All"]:
            errors.append(FieldError.not_supported("dryRun", dry_run, ["All"]))
        if errors:
            raise StatusError.invalid("DeleteOptions", "meta.k8s.io", "", errors)
        if dry_run:
            ctx.dry_run = True
        if orphan is not None:
            policy = "Orphan" if orphan else "Background"
        return DeleteOptions(uid=preconditions.get("uid") or None,
                             resource_version=preconditions.get("resourceVersion") or None,
                             propagation_policy=policy, grace_period_seconds=grace,
                             orphan_dependents=orphan)


def _with_version(options, version):
    """A copy of C{options} with a resourceVersion precondition of C{version}."""
    return DeleteOptions(uid=options.uid, resource_version=version,
                         propagation_policy=options.propagation_policy,
                         grace_period_seconds=options.grace_period_seconds,
                         orphan_dependents=options.orphan_dependents)


def _not_of_type(value, field, go_type):
    """Upstream's decoding error for a field of the wrong JSON type (400)."""
    return StatusError.bad_request(
        f"json: cannot unmarshal {json_kind(value)} into Go struct field {field} of type "
        f"{go_type}")
