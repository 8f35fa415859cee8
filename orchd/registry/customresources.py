# -*- test-case-name: tests.registry.test_customresources -*-
"""
The custom resource kinds one API server serves, following the
CustomResourceDefinitions in the store.

One L{CustomResourceKinds} per catalog registers, in the catalog's
L{orchd.registry.definitions.KindRegistry}, one definition per served
version of every established CustomResourceDefinition, replaces them when
the definition changes, and unregisters them when it or a version goes.
It follows the definitions through an informer on the catalog's watch
cache, so every API server sharing the store picks changes up; the server
that writes a definition also registers its kinds itself before it
answers (L{serve}, from the definition's strategy), so that a resource
created right after its definition never meets a server that has not heard
of it yet. Registering twice is harmless: a definition already served
with the same spec and accepted names is left as it is.

It also runs the cleanup of a definition being deleted (upstream's
C{pkg/controller/finalizer}): every custom resource is deleted, in every
namespace, through its own store (so its finalizers are honoured and
waited for), then the C{customresourcecleanup} finalizer is removed. Every
server following the definition does so; their writes are compare-and-swap
and the last one to find nothing left removes the finalizer.
"""

import orjson
from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.task import deferLater
from twisted.logger import Logger

from orchd.api.errors import StatusError
from orchd.api.kinds import APIEXTENSIONS, key_prefix_of
from orchd.registry.kinds.customresource import (
    CLEANUP_FINALIZER, DefinitionState, custom_kind_definitions, storage_version,
)
from orchd.registry.options import ListOptions
from orchd.storage.informer import Informer
from orchd.storage.interfaces import DELETED

CRD_RESOURCE = "customresourcedefinitions"
#: How long a cleanup waits before looking again at resources held by finalizers.
CLEANUP_RETRY = 1.0


