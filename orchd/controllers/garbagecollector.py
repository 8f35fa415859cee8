# -*- test-case-name: tests.controllers.test_garbagecollector -*-
"""
The garbage collector: objects whose owners are gone are deleted.

A graph (owner uid -> dependent uids) is kept from one informer per stored
resource; the work is upstream's C{attemptToDelete} and C{attemptToOrphan}:

 - B{delete}: each owner of an object is read live, in the object's
   namespace unless its kind is cluster-scoped. Missing or with another uid
   it is I{dangling}; deleted in the foreground, I{waiting}; else I{solid}.
   With a solid owner the other references are removed; with none the
   object is deleted (in the foreground if an owner waits and the object
   has dependents, else as its finalizers say, by default in the
   background). An object deleted in the foreground drops its
   C{foregroundDeletion} finalizer once no dependent blocks it.
 - B{orphan}: an owner deleted with the C{orphan} finalizer is removed from
   its dependents' references, then the finalizer is dropped.

Nothing runs before every informer has listed. Work reaches the queue a
bounded amount per reactor turn, and workers wait for the next turn once
the turn's budget of registry calls is spent (L{orchd.controllers.pacing}).
The graph's nodes and the reading of owner references and finalizers are
in L{orchd.controllers.ownerrefs}.
"""

from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from zope.interface import implementer

from orchd.api.errors import StatusError
from orchd.api.meta import FINALIZER_FOREGROUND, FINALIZER_ORPHAN
from orchd.controllers.events import WARNING, EventRecorder, LRUCache
from orchd.storage.informer import Informer, start_all, stop_all
from orchd.controllers.ownerrefs import (
    _blocking, _finalizers, _group, _Node, _owner_references, _set_list,
)
from orchd.controllers.pacing import TurnPacer
from orchd.controllers.queuemetrics import WORKQUEUES
from orchd.registry.definitions import IKindListener
from orchd.registry.options import DeleteOptions
from orchd.storage.interfaces import DELETED

COMPONENT = "garbage-collector-controller"
#: Work kinds, the first element of a queue key.
ATTEMPT_DELETE = "delete"
ATTEMPT_ORPHAN = "orphan"

_ABSENT_CACHE = 500


def _uid(obj):
    """
    What the graph's informers keep of an object: its uid, to know it when
    it is deleted. The graph's L{_Node}s hold the rest; whole objects would
    give the process a copy of the store to scan in every full collection.
    """
    return obj["metadata"].get("uid")


class _Replaced(Exception):
    """The object at the name now has another uid: the one we meant is gone."""


