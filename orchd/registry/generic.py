# -*- test-case-name: tests.server.test_handlers,tests.server.test_apply,tests.registry.test_stale_rewrite -*-
"""
The one store every kind goes through: create, read, update, delete on IStore.

It runs the shared sequence (server-kept metadata, strategy, admission,
optimistic concurrency, finalizers) for a kind described by its
L{orchd.api.kinds.KindInfo} and its strategy; nothing here knows a kind.
Objects are JSON-shaped dicts; the store keeps them as JSON bytes with the
resourceVersion left out, since that is the store's own revision.
"""

import uuid

import orjson

from orchd.admission.interfaces import CREATE, DELETE, UPDATE, AdmissionAttributes
from orchd.api import meta as metadata
from orchd.api.errors import FieldError, StatusError
from orchd.api.fieldmanager import reset_fields
from orchd.api.meta import FINALIZER_FOREGROUND, FINALIZER_ORPHAN
from orchd.registry.reading import ResourceReads
from orchd.storage.interfaces import ConflictError, KeyExistsError, KeyNotFoundError

_NOT_SPEC = frozenset(("metadata", "status", "apiVersion", "kind"))
_MAX_RETRIES = 16


def _spec(obj):
    return {k: v for k, v in obj.items() if k not in _NOT_SPEC}