def established(crd):
    """Whether C{crd}'s C{Established} condition is True."""
    for condition in (crd.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Established":
            return condition.get("status") == "True"
    return False


def _signature(crd):
    """What the kinds of C{crd} are built from: equal signatures, equal kinds."""
    return orjson.dumps([crd.get("spec"), (crd.get("status") or {}).get("acceptedNames")],
                        option=orjson.OPT_SORT_KEYS)


class _Served:
    __slots__ = ("signature", "definitions", "state")

    def __init__(self, signature, definitions, state):
        self.signature = signature
        self.definitions = definitions
        self.state = state


class CustomResourceKinds:
    """
    @param catalog: the L{orchd.registry.catalog.Catalog} whose kinds follow
        the definitions.
    """

    log = Logger()

    def __init__(self, catalog):
        self.catalog = catalog
        self._served = {}
        #: The definitions known, by name (the informer's, and those just written here).
        self.definitions = {}
        self._informer = None
        self._cleaning = {}

    # -- following the store --------------------------------------------------------

    async def start(self):
        """List the definitions and follow them; fires once every established one is served."""
        if self._informer is not None:
            return
        self._informer = Informer(self.catalog.reads, key_prefix_of(APIEXTENSIONS, CRD_RESOURCE),
                                  self._changed, clock=self.catalog.clock)
        await self._informer.start()

    def stop(self):
        if self._informer is not None:
            self._informer.stop()
            self._informer = None
        for call in self._cleaning.values():
            call.cancel()

    def _changed(self, type, crd, old):
        name = crd["metadata"]["name"]
        if type == DELETED:
            self.definitions.pop(name, None)
            self.withdraw(name)
            return
        self.definitions[name] = crd
        if established(crd):
            self.serve(crd)
        else:
            self.withdraw(name)
        meta = crd["metadata"]
        if meta.get("deletionTimestamp") and CLEANUP_FINALIZER in (meta.get("finalizers") or ()):
            served = self._served.get(name)
            if served is not None:
                served.state.terminating = True
            if name not in self._cleaning:
                d = self._cleaning[name] = Deferred.fromCoroutine(self._clean(name))
                d.addErrback(lambda f: f.trap(CancelledError))   # stopped: another server goes on
                d.addErrback(lambda f: self.log.failure(
                    "Cleaning up the resources of {name} failed", f, name=name))
                d.addBoth(lambda _: self._cleaning.pop(name, None))

    # -- serving --------------------------------------------------------------------

    def serve(self, crd):
        """
        Serve the kinds of the established C{crd} now, replacing what an
        earlier state of it served.

        @return: what was served for it before (for L{restore}).
        """
        name = crd["metadata"]["name"]
        self.definitions[name] = crd
        previous = self._served.get(name)
        signature = _signature(crd)
        if previous is not None and previous.signature == signature:
            return previous
        state = previous.state if previous is not None else DefinitionState()
        definitions = custom_kind_definitions(crd, state)
        self._replace(name, previous, _Served(signature, definitions, state))
        return previous

    def withdraw(self, name):
        """Stop serving the kinds of the definition C{name}; return what was served."""
        previous = self._served.get(name)
        if previous is not None:
            self._replace(name, previous, None)
        return previous

    def restore(self, name, previous):
        """Serve again what L{serve} or L{withdraw} returned (a write that failed)."""
        self._replace(name, self._served.get(name), previous)

    def _replace(self, name, old, new):
        """Unregister what C{old} served (if still its), then register C{new}'s kinds."""
        registry = self.catalog.kinds
        if old is not None:
            for definition in old.definitions:
                info = definition.info
                if registry.lookup(info.group, info.version, info.resource) is definition:
                    registry.unregister(info.group, info.version, info.resource)
            self._served.pop(name, None)
        if new is None:
            return
        kept = []
        for definition in new.definitions:
            try:
                registry.register(definition)
            except ValueError as e:
                # Another kind holds the name (a built-in one, say): not served.
                self.log.warn("Cannot serve {name}: {error}", name=name, error=e)
                continue
            kept.append(definition)
        new.definitions = kept
        self._served[name] = new

    def served_names(self, group, excluding):
        """
        C{(resource names, kind names)} in use in C{group} by the other
        definitions' accepted names and by the served built-in kinds:
        plurals, singulars and short names; kinds and list kinds.
        """
        resources, kinds = set(), set()
        for name, crd in self.definitions.items():
            if name == excluding or (crd.get("spec") or {}).get("group") != group:
                continue
            accepted = (crd.get("status") or {}).get("acceptedNames") or {}
            resources.update(v for v in (accepted.get("plural"), accepted.get("singular")) if v)
            resources.update(accepted.get("shortNames") or ())
            kinds.update(v for v in (accepted.get("kind"), accepted.get("listKind")) if v)
        served = self._served.get(excluding)
        own = {d.info.resource for d in served.definitions} if served is not None else set()
        for info in self.catalog.kinds.kinds:
            if info.group == group and info.resource not in own:
                resources.update((info.resource, info.singular, *info.short_names))
                kinds.update((info.kind, info.list_kind))
        return resources, kinds

    # -- cleanup ----------------------------------------------------------------------

    async def _clean(self, name):
        """Delete every resource of the terminating definition C{name}, then its finalizer."""
        catalog = self.catalog
        while True:
            crd = self.definitions.get(name)
            if crd is None or CLEANUP_FINALIZER not in (crd["metadata"].get("finalizers") or ()):
                return
            try:
                remaining = await self._delete_resources(crd)
            except StatusError as e:
                # Refused or failed for now (a store error, say): try again shortly.
                self.log.warn("Deleting the resources of {name}: {error}", name=name,
                              error=e.message)
                remaining = True
            if not remaining:
                break
            await deferLater(catalog.clock, CLEANUP_RETRY, lambda: None)
        definitions = catalog.resource(APIEXTENSIONS, CRD_RESOURCE)

        def without_finalizer(obj):
            meta = obj["metadata"]
            meta["finalizers"] = [f for f in meta.get("finalizers") or ()
                                  if f != CLEANUP_FINALIZER]
            meta.pop("resourceVersion", None)
            return obj

        try:
            # An update, so that the definition goes once its last finalizer has.
            await definitions.patch(catalog.system_context(), name, without_finalizer)
        except StatusError as e:
            if e.code != 404:
                raise

    async def _delete_resources(self, crd):
        """Delete what is left of C{crd}'s resources; return how many are left."""
        catalog = self.catalog
        spec = crd["spec"]
        names = (crd.get("status") or {}).get("acceptedNames") or spec["names"]
        group, plural = spec["group"], names.get("plural") or spec["names"]["plural"]
        found = catalog.lookup(group, storage_version(crd), plural)
        for version in spec.get("versions") or ():
            if found is not None:
                break
            found = catalog.lookup(group, version.get("name"), plural)
        if found is None:
            return await self._delete_unserved(group, plural)
        _, provider = found
        listed = await provider.list(catalog.system_context(), ListOptions())
        remaining = 0
        for item in listed["items"]:
            meta = item["metadata"]
            remaining += 1
            if meta.get("deletionTimestamp"):
                continue
            try:
                await provider.delete(catalog.system_context(meta.get("namespace", "")),
                                      meta["name"])
            except StatusError as e:
                if e.code not in (404, 409):
                    raise
        if remaining:
            listed = await provider.list(catalog.system_context(), ListOptions())
            remaining = len(listed["items"])
        return remaining

    async def _delete_unserved(self, group, plural):
        """No version is served: the stored objects are removed as they are."""
        store = self.catalog.store
        page = await store.list(key_prefix_of(group, plural))
        for kv in page.items:
            await store.delete(kv.key)
        return 0


def custom_resource_kinds(catalog):
    """The L{CustomResourceKinds} of C{catalog}, or None when it serves no definitions."""
    provider = catalog.resource(APIEXTENSIONS, CRD_RESOURCE)
    return getattr(getattr(provider, "strategy", None), "custom_resources", None)