@implementer(IKindListener)
class GarbageCollector(Service):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}; every stored
        resource is watched, and every write goes through its registries.
    @param clock: an C{IReactorTime}.
    @param ops_per_turn: registry calls (and queue feeds) per reactor turn.
    @param concurrency: objects worked on at once.
    @param recorder: an L{EventRecorder} for warnings about invalid references.
    """

    name = "garbagecollector"
    log = Logger()

    def __init__(self, catalog, clock, ops_per_turn=1000, concurrency=16, recorder=None):
        self._catalog = catalog
        self._clock = clock
        self._ops_per_turn = ops_per_turn
        self._recorder = recorder or EventRecorder(catalog, clock, COMPONENT)
        self._kinds = {}
        self._informers = []
        self._prefixes = {}
        for info in catalog.served_kinds:
            self._follow(info)
        # Kinds served later (custom resources) are followed from then on.
        catalog.subscribe(self)
        self._nodes = {}
        self._dependents = {}
        self._absent = LRUCache(_ABSENT_CACHE)
        self._pacer = TurnPacer(self._work, clock, ops_per_turn, concurrency,
                                metrics=WORKQUEUES.for_queue(self.name, clock))
        self._synced = False
        self._stopped = False
        self._scan_call = None
        self._scan = None
        self.started = None

    # -- the kinds followed -------------------------------------------------------

    def _follow(self, info):
        """Follow the stored kind C{info}; return its new informer, or None."""
        if not info.stored:
            return None
        provider = self._catalog.resource(info.group, info.resource)
        if provider is None:
            return None
        self._kinds.setdefault((info.group, info.kind), provider)
        prefix = provider.info.key_prefix()
        if prefix in self._prefixes:
            return None
        informer = self._prefixes[prefix] = Informer(
            self._catalog.reads, prefix,
            lambda type, obj, old, provider=provider: self._changed(provider, type, obj, old),
            keep=_uid)
        self._informers.append(informer)
        return informer

    def kind_registered(self, definition):
        """A kind served from now on (a custom resource's): its objects join the graph."""
        informer = self._follow(definition.info)
        if informer is not None and self.started is not None and not self._stopped:
            d = Deferred.fromCoroutine(informer.start())
            d.addErrback(lambda f: self.log.failure(
                "Following {kind} failed", f, kind=definition.info.kind))

    def kind_unregistered(self, definition):
        """A kind no longer served: once no version of it is left, stop following it."""
        info = definition.info
        provider = self._catalog.resource(info.group, info.resource)
        if provider is not None:
            self._kinds[(info.group, info.kind)] = provider
            return
        self._kinds.pop((info.group, info.kind), None)
        informer = self._prefixes.pop(info.key_prefix(), None)
        if informer is not None:
            informer.stop()
            self._informers.remove(informer)

    # -- service ----------------------------------------------------------------

    def startService(self):
        super().startService()
        self.started = Deferred.fromCoroutine(self._start())
        self.started.addErrback(
            lambda f: self.log.failure("Garbage collector failed to start", f))

    async def _start(self):
        await start_all(self._informers)
        if self._stopped:
            return
        self._synced = True
        self.log.info("Garbage collector synced: {count} objects in the graph",
                      count=len(self._nodes))
        # Owners of every kind are known now: look for references to owners
        # that were never seen, a few at a time.
        self._scan = iter(list(self._nodes))
        self._scan_call = self._clock.callLater(0, self._scan_some)
        self._pacer.start()

    def stopService(self):
        self._stopped = True
        self._catalog.unsubscribe(self)
        stop_all(self._informers)
        self._pacer.stop()
        if self._scan_call is not None and self._scan_call.active():
            self._scan_call.cancel()
        self._scan_call = None
        return super().stopService()

    # -- the graph --------------------------------------------------------------

    def _changed(self, provider, type, obj, old_uid):
        if type == DELETED:
            # A deletion found by listing again carries only what was kept.
            self._removed(old_uid)
            return
        meta = obj.get("metadata") or {}
        uid = meta.get("uid")
        if not uid:
            return
        node = self._nodes.get(uid)
        if node is None:
            node = self._nodes[uid] = _Node(uid, provider, meta.get("namespace", ""),
                                            meta.get("name", ""))
            # Dependents seen before their owner may name it wrongly (kind,
            # name, namespace): let each check its references.
            for dependent in self._dependents.get(uid, ()):
                found = self._nodes.get(dependent)
                if found is not None and not self._references_match(found, node):
                    self._enqueue(ATTEMPT_DELETE, dependent)
        owners = _owner_references(meta)
        if owners != node.owners:
            self._owners_changed(node, owners)
        node.being_deleted = bool(meta.get("deletionTimestamp"))
        deleting_with = tuple(_finalizers(meta)) if node.being_deleted else ()
        node.deleting_dependents = FINALIZER_FOREGROUND in deleting_with
        # Upstream's deletionStartsWithFinalizer, against the node's last state.
        starts = {f for f in deleting_with if f not in node.deleting_with}
        node.deleting_with = deleting_with
        if FINALIZER_ORPHAN in starts:
            self._enqueue(ATTEMPT_ORPHAN, uid)
        elif FINALIZER_FOREGROUND in starts:
            for dependent in self._dependents.get(uid, ()):
                self._enqueue(ATTEMPT_DELETE, dependent)
            self._enqueue(ATTEMPT_DELETE, uid)

    def _owners_changed(self, node, owners):
        before = {ref["uid"]: ref for ref in node.owners}
        after = {ref["uid"]: ref for ref in owners}
        node.owners = owners
        added = [ref for uid, ref in after.items() if uid not in before]
        for uid, ref in before.items():
            if uid not in after:
                self._forget_dependent(uid, node.uid)
            # An owner waiting on this dependent may be free to go now.
            if _blocking(ref) and not _blocking(after.get(uid, {})):
                owner = self._nodes.get(uid)
                if owner is not None and owner.deleting_dependents:
                    self._enqueue(ATTEMPT_DELETE, uid)
        for ref in added:
            self._dependents.setdefault(ref["uid"], set()).add(node.uid)
        if self._synced and self._needs_check(node, added):
            self._enqueue(ATTEMPT_DELETE, node.uid)

    def _needs_check(self, node, refs):
        """True if some reference may not resolve to a live, undeleted owner."""
        check = False
        for ref in refs:
            owner = self._nodes.get(ref["uid"])
            if owner is None or owner.deleting_dependents:
                check = True
            elif not self._references_match(node, owner):
                if node.namespace and owner.provider.info.namespaced \
                        and owner.namespace != node.namespace:
                    # (Cluster-scoped dependents are reported when classified.)
                    self._report_invalid_namespace(node, ref)
                check = True
        return check

    def _references_match(self, dependent, owner):
        """Whether every reference of C{dependent} to C{owner}'s uid names C{owner}."""
        info = owner.provider.info
        if info.namespaced and owner.namespace != dependent.namespace:
            return False
        for ref in dependent.owners:
            if ref["uid"] == owner.uid and (
                    ref.get("kind") != info.kind or ref.get("name") != owner.name
                    or _group(ref.get("apiVersion") or "") != info.group):
                return False
        return True

    def _report_invalid_namespace(self, node, ref):
        where = (f"[{ref.get('apiVersion')}/{ref.get('kind')}, namespace: {node.namespace}, "
                 f"name: {ref.get('name')}, uid: {ref['uid']}]")
        self._recorder.record(node.reference(), WARNING, "OwnerRefInvalidNamespace",
                              f'ownerRef {where} does not exist in namespace "{node.namespace}"')

    def _removed(self, uid):
        node = self._nodes.pop(uid, None)
        if node is None:
            return
        for ref in node.owners:
            self._forget_dependent(ref["uid"], uid)
            owner = self._nodes.get(ref["uid"])
            if owner is not None and owner.deleting_dependents:
                self._enqueue(ATTEMPT_DELETE, owner.uid)
        dependents = self._dependents.get(uid)
        if dependents:
            # Uids are never reused: every reference to this one dangles now.
            self._absent.put(uid, True)
            for dependent in dependents:
                self._enqueue(ATTEMPT_DELETE, dependent)

    def _forget_dependent(self, owner, dependent):
        dependents = self._dependents.get(owner)
        if dependents is not None:
            dependents.discard(dependent)
            if not dependents:
                del self._dependents[owner]

    def _scan_some(self):
        self._scan_call = None
        if self._scan is None or self._stopped:
            return
        for _ in range(self._ops_per_turn):
            uid = next(self._scan, None)
            if uid is None:
                self._scan = None
                return
            node = self._nodes.get(uid)
            if node is not None and node.owners and self._needs_check(node, node.owners):
                self._enqueue(ATTEMPT_DELETE, uid)
        self._scan_call = self._clock.callLater(0, self._scan_some)

    # -- work, paced by turns ---------------------------------------------------

    def _enqueue(self, action, uid):
        self._pacer.add((action, uid))

    async def _work(self, key):
        action, uid = key
        if action == ATTEMPT_ORPHAN:
            await self._attempt_orphan(uid)
        else:
            await self._attempt_delete(uid)

    # -- attempt to delete ------------------------------------------------------

    async def _attempt_delete(self, uid):
        node = self._nodes.get(uid)
        if node is None:
            return
        if node.being_deleted and not node.deleting_dependents:
            # Deletion is a one-way trip: its dependents are handled once it is gone.
            return
        latest = await self._latest(node)
        if latest is None:
            return
        meta = latest["metadata"]
        if meta.get("deletionTimestamp"):
            if FINALIZER_FOREGROUND in _finalizers(meta):
                await self._finish_foreground(node)
            return
        refs = _owner_references(meta)
        if not refs:
            return
        classified = await self._classify(node, refs)
        if classified is None:
            return
        solid, dangling, waiting = classified
        if solid:
            if dangling or waiting:
                gone = {ref["uid"] for ref in dangling + waiting}
                self.log.info("Removing references to {count} gone or going owners from {node}",
                              count=len(gone), node=node)
                await self._remove_references(node, gone)
            return
        dependents = [self._nodes[d] for d in self._dependents.get(uid, ()) if d in self._nodes]
        if waiting and dependents:
            if any(dependent.deleting_dependents for dependent in dependents):
                # A dependent waits on this object while an owner waits on it:
                # stop blocking the owner so that a cycle cannot hang.
                await self._unblock_references(node)
            await self._delete(node, latest, "Foreground")
            return
        finalizers = _finalizers(meta)
        if FINALIZER_ORPHAN in finalizers:
            policy = "Orphan"
        elif FINALIZER_FOREGROUND in finalizers:
            policy = "Foreground"
        else:
            policy = "Background"
        await self._delete(node, latest, policy)

    async def _classify(self, node, refs):
        """
        Sort references into solid, dangling and waiting (for dependents' deletion).

        @return: the three lists, or None when the object is cluster-scoped
            and names a namespaced owner, which can never resolve.
        """
        solid, dangling, waiting = [], [], []
        for ref in refs:
            provider = self._kinds.get((_group(ref.get("apiVersion") or ""), ref.get("kind")))
            if provider is None:
                # Not a kind this server stores: never collect because of it.
                self.log.debug("{node} names an owner of unknown kind {kind}", node=node,
                               kind=ref.get("kind"))
                solid.append(ref)
                continue
            namespaced = provider.info.namespaced
            if namespaced and not node.namespace:
                self.log.info("{node} is cluster-scoped but names a namespaced owner", node=node)
                self._report_invalid_namespace(node, ref)
                return None
            namespace = node.namespace if namespaced else ""
            absent_key = (ref["uid"], provider.info.group, ref.get("kind"), namespace,
                          ref.get("name"))
            if ref["uid"] in self._absent or absent_key in self._absent:
                dangling.append(ref)
                continue
            await self._pacer.tick()
            owner = await self._get(provider, namespace, ref.get("name") or "")
            if owner is None or owner["metadata"].get("uid") != ref["uid"]:
                self._absent.put(absent_key, True)
                dangling.append(ref)
            elif owner["metadata"].get("deletionTimestamp") and \
                    FINALIZER_FOREGROUND in _finalizers(owner["metadata"]):
                waiting.append(ref)
            else:
                solid.append(ref)
        return solid, dangling, waiting

    async def _finish_foreground(self, node):
        """Drop C{foregroundDeletion} once no dependent blocks; else push them on."""
        blocking = []
        for uid in self._dependents.get(node.uid, ()):
            dependent = self._nodes.get(uid)
            if dependent is not None and any(ref["uid"] == node.uid and _blocking(ref)
                                             for ref in dependent.owners):
                blocking.append(dependent)
        if not blocking:
            self.log.info("Dependents of {node} are gone; finishing its foreground deletion",
                          node=node)
            await self._remove_finalizer(node, FINALIZER_FOREGROUND)
            return
        for dependent in blocking:
            if not dependent.deleting_dependents:
                self._enqueue(ATTEMPT_DELETE, dependent.uid)

    # -- orphan -----------------------------------------------------------------

    async def _attempt_orphan(self, uid):
        node = self._nodes.get(uid)
        if node is None:
            return
        latest = await self._latest(node)
        if latest is None:
            return
        meta = latest["metadata"]
        if not meta.get("deletionTimestamp") or FINALIZER_ORPHAN not in _finalizers(meta):
            return
        dependents = [self._nodes[d] for d in list(self._dependents.get(uid, ()))
                      if d in self._nodes]
        for dependent in dependents:
            await self._remove_references(dependent, {uid})
        self.log.info("Orphaned {count} dependents of {node}", count=len(dependents), node=node)
        await self._remove_finalizer(node, FINALIZER_ORPHAN)

    # -- registry calls ---------------------------------------------------------

    async def _get(self, provider, namespace, name):
        return await provider.find(self._catalog.system_context(namespace), name)

    async def _latest(self, node):
        """The object of C{node} as stored now, or None if that object is gone."""
        await self._pacer.tick()
        obj = await self._get(node.provider, node.namespace, node.name)
        if obj is None or obj["metadata"].get("uid") != node.uid:
            return None
        return obj

    async def _patch(self, node, change):
        """
        Apply C{change(metadata)} to the stored object of C{node}; the registry
        re-applies it on conflicts. Nothing happens if the object is gone.
        """
        def apply(current):
            meta = current["metadata"]
            if meta.get("uid") != node.uid:
                raise _Replaced()
            change(meta)
            meta.pop("resourceVersion", None)
            return current

        await self._pacer.tick()
        try:
            await node.provider.patch(self._catalog.system_context(node.namespace), node.name,
                                      apply)
        except _Replaced:
            return
        except StatusError as e:
            if e.code != 404:
                raise

    async def _remove_references(self, node, uids):
        await self._patch(node, lambda meta: _set_list(meta, "ownerReferences", [
            ref for ref in meta.get("ownerReferences") or []
            if not (isinstance(ref, dict) and ref.get("uid") in uids)]))

    async def _unblock_references(self, node):
        def unblock(meta):
            for ref in meta.get("ownerReferences") or []:
                if isinstance(ref, dict) and _blocking(ref):
                    ref["blockOwnerDeletion"] = False

        await self._patch(node, unblock)

    async def _remove_finalizer(self, node, finalizer):
        await self._patch(node, lambda meta: _set_list(
            meta, "finalizers", [f for f in _finalizers(meta) if f != finalizer]))

    async def _delete(self, node, latest, policy):
        """
        Delete the object as read (uid and resourceVersion preconditions), so
        that an owner reference added meanwhile saves it; if other fields
        changed, retry once at the new version, else leave it to the queue.
        """
        ctx = self._catalog.system_context(node.namespace)
        version = latest["metadata"]["resourceVersion"]
        owners = latest["metadata"].get("ownerReferences")
        for attempt in (1, 2):
            await self._pacer.tick()
            try:
                await node.provider.delete(ctx, node.name, DeleteOptions(
                    uid=node.uid, resource_version=version, propagation_policy=policy))
            except StatusError as e:
                if e.code == 404:
                    return
                if e.code != 409 or attempt == 2:
                    raise
                live = await self._latest(node)
                if live is None:
                    return
                if live["metadata"].get("ownerReferences") != owners:
                    raise
                version = live["metadata"]["resourceVersion"]
                continue
            self.log.info("Deleted {node} (owners gone; propagation {policy})",
                          node=node, policy=policy)
            return
