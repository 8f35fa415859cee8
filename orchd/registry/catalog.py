# -*- test-case-name: tests.server.test_handlers,tests.api.test_discovery -*-
"""
The served resources and the registry that serves each.

The catalog serves every kind registered in a
L{orchd.registry.definitions.KindRegistry}: the built-in kinds that
C{--runtime-config} enables, registered at start, and whatever is
registered or unregistered later, which it follows and passes on to its
own listeners (discovery and OpenAPI). The server looks resources up here
by group, version and plural name.
"""

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure
from zope.interface import Attribute, Interface, implementer

from orchd.admission.chain import AdmissionChain
from orchd.admission.namespacelifecycle import NamespaceLifecycle
from orchd.api.fieldmanager import FieldManager
from orchd.api.kinds import key_prefix_of
from orchd.auth.user import MASTERS, UserInfo
from orchd.registry.context import RequestContext
from orchd.registry.definitions import IKindListener
from orchd.registry.generic import ResourceStore
from orchd.registry.servicealloc import ServiceAllocators
from orchd.storage.cachedreads import CachedReads
from orchd.storage.watchcache import WatchCache


#: How many namespaces L{Catalog.cached_namespace} remembers decoded.
_NAMESPACES_DECODED = 1024
#: The namespaces' storage prefix (the key of one is the prefix and its name).
_NAMESPACES = key_prefix_of("", "namespaces")


class IConnector(Interface):
    """A subresource that takes an object of its own kind (e.g. a TokenRequest)."""

    info = Attribute("The KindInfo of the objects it takes and answers "
                     "(orchd.api.kinds.subresource_kind).")
    clock = Attribute("An IReactorTime.")

    def connect(ctx, name, obj):
        """
        @param ctx: the L{RequestContext} (its namespace is the parent's).
        @param name: the parent object's name.
        @param obj: the decoded body, its kind checked.
        @return: (awaitable) the object to answer 201 with.
        @raise orchd.api.errors.StatusError: as any write.
        """


class IStreamConnector(Interface):
    """
    A subresource answered with a stream from elsewhere, not an API object
    (C{nodes/proxy}, C{pods/log}): it says where that stream comes from
    (see L{orchd.registry.streams}); the server makes the request and
    streams the answer back.
    """

    verbs = Attribute("The verbs it serves.")
    options = Attribute("The class of the options it takes (ProxyOptions or PodLogOptions "
                        "of orchd.registry.streams), which the server reads from the request.")

    def locate(ctx, name, options):
        """
        @param ctx: the L{RequestContext} (its namespace is the parent's).
        @param name: the parent object's name, as the request spells it.
        @param options: an instance of C{options}.
        @return: (awaitable) the L{orchd.registry.streams.Location} to stream from.
        @raise orchd.api.errors.StatusError: for options or objects that
            name no stream (400), a missing object (404).
        """


