# -*- test-case-name: tests.scheduler.test_volumebinding -*-
"""
VolumeBinding: a pod goes only where its PersistentVolumeClaims can be
served, and its claims that wait for their first consumer are bound for
the node chosen before the pod is.

As upstream's plugin (C{pkg/scheduler/framework/plugins/volumebinding}),
reading claims, volumes and classes from informers (L{VolumeCache}):

  - PreFilter: a claim that does not exist, or is being deleted, or is
    unbound while its class binds at once (C{Immediate}, no class, or a
    class that does not exist: the binder's business, not ours) makes the
    pod unschedulable before any node is tried, with upstream's messages;
  - Filter: a bound claim's volume must exist and its node affinity admit
    the node; an unbound C{WaitForFirstConsumer} claim needs an
    C{Available} volume that fits it and that the node reaches, or a class
    that something provisions; else the node is rejected with upstream's
    reasons;
  - PreBind (L{VolumeCache.prebind}, run by the scheduler once it has
    chosen the node and before it writes the binding): each such claim is
    bound for that node, by writing the chosen volume's C{claimRef}
    (C{pv.kubernetes.io/bound-by-controller}), or by annotating the claim
    C{volume.kubernetes.io/selected-node} for its provisioner; then it
    waits, the pod assumed on the node, until the persistent-volume binder
    has bound every claim (upstream's C{bindTimeout}, 10 minutes), and
    fails, sending the pod back to be scheduled again, if a claim goes,
    loses its selected node or the time runs out.
"""

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from zope.interface import implementer

from orchd.api.errors import StatusError
from orchd.api.kinds import STORAGE
from orchd.controllers.volumematch import (
    BOUND_BY_CONTROLLER, SELECTED_NODE, ClaimView, ClassView, VolumeView, find_best_match,
)
from orchd.scheduler.binder import scheduler_context
from orchd.scheduler.framework import (
    UNRESOLVABLE, FilterPlugin, NodeStatus, PreFilterRejected,
)
from orchd.scheduler.interfaces import IFilterPlugin, IPreFilterPlugin
from orchd.scheduler.nodeaffinity import compile_term
from orchd.storage.informer import Informer

NAME = "VolumeBinding"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
#: Upstream's C{bindTimeoutSeconds}: how long PreBind waits for the claims.
BIND_TIMEOUT = 600.0


class VolumeBindingError(Exception):
    """PreBind could not bind the pod's claims; the message is upstream's."""


class ScheduledVolume(VolumeView):
    """A L{VolumeView} with its node affinity compiled for the filters."""

    __slots__ = ("terms",)

    def __init__(self, volume):
        super().__init__(volume)
        self.terms = None if self.node_terms is None else tuple(
            compile_term(term) for term in self.node_terms)

    def reachable_from(self, node):
        """Whether the node (a L{NodeInfo}) satisfies the volume's node affinity."""
        if self.terms is None:
            return True
        labels = node.labels
        return any(term is not None and term.matches(labels, node.name) for term in self.terms)


class PodClaims:
    """
    A pod's claims sorted as upstream's C{GetPodVolumeClaims}: bound ones,
    and unbound ones that wait for their first consumer.
    """

    __slots__ = ("bound", "delayed")

    def __init__(self, bound, delayed):
        self.bound = bound
        self.delayed = delayed


