# -*- test-case-name: tests.server.test_handlers,tests.server.test_apply,tests.registry.test_stale_rewrite -*-
"""
The one store every kind goes through: create, read, update, delete on IStore.

It runs the shared sequence (server-kept metadata, strategy, admission,
optimistic concurrency, finalizers) for a kind described by its
L{orchd.api.kinds.KindInfo} and its strategy; nothing here knows a kind.
Objects are JSON-shaped dicts; the store keeps them as JSON bytes with the
resourceVersion left out, since that is the store's own revision.
"""

import orjson

from orchd.admission.interfaces import CREATE, DELETE, UPDATE, AdmissionAttributes
from orchd.api import meta as metadata
from orchd.api.errors import FieldError, StatusError
from orchd.api.fieldmanager import reset_fields
from orchd.api.meta import FINALIZER_FOREGROUND, FINALIZER_ORPHAN
from orchd.registry.gracefuldelete import GRACEFUL, PENDING, before_delete
from orchd.registry.guaranteed import Write, guaranteed_update
from orchd.registry.reading import ResourceReads
from orchd.storage.interfaces import KeyExistsError, KeyValue

_NOT_SPEC = frozenset(("metadata", "status", "apiVersion", "kind"))


def _spec(obj):
    return {k: v for k, v in obj.items() if k not in _NOT_SPEC}


def _copy(obj):
    return orjson.loads(orjson.dumps(obj))


def _carry_managed_fields(source, target):
    managed = source["metadata"].get("managedFields")
    if managed is None:
        target["metadata"].pop("managedFields", None)
    else:
        target["metadata"]["managedFields"] = managed