@implementer(IKindListener)
class Catalog:
    """
    @param kinds: the L{orchd.registry.definitions.KindRegistry} of the
        served kinds: the catalog serves each registered kind, and follows
        what is registered and unregistered later.
    @param store: the L{orchd.storage.interfaces.IStore} every resource shares.
    @param virtual: C{{(group, resource): factory(info)}} for kinds answered
        without storage (reviews); kinds with neither are left out.
    @param plugins: admission plugins run after namespace lifecycle.
    @param connectors: C{{(group, resource, subresource): factory(catalog)}}
        for subresources that take an object of their own kind rather than
        the parent's (C{serviceaccounts/token}), see L{IConnector}, or that
        answer with a stream, see L{IStreamConnector}.
    @param allocators: the L{ServiceAllocators} of Services' cluster IPs and
        node ports; the default range over C{store} if None.
    @param caches: the dict to keep the watch caches in (by key prefix),
        when something made before the catalog reads from them.
    @ivar reads: listing and watching for informers, from the caches.
    """

    def __init__(self, kinds, store, clock, virtual=None, plugins=(), connectors=None,
                 allocators=None, caches=None):
        self.kinds = kinds
        self.store = store
        #: Where Services take cluster IPs and node ports (default range if None).
        self.allocators = allocators or ServiceAllocators(store)
        self.clock = clock
        self.admission = AdmissionChain(
            (NamespaceLifecycle(self.get_namespace, cached_namespace=self.cached_namespace),)
            + tuple(plugins))
        self._resources = {}
        self._preferred = {}
        self._virtual = virtual or {}
        self._listeners = []
        #: Connectors the served kinds brought: C{{(group, version, resource, subresource): connector}}.
        self._own_connectors = {}
        self._started = False
        self.caches = {} if caches is None else caches
        #: L{cached_namespace}'s last decoding of each namespace:
        #: C{name -> (the cached bytes, their revision, the object)}.
        self._namespaces_decoded = {}
        self.reads = CachedReads(self.caches, store)
        for definition in kinds.definitions:
            self._add(definition)
        kinds.subscribe(self)
        self._connectors = {key: factory(self) for key, factory in (connectors or {}).items()
                            if self.resource(key[0], key[1]) is not None}

    def _add(self, definition):
        """Serve C{definition}; return its new watch cache, or None if it needs none."""
        info, new_cache = definition.info, None
        if info.stored:
            cache = self.caches.get(info.key_prefix())
            if cache is None:
                cache = new_cache = self.caches[info.key_prefix()] = WatchCache(
                    self.store, info.key_prefix(), self.clock)
            provider = (definition.store or ResourceStore)(
                info, definition.new_strategy(self), self.store, self.clock, self.admission,
                cache=cache, field_manager=FieldManager(info.patch_schema, self.clock.seconds))
        elif (info.group, info.resource) in self._virtual:
            provider = self._virtual[(info.group, info.resource)](info)
        else:
            return None
        self._resources[(info.group, info.version, info.resource)] = (info, provider)
        self._preferred.setdefault((info.group, info.resource), provider)
        for subresource, factory in definition.connectors.items():
            self._own_connectors[(info.group, info.version, info.resource, subresource)] = \
                factory(self, info)
        return new_cache

    def kind_registered(self, definition):
        """Serve a kind registered at run time (its cache starts at once), and pass it on."""
        new_cache = self._add(definition)
        if self.lookup(definition.info.group, definition.info.version,
                       definition.info.resource) is None:
            return
        if new_cache is not None and self._started:
            Deferred.fromCoroutine(self._start_cache(new_cache))
        for listener in list(self._listeners):
            listener.kind_registered(definition)

    def kind_unregistered(self, definition):
        """Stop serving a kind (and its storage, once no version is left), and pass it on."""
        info = definition.info
        if self._resources.pop((info.group, info.version, info.resource), None) is None:
            return
        for subresource in definition.connectors:
            self._own_connectors.pop((info.group, info.version, info.resource, subresource), None)
        key = (info.group, info.resource)
        self._preferred.pop(key, None)
        for other, provider in self._resources.values():
            if (other.group, other.resource) == key:
                self._preferred.setdefault(key, provider)
        prefix = info.key_prefix()
        if info.stored and not any(other.stored and other.key_prefix() == prefix
                                   for other, _ in self._resources.values()):
            cache = self.caches.pop(prefix, None)
            if cache is not None:
                cache.stop()
        for listener in list(self._listeners):
            listener.kind_unregistered(definition)

    def subscribe(self, listener):
        """
        Tell the L{orchd.registry.definitions.IKindListener} C{listener} of
        every kind the catalog starts or stops serving, once it does.
        """
        self._listeners.append(listener)

    def unsubscribe(self, listener):
        """Stop telling C{listener}; nothing if it was not subscribed."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    async def start_caches(self):
        """
        Fill every watch cache and start following the store.

        A cache that cannot list its resource (a value the store cannot
        decrypt, say, once its key left the encryption configuration) does
        not hold up the rest: it keeps trying in the background while every
        other resource serves.
        """
        self._started = True
        for cache in list(self.caches.values()):
            await self._start_cache(cache)

    @staticmethod
    async def _start_cache(cache):
        try:
            await cache.start()
        except Exception:
            cache.start_failed(Failure())

    def stop_caches(self):
        for cache in self.caches.values():
            cache.stop()

    @property
    def served_kinds(self):
        """The kinds that have a registry, in registration order (for discovery)."""
        return [info for info, _ in self._resources.values()]

    def lookup(self, group, version, resource):
        """@return: C{(KindInfo, provider)} or None."""
        return self._resources.get((group, version, resource))

    def connector(self, group, resource, subresource, version=None):
        """
        The L{IConnector} or L{IStreamConnector} serving a subresource, or
        None: one the kind of C{version} brought with it, else the catalog's.
        """
        if self._own_connectors:
            own = self._own_connectors.get((group, version, resource, subresource))
            if own is not None:
                return own
        return self._connectors.get((group, resource, subresource))

    def resource(self, group, resource):
        """The provider of a resource in its preferred (first enabled) version."""
        return self._preferred.get((group, resource))

    def namespaced_stores(self):
        """One generic store per stored, namespaced resource (each storage prefix once)."""
        seen, stores = set(), []
        for info, provider in self._resources.values():
            if info.stored and info.namespaced and info.key_prefix() not in seen:
                seen.add(info.key_prefix())
                stores.append(provider)
        return stores

    async def get_namespace(self, name):
        """
        The namespace object called C{name}, or None: from the watch cache
        (no store read on every create), else from the store, since the
        cache may not have seen a namespace another API server just made.
        """
        namespaces = self.resource("", "namespaces")
        key = namespaces.info.key("", name)
        kv = self.caches[namespaces.info.key_prefix()].get(key) or await self.store.get(key)
        return namespaces.decode(kv) if kv is not None else None

    def cached_namespace(self, name):
        """
        The namespace object called C{name} if the watch cache holds it, else
        None (it may still exist: ask L{get_namespace}).

        Every namespaced create asks (namespace lifecycle admission): the
        object is decoded once per change of the namespace, and the same
        object handed to every caller until the cache holds other bytes or
        another revision for it, so it must not be changed.
        """
        kv = self.caches[_NAMESPACES].get(_NAMESPACES + name)
        decoded = self._namespaces_decoded
        if kv is None:
            decoded.pop(name, None)
            return None
        held = decoded.get(name)
        if held is not None and held[0] is kv.value and held[1] == kv.mod_revision:
            return held[2]
        obj = self.resource("", "namespaces").decode(kv)
        if len(decoded) >= _NAMESPACES_DECODED:
            # Namespaces made and deleted by the thousand (test suites) are
            # not all remembered.
            decoded.clear()
        decoded[name] = (kv.value, kv.mod_revision, obj)
        return obj

    def system_context(self, namespace=""):
        """A context for the control plane's own writes (bootstrap, controllers)."""
        return RequestContext(UserInfo("system:apiserver", (MASTERS,)), namespace,
                              field_manager="orchd")