class VolumeCache:
    """
    Claims, volumes and classes as the scheduler reads them, kept by
    informers on the catalog's watch caches.

    @param on_change: called with no argument after any of them changes
        (the scheduler tries its unschedulable pods again).
    """

    log = Logger()

    def __init__(self, catalog, clock, on_change=None, bind_timeout=BIND_TIMEOUT):
        self._clock = clock
        self._on_change = on_change
        self._bind_timeout = bind_timeout
        self._claims = catalog.resource("", "persistentvolumeclaims")
        self._volumes = catalog.resource("", "persistentvolumes")
        self._claim_prefix = self._claims.info.key_prefix()
        self._volume_prefix = self._volumes.info.key_prefix()
        self._class_prefix = catalog.resource(STORAGE, "storageclasses").info.key_prefix()
        self.claim_informer = Informer(catalog.reads, self._claim_prefix, self._changed,
                                       keep=ClaimView)
        self.volume_informer = Informer(catalog.reads, self._volume_prefix, self._changed,
                                        keep=ScheduledVolume)
        self.class_informer = Informer(catalog.reads, self._class_prefix, self._changed,
                                       keep=ClassView)
        self.informers = [self.claim_informer, self.volume_informer, self.class_informer]
        self._waiters = []

    @classmethod
    def for_catalog(cls, catalog, clock, on_change=None):
        """A cache, or None when the API serves no claims, volumes or classes."""
        if any(catalog.resource(group, resource) is None for group, resource in (
                ("", "persistentvolumeclaims"), ("", "persistentvolumes"),
                (STORAGE, "storageclasses"))):
            return None
        return cls(catalog, clock, on_change)

    def _changed(self, type, obj, old):
        self.wake()
        if self._on_change is not None:
            self._on_change()

    # -- reads ----------------------------------------------------------------

    def claim(self, namespace, name):
        return self.claim_informer.cache.get(f"{self._claim_prefix}{namespace}/{name}")

    def volume(self, name):
        return self.volume_informer.cache.get(self._volume_prefix + name)

    def storage_class(self, name):
        return self.class_informer.cache.get(self._class_prefix + name) if name else None

    def pod_claims(self, pod):
        """
        The pod's L{PodClaims}.

        @raise PreFilterRejected: a claim is missing, being deleted, or
            unbound and bound at once.
        """
        bound, delayed, immediate = [], [], False
        for name in pod.claims:
            claim = self.claim(pod.namespace, name)
            if claim is None:
                raise PreFilterRejected(UNRESOLVABLE, f'persistentvolumeclaim "{name}" not found')
            if claim.deleting:
                raise PreFilterRejected(UNRESOLVABLE,
                                        f'persistentvolumeclaim "{name}" is being deleted')
            if claim.fully_bound:
                bound.append(claim)
                continue
            storage_class = self.storage_class(claim.class_name)
            if storage_class is not None and storage_class.delays_binding \
                    and not claim.volume_name:
                delayed.append((claim, storage_class))
            else:
                immediate = True
        if immediate:
            raise PreFilterRejected(UNRESOLVABLE, UNBOUND_IMMEDIATE)
        return PodClaims(tuple(bound), tuple(delayed))

    def node_reasons(self, claims, node):
        """Upstream's reasons C{node} cannot serve the pod's claims (empty: it can)."""
        reasons = []
        for claim in claims.bound:
            volume = self.volume(claim.volume_name)
            if volume is None:
                reasons.append(PV_NOT_EXIST)
                break
            if not volume.reachable_from(node):
                reasons.append(NODE_CONFLICT)
                break
        if claims.delayed and self.plan(claims, node) is None:
            reasons.append(BIND_CONFLICT)
        return reasons

    def plan(self, claims, node):
        """
        How the pod's waiting claims get bound on C{node}: a list of
        C{(claim, volume)}, C{volume} None for a claim to provision; None
        when one of them can be neither bound nor provisioned there.
        """
        chosen, plan = set(), []
        volumes = self.volume_informer.cache.values()
        for claim, storage_class in claims.delayed:
            volume = find_best_match(
                claim, volumes, delay_binding=True,
                reachable=lambda v: v.name not in chosen and v.reachable_from(node))
            if volume is None and not storage_class.provisions:
                return None
            if volume is not None:
                chosen.add(volume.name)
            plan.append((claim, volume))
        return plan

    # -- PreBind --------------------------------------------------------------

    async def prebind(self, pod, node, wanted):
        """
        Bind the pod's waiting claims for C{node} (a L{NodeInfo}), and wait
        until all its claims are bound.

        @param wanted: C{wanted()}: whether the pod still waits for this
            binding (not deleted meanwhile).
        @raise VolumeBindingError: with upstream's message.
        """
        try:
            claims = self.pod_claims(pod)
        except PreFilterRejected as rejected:
            raise VolumeBindingError(rejected.message) from None
        if not claims.delayed:
            return
        plan = self.plan(claims, node)
        if plan is None:
            raise VolumeBindingError(f"binding volumes: {BIND_CONFLICT}")
        try:
            for claim, volume in plan:
                if volume is None:
                    await self._select_node(claim, node.name)
                elif not volume.bound_to(claim):
                    await self._bind_volume(claim, volume)
        except StatusError as e:
            raise VolumeBindingError(f"binding volumes: {e.message}") from None
        await self._wait_bound(pod, plan, node, wanted)

    async def _select_node(self, claim, node_name):
        def select(current):
            if current["metadata"].get("uid") != claim.uid:
                raise StatusError.conflict("persistentvolumeclaims", "", claim.name,
                                           "the claim was replaced")
            annotations = current["metadata"].get("annotations")
            if not isinstance(annotations, dict):
                annotations = current["metadata"]["annotations"] = {}
            annotations[SELECTED_NODE] = node_name
            return current

        await self._claims.patch(scheduler_context(claim.namespace), claim.name, select)

    async def _bind_volume(self, claim, volume):
        """Upstream's C{BindPodVolumes} for a static volume: its claimRef names the claim."""
        def bind(current):
            spec = current.get("spec")
            if current["metadata"].get("uid") != volume.uid or not isinstance(spec, dict):
                raise StatusError.conflict("persistentvolumes", "", volume.name,
                                           "the volume was replaced")
            ref = spec.get("claimRef")
            if isinstance(ref, dict) and ref.get("name"):
                raise StatusError.conflict("persistentvolumes", "", volume.name,
                                           "the volume was bound to another claim")
            spec["claimRef"] = claim.reference()
            annotations = current["metadata"].get("annotations")
            if not isinstance(annotations, dict):
                annotations = current["metadata"]["annotations"] = {}
            annotations[BOUND_BY_CONTROLLER] = "yes"
            return current

        await self._volumes.patch(scheduler_context(""), volume.name, bind)

    async def _wait_bound(self, pod, plan, node, wanted):
        deadline = self._clock.seconds() + self._bind_timeout
        while True:
            if not wanted():
                raise VolumeBindingError("binding volumes: the pod is no longer pending")
            done = True
            for claim, volume in plan:
                current = self.claim(claim.namespace, claim.name)
                if current is None or current.uid != claim.uid:
                    raise VolumeBindingError(
                        f'binding volumes: persistentvolumeclaim "{claim.name}" was deleted')
                if current.fully_bound:
                    bound = self.volume(current.volume_name)
                    if bound is not None and not bound.reachable_from(node):
                        # Provisioned for a node an earlier attempt chose: the pod
                        # must follow its volume there, so it is scheduled again.
                        raise VolumeBindingError(
                            f'binding volumes: pv "{bound.name}" node affinity doesn\'t '
                            f"match node \"{node.name}\"")
                    continue
                done = False
                if volume is None and current.selected_node != node.name:
                    raise VolumeBindingError(
                        f'binding volumes: selectedNode annotation reset for PVC "{claim.name}"')
            if done:
                return
            remaining = deadline - self._clock.seconds()
            if remaining <= 0:
                raise VolumeBindingError("binding volumes: context deadline exceeded")
            await self._next_change(remaining)

    def _next_change(self, timeout):
        """A Deferred fired at the next change the informers see, or after C{timeout}."""
        d = Deferred()
        timer = self._clock.callLater(timeout, self._fire, d)
        self._waiters.append((d, timer))
        return d

    @staticmethod
    def _fire(d):
        if not d.called:
            d.callback(None)

    def wake(self):
        """Let every PreBind waiting look again (a claim, volume or pod changed)."""
        waiters, self._waiters = self._waiters, []
        for d, timer in waiters:
            if timer.active():
                timer.cancel()
            self._fire(d)


@implementer(IPreFilterPlugin, IFilterPlugin)
class VolumeBinding(FilterPlugin):
    """
    @param volumes: the L{VolumeCache}.
    """

    name = NAME

    def __init__(self, volumes):
        self._volumes = volumes

    def prefilter(self, pod):
        if pod.claims:
            self._volumes.pod_claims(pod)
        return None

    def skip_filter(self, pod):
        return not pod.claims

    def filter_nodes(self, pod, nodes, statuses):
        try:
            claims = self._volumes.pod_claims(pod)
        except PreFilterRejected as rejected:
            # A claim changed since PreFilter looked: every node fails alike.
            for node in nodes:
                statuses[node.name] = NodeStatus(UNRESOLVABLE, rejected.message)
            return []
        if not claims.bound and not claims.delayed:
            return nodes
        kept = []
        for node in nodes:
            reasons = self._volumes.node_reasons(claims, node)
            if reasons:
                statuses[node.name] = NodeStatus(UNRESOLVABLE, *reasons)
            else:
                kept.append(node)
        return kept

    def filter(self, pod, node):
        claims = self._volumes.pod_claims(pod)
        reasons = self._volumes.node_reasons(claims, node)
        return NodeStatus(UNRESOLVABLE, *reasons) if reasons else None