class ResourceStore(ResourceReads):
    """
    Generic CRUD for one resource, through its strategy, on an IStore.

    Reads come from L{ResourceReads}; this adds every write.
    """

    def _encode(self, obj):
        meta = obj["metadata"]
        version = meta.pop("resourceVersion", None)
        try:
            return orjson.dumps(obj)
        finally:
            if version is not None:
                meta["resourceVersion"] = version

    # -- create -------------------------------------------------------------

    async def create(self, ctx, obj, tracked=False):
        """
        Store a new object; returns it as stored.

        @param tracked: True when C{obj}'s managedFields are already final
            (server-side apply); otherwise the caller's manager takes every field.
        """
        obj, generated = await self._prepare_create(ctx, obj, tracked)
        if ctx.dry_run:
            return obj
        meta = obj["metadata"]
        name = meta.get("name", "")
        taken = await self.strategy.begin_create(ctx, obj)
        try:
            kv = await self.store.create(self._key(ctx.namespace, name), self._encode(obj))
        except BaseException as e:
            if taken is not None:
                await taken.revert()
            if not isinstance(e, KeyExistsError):
                raise
            info = self.info
            if generated:
                raise StatusError.generated_name_taken(info.resource, info.group, name) from None
            raise StatusError.already_exists(info.resource, info.group, name) from None
        meta["resourceVersion"] = str(kv.mod_revision)
        return obj

    async def _prepare_create(self, ctx, obj, tracked):
        """
        A new object, admitted and validated, ready for the store.

        @return: C{(object, whether its name was generated)}.
        """
        info = self.info
        meta = self._check_namespace(ctx, obj)
        if meta.get("resourceVersion"):
            raise StatusError.bad_request(
                "resourceVersion should not be set on objects to be created")
        for field in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(field, None)
        if not tracked:
            obj = self._track(ctx, None, obj)
            meta = obj["metadata"]
        meta["uid"] = metadata.new_uid()
        meta["creationTimestamp"] = metadata.rfc3339(self.clock.seconds())
        meta["generation"] = 1
        generated = False
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = metadata.generate_name(meta["generateName"], self._random)
            generated = True
        name = meta.get("name", "")
        attributes = AdmissionAttributes.of_request(ctx, CREATE, info, name, obj, None)
        await self.admission.admit(attributes)
        if info.has_status and not self.strategy.keep_status_on_create:
            obj.pop("status", None)
        self.strategy.prepare_for_create(ctx, obj)
        errors = metadata.validate_object_meta(obj.get("metadata"), info.namespaced, info.name_rule)
        errors += self.strategy.validate(ctx, obj)
        if errors:
            raise self._invalid(name, errors)
        await self.admission.validate(attributes)
        return obj, generated

    async def _created_on_write(self, ctx, obj, tracked=False):
        """
        The L{Write} creating C{obj} where a write found no object (PUT of
        a kind that creates on update, server-side apply); its detail is True.
        """
        obj, _ = await self._prepare_create(ctx, obj, tracked)
        if ctx.dry_run:
            return Write.keep(obj, detail=True)
        return Write.put(obj, self._encode, detail=True,
                         begin=lambda: self.strategy.begin_create(ctx, obj))

    def _check_namespace(self, ctx, obj):
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        elif not isinstance(meta, dict):
            raise StatusError.bad_request("metadata must be an object")
        if self.info.namespaced:
            namespace = meta.get("namespace")
            if namespace and namespace != ctx.namespace:
                raise StatusError.bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request")
            meta["namespace"] = ctx.namespace
        else:
            meta.pop("namespace", None)
        return meta

    def _check_name(self, ctx, obj, name):
        """
        The object's metadata, its namespace and name checked against the
        URL's: a body may not name another object than the one it is sent to.
        """
        meta = self._check_namespace(ctx, obj)
        if meta.get("name") != name:
            raise StatusError.bad_request(
                f"the name of the object ({meta.get('name', '')}) does not match the name on "
                f"the URL ({name})")
        return meta

    # -- the read-modify-write ------------------------------------------------

    async def _guaranteed(self, ctx, name, try_update, suggestion=None):
        """
        L{guaranteed_update} of the object C{name}, for C{ctx}.

        Warnings an attempt gave (admission, field validation) are dropped
        when a conflict sends the write round again: they spoke of a state
        that lost, and the next attempt says again what still holds.

        Without a C{suggestion}, the first attempt starts from the watch
        cache's copy when it has one, as upstream's cacher hands its own to
        the store's C{GuaranteedUpdate}: a write through this process has
        reached the cache when it returns, and a copy out of date only
        costs the read it saved (L{guaranteed_update} believes nothing of it
        but what the store's compare-and-swap confirms).
        """
        warnings = ctx.warnings
        kept = len(warnings)

        async def attempt(kv):
            del warnings[kept:]
            return await try_update(kv)

        info = self.info
        key = self._key(ctx.namespace, name)
        if suggestion is None and self.cache is not None:
            suggestion = self.cache.get(key)
        return await guaranteed_update(
            self.store, key, attempt,
            lambda: StatusError.stale(info.resource, info.group, name), suggestion)

    @staticmethod
    def _written(write):
        """The object of a successful write, with the resourceVersion it was stored at."""
        if write.stored is not None:
            write.obj["metadata"]["resourceVersion"] = str(write.stored.mod_revision)
        return write.obj

    # -- update -------------------------------------------------------------

    async def update(self, ctx, name, obj, subresource=""):
        """
        Replace an object (PUT).

        @return: C{(object, created)}; C{created} when the kind creates on update.
        """
        meta = self._check_name(ctx, obj, name)
        wanted = meta.get("resourceVersion") or ""
        if not wanted and not self.strategy.allow_unconditional_update:
            raise self._invalid(name, [FieldError.required(
                "metadata.resourceVersion", "must be specified for an update")])
        create_on_update = self.strategy.allow_create_on_update and not subresource
        # Each attempt shapes the object it writes in place, so it works on
        # a copy whenever a later attempt may start from the caller's object
        # again: with a resourceVersion, a later attempt is stale before it
        # reads it, unless the object is gone and may be created anew.
        pristine = not wanted or create_on_update

        async def try_update(kv):
            candidate = _copy(obj) if pristine else obj
            if kv is None:
                if not create_on_update:
                    raise self._not_found(name)
                candidate["metadata"].pop("resourceVersion", None)
                return await self._created_on_write(ctx, candidate)
            if wanted and wanted != str(kv.mod_revision):
                raise StatusError.stale(self.info.resource, self.info.group, name)
            return await self._updated(ctx, kv, candidate, subresource)

        write = await self._guaranteed(ctx, name, try_update)
        return self._written(write), bool(write.detail)

    async def patch(self, ctx, name, apply_patch, subresource=""):
        """
        Patch an object: C{apply_patch(current_object) -> new object}.

        The patch is re-applied to a fresh read when another write wins the
        race, unless the patch itself pinned a resourceVersion.
        """
        async def try_update(kv):
            if kv is None:
                raise self._not_found(name)
            obj = apply_patch(self.decode(kv))
            if not isinstance(obj, dict):
                raise StatusError.bad_request("the patch must produce an object")
            wanted = self._check_name(ctx, obj, name).get("resourceVersion") or ""
            if wanted and wanted != str(kv.mod_revision):
                raise StatusError.stale(self.info.resource, self.info.group, name)
            return await self._updated(ctx, kv, obj, subresource)

        return self._written(await self._guaranteed(ctx, name, try_update))

    async def rewrite(self, ctx, name, change, preconditions=None, suggestion=None):
        """
        A write the registry decides itself from the stored object, as
        upstream's binding writes its storage directly: no strategy, no
        admission of the object, no managed fields, no generation bump.

        @param change: C{change(obj)} edits the stored object (a fresh copy
            each time: it is called again after a lost race) and returns it,
            or returns None to write nothing; it raises a StatusError to
            refuse. A missing object is 404 before it is called.
        @param preconditions: None, or what the object's C{uid} and
            C{resourceVersion} must be (a L{orchd.registry.options.DeleteOptions}
            read for those two), else 409.
        @param suggestion: the object's L{KeyValue} as last seen (a watch
            cache's), to start from instead of a read.
        @return: the object as written (as stored, when nothing was).
        """
        async def try_rewrite(kv):
            if kv is None:
                raise self._not_found(name)
            obj = self.decode(kv)
            self._check_preconditions(obj, kv, preconditions)
            obj = change(obj)
            if obj is None:
                return Write.keep(self.decode(kv))
            if ctx.dry_run:
                return Write.keep(obj)
            return Write.put(obj, self._encode)

        return self._written(await self._guaranteed(ctx, name, try_rewrite, suggestion))

    async def _updated(self, ctx, kv, obj, subresource, tracked=False):
        """
        The L{Write} that replaces C{kv} with C{obj}, validated and admitted.

        C{obj} is shaped in place (server-kept metadata, the strategy, mutating
        admission). An unchanged object is kept, unless it is stored under an
        encryption key that is no longer the first: replacing every object is
        how a rotation reaches what is already stored. An object whose last
        finalizer went while it is being deleted is removed.
        """
        info, strategy = self.info, self.strategy
        old = self.decode(kv)
        name = old["metadata"]["name"]
        if subresource:
            shaped = strategy.subresource_update(subresource, obj, _copy(old))
            if tracked:
                # An apply's managedFields were decided on what it sent: keep them.
                _carry_managed_fields(obj, shaped)
            obj = shaped
        elif info.has_status:
            if "status" in old:
                obj["status"] = old["status"]
            else:
                obj.pop("status", None)
        if not tracked:
            obj = self._track(ctx, old, obj, subresource)
        meta = obj["metadata"]
        old_meta = old["metadata"]
        meta["generation"] = old_meta.get("generation", 1)
        if not meta.get("uid"):
            meta["uid"] = old_meta.get("uid")
        meta["creationTimestamp"] = old_meta.get("creationTimestamp")
        for field in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        if old_meta.get("deletionTimestamp") and _added_finalizers(meta, old_meta):
            raise self._invalid(name, [FieldError.forbidden(
                "metadata.finalizers",
                "no new finalizers can be added if the object is being deleted")])
        attributes = AdmissionAttributes.of_request(ctx, UPDATE, info, name, obj, old,
                                                    subresource)
        await self.admission.admit(attributes)
        if not subresource:
            # A subresource write was already shaped by subresource_update.
            strategy.prepare_for_update(ctx, obj, old)
        if _spec(obj) != _spec(old):
            meta["generation"] = meta["generation"] + 1
        errors = metadata.validate_object_meta(meta, info.namespaced, info.name_rule)
        errors += metadata.validate_object_meta_update(meta, old_meta)
        errors += strategy.validate_update(ctx, obj, old)
        if errors:
            raise self._invalid(name, errors)
        await self.admission.validate(attributes)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if obj == old and not kv.stale:
            return Write.keep(old)
        if ctx.dry_run:
            return Write.keep(obj)
        # Gone once nothing holds it, unless a graceful deletion's time is still running.
        if meta.get("deletionTimestamp") and not meta.get("finalizers") \
                and not meta.get("deletionGracePeriodSeconds") \
                and not strategy.pending_finalizers(obj):
            return Write.delete(obj, after=lambda: strategy.after_delete(ctx, old))
        return Write.put(obj, self._encode, begin=lambda: strategy.begin_update(ctx, obj, old))

    async def apply(self, ctx, name, applied, force, subresource=""):
        """
        Server-side apply: merge C{applied} as C{ctx.field_manager}'s intent.

        Creates the object when it does not exist. Conflicts with other
        managers' fields are 409 unless C{force} takes them over.

        @return: C{(object, created)}.
        """
        info, manager = self.info, self.field_manager
        if manager is None:
            raise StatusError.unsupported_media_type(
                "application/apply-patch+yaml", ("application/merge-patch+json",))
        wanted = (applied.get("metadata") or {}).get("resourceVersion") or ""

        async def try_update(kv):
            if kv is None:
                if subresource:
                    raise self._not_found(name)
                if wanted:
                    raise StatusError.stale(info.resource, info.group, name)
                obj = manager.apply(None, applied, ctx.field_manager, force, info.api_version,
                                    info.group, info.kind,
                                    ignored=reset_fields(info.has_status))
                return await self._created_on_write(ctx, obj, tracked=True)
            if wanted and wanted != str(kv.mod_revision):
                raise StatusError.stale(info.resource, info.group, name)
            obj = manager.apply(self.decode(kv), applied, ctx.field_manager, force,
                                info.api_version, info.group, info.kind, subresource,
                                ignored=reset_fields(info.has_status, subresource))
            self._check_namespace(ctx, obj)
            return await self._updated(ctx, kv, obj, subresource, tracked=True)

        write = await self._guaranteed(ctx, name, try_update)
        return self._written(write), bool(write.detail)

    def _track(self, ctx, old, new, subresource=""):
        """C{new} with managedFields crediting C{ctx.field_manager} with what it changed."""
        if self.field_manager is None or not ctx.field_manager:
            return new
        info = self.info
        return self.field_manager.update(
            old, new, ctx.field_manager, info.api_version, info.group, info.kind, subresource,
            ignored=reset_fields(info.has_status, subresource))

    # -- delete -------------------------------------------------------------

    async def delete(self, ctx, name, options=None, suggestion=None):
        """
        Delete an object, or mark it deleted while finalizers hold it or
        while it is given time to go (L{orchd.registry.gracefuldelete}).

        @param suggestion: the object's L{KeyValue} as last seen (e.g. in a
            listing), to start from instead of a read.
        @return: C{(object, removed)}: the last state, and whether it is gone.
        """
        async def try_delete(kv):
            if kv is None:
                raise self._not_found(name)
            obj = self.decode(kv)
            self._check_preconditions(obj, kv, options)
            attributes = AdmissionAttributes.of_request(ctx, DELETE, self.info, name, None, obj)
            await self.admission.validate(attributes)
            meta = obj["metadata"]
            requested = options.grace_period_seconds if options else None
            outcome, grace = before_delete(self.strategy, ctx, obj, requested,
                                           self.clock.seconds())
            if outcome == PENDING:
                # Finalizers cannot change through a delete once it is under way.
                return Write.keep(self.decode(kv), detail=False)
            self.strategy.prepare_for_delete(ctx, obj)
            finalizers = _propagation_finalizers(
                meta.get("finalizers") or [], options.propagation_policy if options else None)
            if finalizers != (meta.get("finalizers") or []):
                meta["finalizers"] = finalizers
            held = bool(meta.get("finalizers")) or self.strategy.pending_finalizers(obj)
            if outcome == GRACEFUL and (grace > 0 or held):
                if ctx.dry_run:
                    return Write.keep(obj, detail=False)
                return Write.put(obj, self._encode, detail=False)
            if held:
                if meta.get("deletionTimestamp") and obj == self.decode(kv):
                    return Write.keep(obj, detail=False)
                if not meta.get("deletionTimestamp"):
                    meta["deletionTimestamp"] = metadata.rfc3339(self.clock.seconds())
                    meta["deletionGracePeriodSeconds"] = 0
                    meta["generation"] = meta.get("generation", 1) + 1
                if ctx.dry_run:
                    return Write.keep(obj, detail=False)
                return Write.put(obj, self._encode, detail=False)
            if ctx.dry_run:
                return Write.keep(obj, detail=True)
            return Write.delete(obj, detail=True,
                                after=lambda: self.strategy.after_delete(ctx, obj))

        write = await self._guaranteed(ctx, name, try_delete, suggestion)
        return self._written(write), write.detail

    def _check_preconditions(self, obj, kv, options):
        if options is None:
            return
        meta = obj["metadata"]
        if options.uid is not None and options.uid != meta.get("uid"):
            raise self._precondition_failed(
                kv, f"UID in precondition: {options.uid}, UID in object meta: {meta.get('uid')}")
        if options.resource_version is not None and \
                options.resource_version != meta["resourceVersion"]:
            raise self._precondition_failed(
                kv, f"ResourceVersion in precondition: {options.resource_version}, "
                    f"ResourceVersion in object meta: {meta['resourceVersion']}")

    def _precondition_failed(self, kv, why):
        name = kv.key.rsplit("/", 1)[-1]
        return StatusError.conflict(
            self.info.resource, self.info.group, name,
            f"StorageError: invalid object, Code: 4, Key: {kv.key}, ResourceVersion: 0, "
            f"AdditionalErrorMsg: Precondition failed: {why}")

    async def delete_collection(self, ctx, list_options, delete_options=None):
        """
        Delete every selected object; returns the list of what was deleted.

        Each delete starts from the object as listed, not from a read of
        its own: one that changed since is decided again when its
        compare-and-swap fails.
        """
        listed = await self.list(ctx, list_options)
        deleted = []
        for item in listed["items"]:
            item_meta = item["metadata"]
            item_ctx = ctx
            if self.info.namespaced and not ctx.namespace:
                item_ctx = type(ctx)(ctx.user, item_meta["namespace"], ctx.dry_run,
                                     ctx.field_manager)
            name = item_meta["name"]
            seen = KeyValue(self._key(item_ctx.namespace, name), self._encode(item), 0,
                            int(item_meta["resourceVersion"]))
            try:
                obj, _ = await self.delete(item_ctx, name, delete_options, seen)
            except StatusError as e:
                if e.code == 404:
                    continue
                raise
            deleted.append(obj)
        listed["items"] = deleted
        listed["metadata"].pop("continue", None)
        listed["metadata"].pop("remainingItemCount", None)
        return listed


def _propagation_finalizers(finalizers, policy):
    """
    The finalizers that carry a delete's propagation policy to the garbage collector.

    C{Orphan} and C{Foreground} hold the object until the collector has
    orphaned or deleted its dependents; C{Background} (and no policy) leaves
    the dependents to be collected after the owner is gone.
    """
    kept = [f for f in finalizers if f not in (FINALIZER_ORPHAN, FINALIZER_FOREGROUND)
            or policy is None]
    if policy == "Orphan":
        kept.append(FINALIZER_ORPHAN)
    elif policy == "Foreground":
        kept.append(FINALIZER_FOREGROUND)
    return kept


def _added_finalizers(meta, old_meta):
    return bool(set(meta.get("finalizers") or ()) - set(old_meta.get("finalizers") or ()))
