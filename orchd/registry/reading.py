# -*- test-case-name: tests.server.test_handlers,tests.server.test_watch,tests.registry.test_options -*-
"""
The reading half of the generic store: get, list (paged, selected, from the
watch cache when the client allows) and the start of a watch.

Objects are JSON-shaped dicts; the store keeps them as JSON bytes with the
resourceVersion left out, since that is the store's own revision.
"""

import random

import orjson
from twisted.internet.task import deferLater

from orchd.api.errors import StatusError
from orchd.registry.options import decode_continue, encode_continue
from orchd.storage.interfaces import CompactedError, FutureRevisionError
from orchd.storage.watchcache import CacheWatcher

_LIST_PAGE = 1000
#: Objects a list from the watch cache decodes per reactor turn.
_CACHED_SLICE = 2000


class ResourceReads:
    """
    Generic reads of one resource: get, list and watch, on an IStore.

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

    async def find(self, ctx, name):
        """The object called C{name} as stored now, or None (absence is an answer)."""
        kv = await self.store.get(self._key(ctx.namespace, name))
        return None if kv is None else self.decode(kv)

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
                            # The count came with the token: never below 0, whatever it said.
                            remaining = max(known_remaining - len(items), 0)
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
        decoded = 0
        for kv in snapshot:
            if kv.key.startswith(prefix):
                decoded += 1
                if decoded % _CACHED_SLICE == 0:
                    # 150,000 pods take seconds to decode: the reactor serves
                    # others between slices (the snapshot stays as taken).
                    await deferLater(self.clock, 0, lambda: None)
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

        def selected(obj):
            return self._selected(obj, label_selector, field_selector)

        # Equal for equal selectors of this reader: their watchers share
        # the filtering of each change (see orchd.storage.watchcache).
        selected.key = (self, label_selector,
                        field_selector.requirements if field_selector is not None else None)
        return selected

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
        @return: C{start(sink, encoder) -> CacheWatcher}, to call once the
            response is open with the L{IWatchEncoder} of the client's
            format; it registers the watcher without yielding, so no change
            falls between its start and its first event.
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

        def start(sink, encoder):
            watcher = CacheWatcher(cache, prefix, selected, encoder, sink,
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
