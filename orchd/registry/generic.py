# -*- test-case-name: tests.registry.test_generic -*-
"""
The one store every kind goes through: create, read, update, delete on IStore.

It runs the shared sequence (server-kept metadata, strategy, admission,
optimistic concurrency, finalizers) for a kind described by its
L{orchd.api.kinds.KindInfo} and its strategy; nothing here knows a kind.
Objects are JSON-shaped dicts; the store keeps them as JSON bytes with the
resourceVersion left out, since that is the store's own revision.
"""

import random
import time
import uuid

import orjson

from orchd.admission.interfaces import CREATE, DELETE, UPDATE, AdmissionAttributes
from orchd.api import meta as metadata
from orchd.api.errors import FieldError, StatusError
from orchd.api.fieldmanager import reset_fields
from orchd.api.meta import FINALIZER_FOREGROUND, FINALIZER_ORPHAN
from orchd.registry.options import decode_continue, encode_continue
from orchd.storage.interfaces import (
    CompactedError, ConflictError, FutureRevisionError, KeyExistsError, KeyNotFoundError,
)
from orchd.storage.watchcache import CacheWatcher

_NOT_SPEC = frozenset(("metadata", "status", "apiVersion", "kind"))
_LIST_PAGE = 1000
_MAX_RETRIES = 16


