# -*- test-case-name: tests.registry.test_converted -*-
"""
A version of a built-in kind served from another version's storage,
through a pair of conversion functions (upstream's scheme conversions, as
C{autoscaling/v1} HorizontalPodAutoscalers are stored in C{autoscaling/v2}).

A kind's row declares it with a L{Conversion}: the storage version and the
two functions. Its definition then gets a L{ConvertedStore}, the generic
store whose decoding converts what is stored into the version served and
whose encoding converts back, so that every request (create, update,
patches of each type, server-side apply with its managedFields, status,
delete, list) works on objects of the version asked for; its strategy, the
storage version's, is wrapped in a L{ConvertedStrategy} that hands it the
storage version's objects; and its watches deliver the version's objects
through a L{VersionedEncoder}. The versions share one watch cache and one
set of stored objects.

Custom resources, whose versions differ only in C{apiVersion}, use
L{VersionedEncoder} the same way.
"""

import orjson
from zope.interface import implementer

from orchd.registry.generic import ResourceStore
from orchd.registry.strategy import IStrategy
from orchd.storage.interfaces import IWatchEncoder


class Conversion:
    """
    How one served version converts to and from the storage version.

    @ivar storage_version: the version objects are stored in (a version of
        the same group and resource, served by its own row).
    @ivar to_storage: C{to_storage(obj) -> stored object}; may raise a
        L{orchd.api.errors.StatusError} (400) for input that cannot convert.
    @ivar from_storage: C{from_storage(stored) -> obj} of the served version.
        Both are pure: they return new objects and change none they are given.
    """

    __slots__ = ("storage_version", "to_storage", "from_storage")

    def __init__(self, storage_version, to_storage, from_storage):
        self.storage_version = storage_version
        self.to_storage = to_storage
        self.from_storage = from_storage

    def store(self, info, strategy, *args, **kwargs):
        """A L{ConvertedStore} for C{info} (the signature of a definition's C{store})."""
        return ConvertedStore(self, info, strategy, *args, **kwargs)


_NOT_SPEC = frozenset(("metadata", "status", "apiVersion", "kind"))


def _replace(obj, new):
    """
    Make C{obj} (the caller's dict, shaped in place) C{new}, keeping its
    C{metadata} dict the same dict: the generic store holds on to it.
    """
    meta, new_meta = obj.get("metadata"), new.get("metadata")
    obj.clear()
    obj.update(new)
    if isinstance(meta, dict) and isinstance(new_meta, dict) and meta is not new_meta:
        meta.clear()
        meta.update(new_meta)
        obj["metadata"] = meta


def _spec(obj):
    return {k: v for k, v in obj.items() if k not in _NOT_SPEC}


@implementer(IStrategy)
class ConvertedStrategy:
    """
    The storage version's strategy, for objects of a converted version:
    each call gets the storage version's objects, and what it changes in
    place comes back converted.
    """

    def __init__(self, strategy, conversion, storage_api_version):
        self._strategy = strategy
        self._to = conversion.to_storage
        self._from = conversion.from_storage
        self._storage_api_version = storage_api_version
        self.selectable_fields = strategy.selectable_fields

    @property
    def allow_create_on_update(self):
        return self._strategy.allow_create_on_update

    @property
    def allow_unconditional_update(self):
        return self._strategy.allow_unconditional_update

    @property
    def keep_status_on_create(self):
        return self._strategy.keep_status_on_create

    def _stored(self, obj):
        """C{obj} in the storage version: watches select on stored objects as they are."""
        if obj.get("apiVersion") == self._storage_api_version:
            return obj
        return self._to(obj)

    def prepare_for_create(self, ctx, obj):
        stored = self._to(obj)
        self._strategy.prepare_for_create(ctx, stored)
        _replace(obj, self._from(stored))

    def validate(self, ctx, obj):
        return self._strategy.validate(ctx, self._to(obj))

    def prepare_for_update(self, ctx, obj, old):
        """
        The storage version's preparation; a change of the spec this
        version cannot see (one kept in an annotation) counts for the
        generation as upstream, which compares the stored objects.
        """
        stored, stored_old = self._to(obj), self._to(old)
        self._strategy.prepare_for_update(ctx, stored, stored_old)
        _replace(obj, self._from(stored))
        if _spec(obj) == _spec(old) and _spec(stored) != _spec(stored_old):
            meta = obj["metadata"]
            meta["generation"] = meta.get("generation", 1) + 1

    def validate_update(self, ctx, obj, old):
        return self._strategy.validate_update(ctx, self._to(obj), self._to(old))

    def subresource_update(self, subresource, obj, old):
        return self._from(self._strategy.subresource_update(
            subresource, self._to(obj), self._to(old)))

    def prepare_for_delete(self, ctx, obj):
        stored = self._to(obj)
        self._strategy.prepare_for_delete(ctx, stored)
        _replace(obj, self._from(stored))

    async def begin_create(self, ctx, obj):
        return await self._strategy.begin_create(ctx, self._to(obj))

    async def begin_update(self, ctx, obj, old):
        return await self._strategy.begin_update(ctx, self._to(obj), self._to(old))

    async def after_delete(self, ctx, obj):
        return await self._strategy.after_delete(ctx, self._to(obj))

    def pending_finalizers(self, obj):
        return self._strategy.pending_finalizers(self._to(obj))

    def graceful_delete_period(self, ctx, obj, requested):
        return self._strategy.graceful_delete_period(ctx, self._to(obj), requested)

    def field_values(self, obj):
        return self._strategy.field_values(self._stored(obj))


class ConvertedStore(ResourceStore):
    """
    The generic store of a version kept in another version's storage:
    decoding converts from the storage version, encoding to it, and watches
    convert each event.
    """

    def __init__(self, conversion, info, strategy, *args, **kwargs):
        storage_api_version = f"{info.group}/{conversion.storage_version}" if info.group \
            else conversion.storage_version
        super().__init__(info, ConvertedStrategy(strategy, conversion, storage_api_version),
                         *args, **kwargs)
        self.conversion = conversion

    def decode(self, kv):
        return self.conversion.from_storage(super().decode(kv))

    def _encode(self, obj):
        return super()._encode(self.conversion.to_storage(obj))

    async def prepare_watch(self, ctx, options):
        """A watch whose events carry this version's objects."""
        start = await super().prepare_watch(ctx, options)
        return lambda sink, encoder: start(sink, VersionedEncoder(
            encoder, self.conversion.from_storage, self.info.api_version))


@implementer(IWatchEncoder)
class VersionedEncoder:
    """
    An encoder that turns each stored object into one version's first.

    C{shape(obj)} gets the watch cache's object, shared with every other
    watcher, and must return an object of its own. Frames are shared only
    between watchers of the same version: the versions of a resource share
    one watch cache.
    """

    __slots__ = ("_encoder", "_shape", "key")

    def __init__(self, encoder, shape, api_version):
        self._encoder = encoder
        self._shape = shape
        self.key = (encoder.key, api_version)

    def event(self, type, obj):
        return self._encoder.event(type, self._shape(obj))

    def bookmark(self, revision, initial_events_end=False):
        return self._encoder.bookmark(revision, initial_events_end)

    def error(self, error):
        return self._encoder.error(error)


def copied(shape):
    """C{shape} applied to a copy: for shapes that change the object they are given."""
    return lambda obj: shape(orjson.loads(orjson.dumps(obj)))
