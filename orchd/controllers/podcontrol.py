# -*- test-case-name: tests.controllers.test_podcontrol -*-
"""
Creating and deleting an owner's pods, with the events upstream's
C{RealPodControl} records (C{controller_utils.go}), and the slow start
that creates many of them in growing batches.

A pod made from a template gets the template's labels, annotations,
finalizers and spec, C{generateName: <owner>-}, and a controlling owner
reference that blocks the owner's foreground deletion. Events go on the
owner: C{SuccessfulCreate "Created pod: x"}, C{FailedCreate "Error creating:
<reason>"}, C{SuccessfulDelete "Deleted pod: x"}, C{FailedDelete "Error
deleting: <reason>"}.
"""

import copy

from twisted.internet.defer import DeferredList, ensureDeferred

from orchd.api.errors import StatusError
from orchd.controllers.events import NORMAL, WARNING
from orchd.controllers.podstate import pod_key
from orchd.registry.context import RequestContext

#: Upstream's C{SlowStartInitialBatchSize}.
SLOW_START_INITIAL_BATCH = 1


def namespace_terminating(error):
    """True for the refusal of a create in a namespace being deleted."""
    causes = (error.details or {}).get("causes") or ()
    return error.code == 403 and (
        "because it is being terminated" in error.message
        or any(c.get("type") == "NamespaceTerminating" for c in causes if isinstance(c, dict)))


def pod_from_template(template, owner_name, namespace, reference):
    """
    The pod an owner creates from its template (upstream's
    C{GetPodFromTemplate}).

    @raise StatusError: 400-class error when the template has no labels,
        which no selector could ever match.
    """
    template = template or {}
    template_meta = template.get("metadata") or {}
    labels = dict(template_meta.get("labels") or {})
    if not labels:
        raise StatusError.unprocessable("unable to create pods, no labels")
    meta = {"namespace": namespace, "generateName": f"{owner_name}-", "labels": labels,
            "ownerReferences": [dict(reference)]}
    for field in ("annotations", "finalizers"):
        if template_meta.get(field):
            meta[field] = copy.deepcopy(template_meta[field])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": copy.deepcopy(template.get("spec") or {})}


async def slow_start_batch(count, create, initial=SLOW_START_INITIAL_BATCH):
    """
    Call C{create()} C{count} times in batches of 1, 2, 4, ... run at once,
    stopping after the first batch with a failure (upstream's
    C{slowStartBatch}): a template that cannot be created fails once, not
    500 times.

    @param create: an async function; a raised L{StatusError} is a failure.
    @return: C{(successes, first error or None)}.
    """
    remaining, successes = count, 0
    batch = min(remaining, initial)
    while batch > 0:
        results = await DeferredList([ensureDeferred(create()) for _ in range(batch)],
                                     consumeErrors=True)
        errors = [result for ok, result in results if not ok]
        successes += batch - len(errors)
        if errors:
            failure = errors[0]
            failure.trap(StatusError)
            return successes, failure.value
        remaining -= batch
        batch = min(2 * batch, remaining)
    return successes, None


class PodControl:
    """
    Pod writes on behalf of owners, through the catalog's pods registry.

    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param recorder: an L{orchd.controllers.events.EventRecorder}.
    @param manager: the field manager of the writes.
    """

    def __init__(self, catalog, recorder, manager):
        self._catalog = catalog
        self._pods = catalog.resource("", "pods")
        self._recorder = recorder
        self._manager = manager

    def context(self, namespace):
        return RequestContext(self._catalog.system_context().user, namespace,
                              field_manager=self._manager)

    async def create(self, owner, template, reference):
        """
        Create one pod of C{owner} from C{template}; returns it.

        @raise StatusError: when the API refuses it (the event is recorded).
        """
        meta = owner["metadata"]
        namespace = meta.get("namespace", "")
        try:
            pod = pod_from_template(template, meta["name"], namespace, reference)
            created = await self._pods.create(self.context(namespace), pod)
        except StatusError as e:
            self._recorder.record(owner, WARNING, "FailedCreate", f"Error creating: {e.message}")
            raise
        self._recorder.record(owner, NORMAL, "SuccessfulCreate",
                              f"Created pod: {created['metadata']['name']}")
        return created

    async def delete(self, owner, pod):
        """
        Delete one of C{owner}'s pods.

        @raise StatusError: when the API refuses; a missing pod is a 404
            without an event, as upstream.
        """
        meta = pod["metadata"]
        namespace = meta.get("namespace", "")
        try:
            await self._pods.delete(self.context(namespace), meta["name"])
        except StatusError as e:
            if e.code != 404:
                self._recorder.record(owner, WARNING, "FailedDelete",
                                      f"Error deleting: {e.message}")
            raise
        self._recorder.record(owner, NORMAL, "SuccessfulDelete", f"Deleted pod: {meta['name']}")

    async def delete_expected(self, owner, pod, expectations, key):
        """
        L{delete}, for a deletion C{expectations} awaits under C{key}: one
        that fails will never be seen by the informer, so it is counted as
        observed; a pod already gone is no failure.
        """
        try:
            await self.delete(owner, pod)
        except StatusError as e:
            expectations.deletion_observed(key, pod_key(pod))
            if e.code != 404:
                raise
