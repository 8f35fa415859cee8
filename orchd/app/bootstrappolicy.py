# -*- test-case-name: tests.auth.test_bootstrappolicy -*-
"""
Writing the bootstrap policy through the registry, at every start.

A start-up task of the application: the policy's tables and the decision
what to write are authorization's (L{orchd.auth.bootstrappolicy}); the
writing goes through the registry, which sits above auth.

Each object is read, reconciled and written on its own: a failure is logged
and recorded, and the walk goes on, so one bad object does not leave the
cluster without the rest of its default policy. The caller reads the
L{PolicyReport} to decide whether start-up may go on.
"""

from twisted.internet.defer import CancelledError
from twisted.logger import Logger

from orchd.api.errors import StatusError
from orchd.api.kinds import RBAC
from orchd.auth.bootstrappolicy.policy import bootstrap_policy, object_ref
from orchd.auth.bootstrappolicy.reconcile import CREATE, RECREATE, UPDATE, reconcile
from orchd.registry.options import DeleteOptions

_OUTCOMES = {CREATE: "created", UPDATE: "updated", RECREATE: "recreated"}


class BootstrapPolicyError(Exception):
    """Some bootstrap objects could not be reconciled; C{report} says which."""

    def __init__(self, report):
        super().__init__(f"bootstrap policy incomplete: {report.summary()}")
        self.report = report


class PolicyReport:
    """
    What one reconciliation run did, by object reference (see L{object_ref}).

    @ivar failed: C{(reference, error text)} pairs.
    """

    def __init__(self):
        self.created = []
        self.updated = []
        self.recreated = []
        self.unchanged = []
        self.protected = []
        self.failed = []

    @property
    def changed(self):
        """Every object the run wrote."""
        return self.created + self.updated + self.recreated

    @property
    def ok(self):
        return not self.failed

    def summary(self):
        return (f"{len(self.created)} created, {len(self.updated)} updated, "
                f"{len(self.recreated)} recreated, {len(self.unchanged)} unchanged, "
                f"{len(self.protected)} protected, {len(self.failed)} failed")

    def check(self):
        """
        @raise BootstrapPolicyError: when some object failed.
        """
        if self.failed:
            raise BootstrapPolicyError(self)

    def __repr__(self):
        return f"<PolicyReport {self.summary()}>"


class PolicyReconciler:
    """
    Brings the stored RBAC objects up to the bootstrap policy.

    @param catalog: the L{orchd.registry.catalog.Catalog} to write through.
    @param policy: C{(resource, object)} pairs; the bootstrap policy by default.
    """

    log = Logger()

    def __init__(self, catalog, policy=None):
        self.catalog = catalog
        self.policy = bootstrap_policy() if policy is None else policy

    async def run(self):
        """Reconcile every object; returns a L{PolicyReport} and never raises for one object."""
        report = PolicyReport()
        for resource, expected in self.policy:
            ref = object_ref(resource, expected)
            try:
                result = await self._reconcile(resource, expected)
            except StatusError as e:
                self.log.error("Bootstrap policy: cannot reconcile {ref}: {error}", ref=ref,
                               error=e)
                report.failed.append((ref, str(e)))
                continue
            except CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - a bug here must not stop the rest
                self.log.failure("Bootstrap policy: cannot reconcile {ref}", ref=ref)
                report.failed.append((ref, repr(e)))
                continue
            self._record(report, ref, result)
        self.log.info("Bootstrap policy reconciled: {summary}", summary=report.summary())
        return report

    def _record(self, report, ref, result):
        if result.protected:
            self.log.debug("Bootstrap policy: {ref} has autoupdate off; left alone", ref=ref)
            report.protected.append(ref)
        elif result.action in _OUTCOMES:
            self.log.info(
                "Bootstrap policy: {outcome} {ref} ({rules} rules, {selectors} selectors, "
                "{subjects} subjects added)", outcome=_OUTCOMES[result.action], ref=ref,
                rules=len(result.missing_rules), selectors=len(result.missing_selectors),
                subjects=len(result.missing_subjects))
            getattr(report, _OUTCOMES[result.action]).append(ref)
        else:
            report.unchanged.append(ref)

    async def _reconcile(self, resource, expected):
        """Read, decide, write; read and decide again once if the write met a conflict."""
        store = self.catalog.resource(RBAC, resource)
        if store is None:
            raise StatusError(404, "NotFound", f"{resource}.{RBAC} is not served")
        meta = expected["metadata"]
        ctx = self.catalog.system_context(meta.get("namespace", ""))
        name = meta["name"]
        for attempt in (1, 2):
            existing = await store.find(ctx, name)
            result = reconcile(resource, expected, existing)
            try:
                await _write(store, ctx, name, result, existing)
            except StatusError as e:
                if e.code != 409 or attempt == 2:
                    raise
                self.log.debug("Bootstrap policy: conflict writing {resource}/{name}; retrying",
                               resource=resource, name=name)
                continue
            return result


async def _write(store, ctx, name, result, existing):
    if result.protected or result.obj is None:
        return
    if result.action == UPDATE:
        await store.update(ctx, name, result.obj)
        return
    if result.action == RECREATE:
        # The UID precondition makes a binding replaced meanwhile a conflict, not a loss.
        uid = (existing.get("metadata") or {}).get("uid")
        try:
            await store.delete(ctx, name, DeleteOptions(uid=uid))
        except StatusError as e:
            if e.code != 404:
                raise
    await store.create(ctx, result.obj)


async def reconcile_bootstrap_policy(catalog, policy=None):
    """
    Create what is missing of the bootstrap policy and repair what drifted.

    Idempotent: a second run writes nothing. Failures of single objects are
    logged and listed in the report rather than raised.

    @param catalog: the L{orchd.registry.catalog.Catalog}; the namespaces of
        namespaced objects (C{orch-system}, C{orch-public}) must exist.
    @param policy: C{(resource, object)} pairs instead of L{bootstrap_policy}.
    @rtype: L{PolicyReport}
    """
    return await PolicyReconciler(catalog, policy).run()