def rfc3339(seconds):
    """RFC 3339 UTC with second precision, as object timestamps are written."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _spec(obj):
    return {k: v for k, v in obj.items() if k not in _NOT_SPEC}


def _copy(obj):
    return orjson.loads(orjson.dumps(obj))


class ResourceStore:
    """
    Generic CRUD for one resource, through its strategy, on an IStore.

    @param info: the kind's L{KindInfo}.
    @param strategy: the kind's L{orchd.registry.strategy.IStrategy}.
    @param store: the L{orchd.storage.interfaces.IStore}.
    @param clock: an C{IReactorTime}, for timestamps.
    @param admission: an L{orchd.admission.chain.AdmissionChain}.
    """

    def __init__(self, info, strategy, store, clock, admission, random_source=None, cache=None,
                 field_manager=None):
        self.info = info
        self.strategy = strategy
        self.store = store
        self.clock = clock
        self.admission = admission
        self._random = random_source or random.SystemRandom()
        #: The resource's L{orchd.storage.watchcache.WatchCache}, shared by versions.
        self.cache = cache
        #: The L{orchd.api.fieldmanager.FieldManager} keeping managedFields, if any.
        self.field_manager = field_manager

    # -- encoding -----------------------------------------------------------

    def decode(self, kv):
        """The object of a stored KeyValue, with its resourceVersion."""
        obj = orjson.loads(kv.value)
        obj["metadata"]["resourceVersion"] = str(kv.mod_revision)
        return obj

    def _encode(self, obj):
        meta = obj["metadata"]
        version = meta.pop("resourceVersion", None)
        try:
            return orjson.dumps(obj)
        finally:
            if version is not None:
                meta["resourceVersion"] = version

    def _key(self, namespace, name):
        return self.info.key(namespace, name)

    def _not_found(self, name):
        return StatusError.not_found(self.info.resource, self.info.group, name)

    def _invalid(self, name, errors):
        return StatusError.invalid(self.info.kind, self.info.group, name, errors)

    # -- reads --------------------------------------------------------------

    async def get(self, ctx, name):
        kv = await self.store.get(self._key(ctx.namespace, name))
        if kv is None:
            raise self._not_found(name)
        return self.decode(kv)

    async def list(self, ctx, options):
        """
        The list object of this resource in C{ctx.namespace} (all when empty).

        Pages by C{options.limit}; a page holds only matching objects, so it
        may read several store pages.
        """
        info = self.info
        prefix = info.key_prefix(ctx.namespace if info.namespaced else None)
        if self._from_cache(options):
            return await self._list_cached(prefix, options)
        revision, start, known_remaining = self._list_start(options)
        label_selector, field_selector = options.label_selector, options.field_selector
        filtered = bool(
            (label_selector is not None and not label_selector.empty)
            or (field_selector is not None and not field_selector.empty))
        limit = options.limit if options.limit and options.limit > 0 else 0
        items = []
        more, next_key, remaining = False, None, None
        # The first page of a list at the latest state counts what follows
        # in the watch cache's memory; the store would read every value.
        count_in_cache = (bool(limit) and not filtered and known_remaining is None
                          and not revision and self.cache is not None and self.cache.ready.called)
        count_in_store = bool(limit) and not filtered and known_remaining is None \
            and not count_in_cache
        while True:
            want = limit - len(items) if limit else 0
            page_size = min(max(want, _LIST_PAGE), _LIST_PAGE * 10) if filtered else want
            try:
                page = await self.store.list(
                    prefix, revision=revision, start=start, limit=page_size,
                    count_remaining=count_in_store)
            except CompactedError:
                if options.continue_token:
                    raise _continue_expired(start[len(info.key_prefix()):]) from None
                raise StatusError.expired(
                    "The resourceVersion for the provided list is too old.") from None
            except FutureRevisionError as e:
                raise _too_large(e) from None
            revision = page.revision
            for index, kv in enumerate(page.items):
                obj = self.decode(kv)
                if filtered and not self._selected(obj, label_selector, field_selector):
                    continue
                items.append(obj)
                if limit and len(items) == limit:
                    rest = len(page.items) - index - 1
                    if rest or page.more:
                        more = True
                        next_key = page.items[index + 1].key if rest else kv.key + "\x00"
                        if page.remaining is not None:
                            remaining = page.remaining + rest
                        elif known_remaining is not None and not filtered:
                            remaining = known_remaining - len(items)
                        elif count_in_cache:
                            remaining = self.cache.count(prefix, next_key)
                    break
            else:
                if not page.more or not page.items:
                    break
                start = page.items[-1].key + "\x00"
                continue
            break
        list_meta = {"resourceVersion": str(revision)}
        if more:
            list_meta["continue"] = encode_continue(
                revision, next_key[len(info.key_prefix()):], remaining)
            if remaining is not None:
                list_meta["remainingItemCount"] = remaining
        return {"kind": info.list_kind, "apiVersion": info.api_version,
                "metadata": list_meta, "items": items}

    def _from_cache(self, options):
        """
        Whether a list may be answered from the watch cache: when the client
        accepts any state not older than a revision, and does not page.
        """
        if self.cache is None or options.limit or options.continue_token:
            return False
        version = options.resource_version
        return version == "0" or (bool(version) and options.resource_version_match == "NotOlderThan")

    async def _list_cached(self, prefix, options):
        if not self.cache.ready.called:
            await self.cache.ready
        version = options.resource_version
        if version != "0":
            await self._fresh(int(version))
        snapshot, revision = self.cache.snapshot()
        label_selector, field_selector = options.label_selector, options.field_selector
        items = []
        for kv in snapshot:
            if kv.key.startswith(prefix):
                obj = self.decode(kv)
                if self._selected(obj, label_selector, field_selector):
                    items.append(obj)
        return {"kind": self.info.list_kind, "apiVersion": self.info.api_version,
                "metadata": {"resourceVersion": str(revision)}, "items": items}

    async def _fresh(self, revision):
        try:
            await self.cache.fresh(revision)
        except FutureRevisionError as e:
            raise _too_large(e) from None

    def _list_start(self, options):
        """C{(revision, start key, keys remaining from it or None)} of a list."""
        if options.continue_token:
            revision, start, remaining = decode_continue(options.continue_token)
            return revision, self.info.key_prefix() + start, remaining
        if options.resource_version_match == "Exact" and options.resource_version not in ("", "0"):
            return int(options.resource_version), None, None
        return 0, None, None

    def selector(self, options):
        """C{selected(obj) -> bool} for the selectors of C{options}."""
        label_selector, field_selector = options.label_selector, options.field_selector
        if (label_selector is None or label_selector.empty) and \
                (field_selector is None or field_selector.empty):
            return _everything
        return lambda obj: self._selected(obj, label_selector, field_selector)

    def _selected(self, obj, label_selector, field_selector):
        meta = obj["metadata"]
        if label_selector is not None and not label_selector.matches(meta.get("labels") or {}):
            return False
        if field_selector is not None and not field_selector.empty:
            fields = self.strategy.field_values(obj)
            fields["metadata.name"] = meta.get("name", "")
            fields["metadata.namespace"] = meta.get("namespace", "")
            if not field_selector.matches(fields):
                return False
        return True

    def selectable_fields(self):
        return ("metadata.name", "metadata.namespace") + tuple(self.strategy.selectable_fields)

    # -- watch --------------------------------------------------------------

    async def prepare_watch(self, ctx, options):
        """
        Check a watch and wait for the state it must start from.

        @param options: L{orchd.server.handlers.watch.WatchOptions}.
        @return: C{start(sink, encode) -> CacheWatcher}, to call once the
            response is open; it registers the watcher without yielding, so
            no change falls between its start and its first event.
        @raise StatusError: 504 when a NotOlderThan revision is not reached.
        """
        info, cache = self.info, self.cache
        if not cache.ready.called:
            await cache.ready
        listed = options.list
        prefix = info.key_prefix(ctx.namespace if info.namespaced else None)
        selected = self.selector(listed)
        version = listed.resource_version
        initial = options.send_initial_events
        if initial is None:
            initial = version in ("", "0")
        if options.send_initial_events and version not in ("", "0"):
            await self._fresh(int(version))
        after = int(version) if version not in ("", "0") else 0
        expired = not initial and after and not cache.can_resume(after)

        def start(sink, encode):
            watcher = CacheWatcher(cache, prefix, selected, encode, sink,
                                   after or cache.revision, options.allow_bookmarks)
            if expired:
                cache.expire(watcher, after)
            elif initial:
                snapshot, revision = cache.snapshot()
                watcher.after = revision
                cache.add_watcher(watcher)
                watcher.send_initial(snapshot, revision, bool(options.send_initial_events))
            else:
                cache.add_watcher(watcher)
            return watcher

        return start

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
        meta["creationTimestamp"] = rfc3339(self.clock.seconds())
        meta["generation"] = 1
        generated = False
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = metadata.generate_name(meta["generateName"], self._random)
            generated = True
        name = meta.get("name", "")
        attributes = AdmissionAttributes(CREATE, info, ctx.namespace, name, obj, None, ctx.user,
                                         dry_run=ctx.dry_run)
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
        try:
            kv = await self.store.create(self._key(ctx.namespace, name), self._encode(obj))
        except KeyExistsError:
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
                                         subresource=subresource, dry_run=ctx.dry_run)
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
        if obj == old:
            return old
        if ctx.dry_run:
            return obj
        if meta.get("deletionTimestamp") and not meta.get("finalizers") \
                and not strategy.pending_finalizers(obj):
            try:
                await self.store.delete(kv.key, kv.mod_revision)
            except (ConflictError, KeyNotFoundError):
                return None
            return obj
        try:
            stored = await self.store.update(kv.key, self._encode(obj), kv.mod_revision)
        except ConflictError:
            return None
        except KeyNotFoundError:
            raise self._not_found(name) from None
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
                    meta["deletionTimestamp"] = rfc3339(self.clock.seconds())
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


def _everything(obj):
    return True


def _continue_expired(start):
    """
    The 410 of a continue token whose snapshot was compacted, carrying a
    token that resumes at the same place from the latest state.
    """
    return StatusError(
        410, "Expired",
        "The provided continue parameter is too old to display a consistent list result. You "
        "can start a new list without the continue parameter, or use the continue token in "
        "this response to retrieve the remainder of the results. Continuing with the provided "
        "token results in an inconsistent list - objects that were created, modified, or "
        "deleted between the time the first chunk was returned and now may show up in the "
        "list.",
        metadata={"continue": encode_continue(0, start)})


def _too_large(error):
    status = StatusError.timeout(
        f"Too large resource version: {error.requested}, current: {error.current}")
    status.details["causes"] = [{"reason": "ResourceVersionTooLarge",
                                 "message": "Too large resource version"}]
    return status


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
