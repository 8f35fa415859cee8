# -*- test-case-name: tests.server.test_handlers,tests.api.test_discovery -*-
"""
The enabled resources and the registry that serves each.

Built once at start from the kinds that C{--runtime-config} enables; the
server looks resources up here by group, version and plural name.
"""

from twisted.python.failure import Failure
from zope.interface import Attribute, Interface

from orchd.admission.chain import AdmissionChain
from orchd.admission.namespacelifecycle import NamespaceLifecycle
from orchd.api.fieldmanager import FieldManager
from orchd.api.patch import patch_schema_for
from orchd.auth.user import MASTERS, UserInfo
from orchd.registry.context import RequestContext
from orchd.registry.generic import ResourceStore
from orchd.registry.kinds import strategy_for
from orchd.registry.servicealloc import ServiceAllocators
from orchd.storage.cachedreads import CachedReads
from orchd.storage.watchcache import WatchCache


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
    (C{nodes/proxy}, C{pods/log}): it writes the whole response itself.
    """

    verbs = Attribute("The verbs it serves.")

    def stream(request, ctx, info):
        """
        @param request: the twisted.web request to answer.
        @param ctx: the L{RequestContext} (its namespace is the parent's).
        @param info: the L{orchd.server.requestinfo.RequestInfo}; C{parts[3:]}
            is the path after the subresource.
        @return: (awaitable) fires once the response is complete.
        @raise orchd.api.errors.StatusError: only before anything is written.
        """


class Catalog:
    """
    @param kinds: the enabled L{orchd.api.kinds.KindInfo}s.
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
        self.kinds = tuple(kinds)
        self.store = store
        #: Where Services take cluster IPs and node ports (default range if None).
        self.allocators = allocators or ServiceAllocators(store)
        self.clock = clock
        self.admission = AdmissionChain((NamespaceLifecycle(self.get_namespace),) + tuple(plugins))
        self._resources = {}
        self._preferred = {}
        virtual = virtual or {}
        self.caches = {} if caches is None else caches
        self.reads = CachedReads(self.caches, store)
        self.field_manager = FieldManager(patch_schema_for, clock.seconds)
        for info in self.kinds:
            if info.stored:
                cache = self.caches.get(info.key_prefix())
                if cache is None:
                    cache = self.caches[info.key_prefix()] = WatchCache(
                        store, info.key_prefix(), clock)
                provider = ResourceStore(info, strategy_for(info, self.allocators), store, clock, self.admission,
                                         cache=cache, field_manager=self.field_manager)
            elif (info.group, info.resource) in virtual:
                provider = virtual[(info.group, info.resource)](info)
            else:
                continue
            self._resources[(info.group, info.version, info.resource)] = (info, provider)
            self._preferred.setdefault((info.group, info.resource), provider)
        self._connectors = {key: factory(self) for key, factory in (connectors or {}).items()
                            if self.resource(key[0], key[1]) is not None}

    async def start_caches(self):
        """
        Fill every watch cache and start following the store.

        A cache that cannot list its resource (a value the store cannot
        decrypt, say, once its key left the encryption configuration) does
        not hold up the rest: it keeps trying in the background while every
        other resource serves.
        """
        for cache in self.caches.values():
            try:
                await cache.start()
            except Exception:
                cache.start_failed(Failure())

    def stop_caches(self):
        for cache in self.caches.values():
            cache.stop()

    @property
    def served_kinds(self):
        """The kinds that have a registry, in table order (for discovery)."""
        return [info for info, _ in self._resources.values()]

    def lookup(self, group, version, resource):
        """@return: C{(KindInfo, provider)} or None."""
        return self._resources.get((group, version, resource))

    def connector(self, group, resource, subresource):
        """The L{IConnector} or L{IStreamConnector} serving a subresource, or None."""
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

    def system_context(self, namespace=""):
        """A context for the control plane's own writes (bootstrap, controllers)."""
        return RequestContext(UserInfo("system:apiserver", (MASTERS,)), namespace,
                              field_manager="orchd")