def _copy(obj):
    return orjson.loads(orjson.dumps(obj))


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
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = metadata.rfc3339(self.clock.seconds())
        meta["generation"] = 1
        generated = False
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = metadata.generate_name(meta["generateName"], self._random)
            generated = True
        name = meta.get("name", "")
        attributes = AdmissionAttributes(CREATE, info, ctx.namespace, name, obj, None, ctx.user,
                                         dry_run=ctx.dry_run, warn=ctx.warn)
        await self.admission.admit(attributes)
        if info.has_status and not self.strategy.keep_status_on_create:
            obj.pop("status", None)
        self.strategy.prepare_for_create(ctx, obj)
        errors = metadata.validate_object_meta(obj.get("metadata"), info.namespaced, info.name_rule)
        errors += self.strategy.validate(ctx, obj)
        if errors:
            raise self._invalid(name, errors)
        await self.admission.validate(attributes)
        if ctx.dry_run:
            return obj
        taken = await self.strategy.begin_create(ctx, obj)
        try:
            kv = await self.store.create(self._key(ctx.namespace, name), self._encode(obj))
        except BaseException as e:
            if taken is not None:
                await taken.revert()
            if not isinstance(e, KeyExistsError):
                raise
            if generated:
                raise StatusError.generated_name_taken(info.resource, info.group, name) from None
            raise StatusError.already_exists(info.resource, info.group, name) from None
        meta["resourceVersion"] = str(kv.mod_revision)
        return obj

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

    # -- update -------------------------------------------------------------

    async def update(self, ctx, name, obj, subresource=""):
        """
        Replace an object (PUT).

        @return: C{(object, created)}; C{created} when the kind creates on update.
        """
        meta = self._check_namespace(ctx, obj)
        if meta.get("name") != name:
            raise StatusError.bad_request(
                f"the name of the object ({meta.get('name', '')}) does not match the name on "
                f"the URL ({name})")
        wanted = meta.get("resourceVersion") or ""
        if not wanted and not self.strategy.allow_unconditional_update:
            raise self._invalid(name, [FieldError.required(
                "metadata.resourceVersion", "must be specified for an update")])
        key = self._key(ctx.namespace, name)
        for _ in range(_MAX_RETRIES):
            kv = await self.store.get(key)
            if kv is None:
                if self.strategy.allow_create_on_update and not subresource:
                    meta.pop("resourceVersion", None)
                    return await self.create(ctx, obj), True
                raise self._not_found(name)
            if wanted and wanted != str(kv.mod_revision):
                raise StatusError.stale(self.info.resource, self.info.group, name)
            candidate = _copy(obj) if not wanted else obj
            result = await self._write_update(ctx, kv, candidate, subresource)
            if result is not None:
                return result, False
            if wanted:
                raise StatusError.stale(self.info.resource, self.info.group, name)
        raise self._too_contended(name)

    async def patch(self, ctx, name, apply_patch, subresource=""):
        """
        Patch an object: C{apply_patch(current_object) -> new object}.

        The patch is re-applied to a fresh read when another write wins the
        race, unless the patch itself pinned a resourceVersion.
        """
        key = self._key(ctx.namespace, name)
        for _ in range(_MAX_RETRIES):
            kv = await self.store.get(key)
            if kv is None:
                raise self._not_found(name)
            current = self.decode(kv)
            obj = apply_patch(current)
            if not isinstance(obj, dict):
                raise StatusError.bad_request("the patch must produce an object")
            meta = self._check_namespace(ctx, obj)
            if meta.get("name") != name:
                raise StatusError.bad_request(
                    f"the name of the object ({meta.get('name', '')}) does not match the name "
                    f"on the URL ({name})")
            wanted = meta.get("resourceVersion") or ""
            if wanted and wanted != str(kv.mod_revision):
                raise StatusError.stale(self.info.resource, self.info.group, name)
            result = await self._write_update(ctx, kv, obj, subresource)
            if result is not None:
                return result
            if wanted:
                raise StatusError.stale(self.info.resource, self.info.group, name)
        raise self._too_contended(name)

    def _too_contended(self, name):
        return StatusError.conflict(
            self.info.resource, self.info.group, name,
            "the object is being modified by too many writers; try again")

    async def _write_update(self, ctx, kv, obj, subresource, tracked=False):
        """
        Validate and compare-and-swap C{obj} over C{kv}.

        @return: the stored object, or None when another write won the race.
        """
        info, strategy = self.info, self.strategy
        old = self.decode(kv)
        name = old["metadata"]["name"]
        if subresource:
            obj = strategy.subresource_update(subresource, obj, _copy(old))
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
        attributes = AdmissionAttributes(UPDATE, info, ctx.namespace, name, obj, old, ctx.user,
                                         subresource=subresource, dry_run=ctx.dry_run,
                                         warn=ctx.warn)
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
        # An unchanged object is not written again, unless it is stored
        # under an encryption key that is no longer the first: replacing
        # every object is how a rotation reaches what is already stored.
        if obj == old and not kv.stale:
            return old
        if ctx.dry_run:
            return obj
        if meta.get("deletionTimestamp") and not meta.get("finalizers") \
                and not strategy.pending_finalizers(obj):
            try:
                await self.store.delete(kv.key, kv.mod_revision)
            except (ConflictError, KeyNotFoundError):
                return None
            await strategy.after_delete(ctx, old)
            return obj
        changes = await strategy.begin_update(ctx, obj, old)
        try:
            stored = await self.store.update(kv.key, self._encode(obj), kv.mod_revision)
        except BaseException as e:
            if changes is not None:
                await changes.revert()
            if isinstance(e, ConflictError):
                return None
            if isinstance(e, KeyNotFoundError):
                raise self._not_found(name) from None
            raise
        if changes is not None:
            await changes.commit()
        meta["resourceVersion"] = str(stored.mod_revision)
        return obj

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
        key = self._key(ctx.namespace, name)
        wanted = (applied.get("metadata") or {}).get("resourceVersion") or ""
        for _ in range(_MAX_RETRIES):
            kv = await self.store.get(key)
            if kv is None:
                if subresource:
                    raise self._not_found(name)
                if wanted:
                    raise StatusError.stale(info.resource, info.group, name)
                obj = manager.apply(None, applied, ctx.field_manager, force, info.api_version,
                                    info.group, info.kind,
                                    ignored=reset_fields(info.has_status))
                try:
                    return await self.create(ctx, obj, tracked=True), True
                except StatusError as e:
                    if e.reason != "AlreadyExists":
                        raise
                    continue
            if wanted and wanted != str(kv.mod_revision):
                raise StatusError.stale(info.resource, info.group, name)
            obj = manager.apply(self.decode(kv), applied, ctx.field_manager, force,
                                info.api_version, info.group, info.kind, subresource,
                                ignored=reset_fields(info.has_status, subresource))
            self._check_namespace(ctx, obj)
            result = await self._write_update(ctx, kv, obj, subresource, tracked=True)
            if result is not None:
                return result, False
        raise self._too_contended(name)

    def _track(self, ctx, old, new, subresource=""):
        """C{new} with managedFields crediting C{ctx.field_manager} with what it changed."""
        if self.field_manager is None or not ctx.field_manager:
            return new
        info = self.info
        return self.field_manager.update(
            old, new, ctx.field_manager, info.api_version, info.group, info.kind, subresource,
            ignored=reset_fields(info.has_status, subresource))

    # -- delete -------------------------------------------------------------

    async def delete(self, ctx, name, options=None):
        """
        Delete an object, or mark it deleted while finalizers hold it.

        @return: C{(object, removed)}: the last state, and whether it is gone.
        """
        key = self._key(ctx.namespace, name)
        for _ in range(_MAX_RETRIES):
            kv = await self.store.get(key)
            if kv is None:
                raise self._not_found(name)
            obj = self.decode(kv)
            self._check_preconditions(obj, kv, options)
            attributes = AdmissionAttributes(DELETE, self.info, ctx.namespace, name, None, obj,
                                             ctx.user, dry_run=ctx.dry_run)
            await self.admission.validate(attributes)
            meta = obj["metadata"]
            self.strategy.prepare_for_delete(ctx, obj)
            finalizers = _propagation_finalizers(
                meta.get("finalizers") or [], options.propagation_policy if options else None)
            if finalizers != (meta.get("finalizers") or []):
                meta["finalizers"] = finalizers
            if meta.get("finalizers") or self.strategy.pending_finalizers(obj):
                if meta.get("deletionTimestamp") and obj == self.decode(kv):
                    return obj, False
                if not meta.get("deletionTimestamp"):
                    meta["deletionTimestamp"] = metadata.rfc3339(self.clock.seconds())
                    meta["deletionGracePeriodSeconds"] = 0
                    meta["generation"] = meta.get("generation", 1) + 1
                if ctx.dry_run:
                    return obj, False
                try:
                    stored = await self.store.update(key, self._encode(obj), kv.mod_revision)
                except (ConflictError, KeyNotFoundError):
                    continue
                meta["resourceVersion"] = str(stored.mod_revision)
                return obj, False
            if ctx.dry_run:
                return obj, True
            try:
                await self.store.delete(key, kv.mod_revision)
            except (ConflictError, KeyNotFoundError):
                continue
            await self.strategy.after_delete(ctx, obj)
            return obj, True
        raise self._too_contended(name)

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
        """Delete every selected object; returns the list of what was deleted."""
        listed = await self.list(ctx, list_options)
        deleted = []
        for item in listed["items"]:
            item_ctx = ctx
            if self.info.namespaced and not ctx.namespace:
                item_ctx = type(ctx)(ctx.user, item["metadata"]["namespace"], ctx.dry_run,
                                     ctx.field_manager)
            try:
                obj, _ = await self.delete(item_ctx, item["metadata"]["name"], delete_options)
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
