# -*- test-case-name: tests.controllers.test_controllerref -*-
"""
Claiming dependents through owner references (upstream's
C{ControllerRefManager}, C{controller_ref_manager.go}).

An owner (a replica set, a Deployment) works only on the dependents it
controls, those whose C{ownerReferences} hold it with C{controller: true}.
Claiming reconciles that with its selector: a dependent it controls that no
longer matches is released (the reference is removed); an orphan that
matches is adopted (the reference is added), unless the owner or the orphan
is being deleted. Before the first adoption of a claim, the owner is read
again from the store (not the cache): an owner replaced under the same name,
or just deleted, must not take dependents. Both writes carry the
dependent's uid as a precondition, so a dependent replaced meanwhile under
the same name is left alone.
"""

from orchd.api.errors import StatusError
from orchd.api.selectors import NOTHING, selector_from_label_selector_object
from orchd.controllers.podstate import controller_ref
from orchd.registry.context import RequestContext


class _Replaced(Exception):
    """The object at the name has another uid now: the one claimed is gone."""


def owner_selector(owner):
    """
    The label selector of a workload's spec; a missing, malformed or empty
    one selects nothing (upstream's validation refuses those anyway).
    """
    spec = owner.get("spec")
    selector = spec.get("selector") if isinstance(spec, dict) else None
    if not isinstance(selector, dict):
        return NOTHING
    try:
        parsed = selector_from_label_selector_object(selector)
    except StatusError:
        return NOTHING
    return NOTHING if parsed.empty else parsed


def owner_reference(api_version, kind, owner):
    """The controlling reference to C{owner} that its dependents carry."""
    meta = owner["metadata"]
    return {"apiVersion": api_version, "kind": kind, "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}


class ControllerRefManager:
    """
    Claims dependents for one owner.

    @param provider: the registry (L{orchd.registry.generic.ResourceStore}) of
        the dependents, through which adoptions and releases are written.
    @param owner: the owner as cached.
    @param api_version: the owner's C{apiVersion}, as its references spell it.
    @param kind: the owner's kind.
    @param selector: a L{orchd.api.selectors.LabelSelector} of the owner.
    @param can_adopt: an async function raising L{StatusError} (or returning
        an error text) when the owner may not adopt: called once, before
        the first adoption.
    @param context: the L{RequestContext} writes are made with.
    """

    def __init__(self, provider, owner, api_version, kind, selector, can_adopt, context):
        self._provider = provider
        self._owner = owner
        self._uid = owner["metadata"]["uid"]
        self._reference = owner_reference(api_version, kind, owner)
        self._selector = selector
        self._can_adopt = can_adopt
        self._adopt_checked = None
        self._context = context

    def _matches(self, obj):
        return self._selector.matches(obj["metadata"].get("labels") or {})

    async def claim(self, candidates, keep=None):
        """
        The C{candidates} this owner controls once claimed, in order, and the
        errors of the adoptions and releases that failed.

        @param keep: an optional extra filter a candidate must pass to be claimed.
        """
        claimed, errors = [], []
        for obj in candidates:
            try:
                if await self._claim_one(obj, keep):
                    claimed.append(obj)
            except StatusError as e:
                errors.append(e)
        return claimed, errors

    async def _claim_one(self, obj, keep):
        meta = obj["metadata"]
        matches = self._matches(obj) and (keep is None or keep(obj))
        ref = controller_ref(meta)
        owner_deleting = bool(self._owner["metadata"].get("deletionTimestamp"))
        if ref is not None:
            if ref["uid"] != self._uid:
                return False
            if matches:
                return True
            if not owner_deleting:
                await self._release(obj)
            return False
        if owner_deleting or not matches or meta.get("deletionTimestamp"):
            return False
        owner_namespace = self._owner["metadata"].get("namespace", "")
        if owner_namespace and owner_namespace != meta.get("namespace", ""):
            return False
        return await self._adopt(obj)

    async def _check_adoption(self):
        if self._adopt_checked is None:
            try:
                await self._can_adopt()
                self._adopt_checked = ""
            except StatusError as e:
                self._adopt_checked = e.message
        return self._adopt_checked

    async def _adopt(self, obj):
        meta = obj["metadata"]
        refused = await self._check_adoption()
        if refused:
            info = self._provider.info
            raise StatusError.conflict(
                info.resource, info.group, meta["name"],
                f"can't adopt {info.kind} {meta.get('namespace', '')}/{meta['name']} "
                f"({meta.get('uid', '')}): {refused}")
        uid, reference = meta.get("uid"), self._reference

        def adopt(current):
            current_meta = current["metadata"]
            if current_meta.get("uid") != uid:
                raise _Replaced()
            refs = [r for r in current_meta.get("ownerReferences") or ()
                    if not (isinstance(r, dict) and r.get("uid") == reference["uid"])]
            current_meta["ownerReferences"] = refs + [dict(reference)]
            current_meta.pop("resourceVersion", None)
            return current

        return await self._write(meta["name"], adopt)

    async def _release(self, obj):
        meta = obj["metadata"]
        uid, owner_uid = meta.get("uid"), self._uid

        def release(current):
            current_meta = current["metadata"]
            if current_meta.get("uid") != uid:
                raise _Replaced()
            refs = [r for r in current_meta.get("ownerReferences") or ()
                    if not (isinstance(r, dict) and r.get("uid") == owner_uid)]
            if refs:
                current_meta["ownerReferences"] = refs
            else:
                current_meta.pop("ownerReferences", None)
            current_meta.pop("resourceVersion", None)
            return current

        await self._write(meta["name"], release)

    async def _write(self, name, change):
        """Patch the dependent; False when it is gone or was replaced."""
        try:
            await self._provider.patch(self._context, name, change)
        except _Replaced:
            return False
        except StatusError as e:
            if e.code == 404:
                return False
            raise
        return True


def recheck_owner(provider, owner, system_user):
    """
    An upstream C{RecheckDeletionTimestamp}: the C{can_adopt} of a
    L{ControllerRefManager} that reads the owner from the store and refuses
    when it is gone, replaced (another uid) or being deleted.
    """
    meta = owner["metadata"]

    async def check():
        fresh = await provider.find(RequestContext(system_user, meta.get("namespace", "")),
                                    meta["name"])
        info = provider.info
        where = f"{info.kind} {meta.get('namespace', '')}/{meta['name']}"
        if fresh is None or fresh["metadata"].get("uid") != meta["uid"]:
            got = fresh["metadata"].get("uid") if fresh is not None else ""
            raise StatusError.conflict(info.resource, info.group, meta["name"],
                                       f"original {where} is gone: got uid {got}, "
                                       f"wanted {meta['uid']}")
        if fresh["metadata"].get("deletionTimestamp"):
            raise StatusError.conflict(info.resource, info.group, meta["name"],
                                       f"{where} has just been deleted at "
                                       f"{fresh['metadata']['deletionTimestamp']}")
    return check
