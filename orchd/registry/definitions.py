# -*- test-case-name: tests.registry.test_definitions -*-
"""
The kinds the server serves: one definition each, registered at start and
at run time.

A L{KindDefinition} is the whole wiring of one kind: its
L{orchd.api.kinds.KindInfo} (names, scope, verbs, subresources, and the
API-level facets: schema, printer, patch metadata, selectable fields) and
the factory of its strategy. The built-in kinds are the rows of
L{orchd.registry.kinds.builtin}; a custom resource's definition is to be
built from its CustomResourceDefinition.

A L{KindRegistry} holds the definitions being served, and is the only way
a kind comes to be served. At start the built-in kinds that
C{--runtime-config} enables are registered in table order; a custom
resource is registered when its CustomResourceDefinition is established,
and unregistered when the definition goes. Its listeners (the catalog, and
through the catalog discovery and OpenAPI) follow every change.
"""

from zope.interface import Interface

from orchd.api.versions import enabled_kinds
from orchd.registry.strategy import DefaultStrategy


class IKindListener(Interface):
    """Follows the kinds a L{KindRegistry} (or a catalog) serves."""

    def kind_registered(definition):
        """
        C{definition} is served from now on.

        @param definition: the L{KindDefinition}.
        """

    def kind_unregistered(definition):
        """C{definition}, served until now, is not any more."""


class KindDefinition:
    """
    One kind, all of it.

    @ivar info: the L{orchd.api.kinds.KindInfo}, with the API-level facets.
    @ivar strategy: makes the kind's L{orchd.registry.strategy.IStrategy}:
        called with the L{orchd.registry.catalog.Catalog} that serves the
        kind, for strategies that take collaborators from it (Service's
        allocators); a strategy class itself serves for the others.
    @ivar store: the class of its provider, None for the generic
        L{orchd.registry.generic.ResourceStore}; a subclass for kinds whose
        reads shape what is stored (custom resources: the version asked
        for, defaults).
    @ivar connectors: C{{subresource: factory(catalog, info)}} of the
        subresources this kind brings with it (a custom resource's scale),
        served while it is.
    @ivar conversion: None, or the L{orchd.registry.converted.Conversion}
        of a version kept in another version's storage (C{autoscaling/v1}
        HorizontalPodAutoscalers): its store is then a
        L{orchd.registry.converted.ConvertedStore} serving the storage
        version's objects converted, with the storage version's strategy.
    """

    __slots__ = ("info", "strategy", "store", "connectors", "conversion")

    def __init__(self, info, strategy=DefaultStrategy, store=None, connectors=None,
                 conversion=None):
        self.info = info
        self.strategy = strategy
        self.conversion = conversion
        if conversion is not None:
            if store is not None:
                raise ValueError(f"{info.qualified_resource} {info.version}: a converted "
                                 f"version has the converting store")
            if info.storage_version != conversion.storage_version:
                raise ValueError(f"{info.qualified_resource} {info.version}: stored in "
                                 f"{info.storage_version}, converts to "
                                 f"{conversion.storage_version}")
            store = conversion.store
        self.store = store
        self.connectors = dict(connectors or {})

    def new_strategy(self, catalog):
        """
        A fresh strategy for this kind, selecting the fields the kind's
        C{selectable_fields} name.
        """
        strategy = self.strategy(catalog)
        strategy.selectable_fields = self.info.selectable_fields
        return strategy

    def __repr__(self):
        return f"<KindDefinition {self.info.group_version} {self.info.resource}>"


def _key(info):
    return (info.group, info.version, info.resource)


class KindRegistry:
    """
    The definitions of the served kinds, in the order they were registered.

    Listeners hear of each change after it is made, in the order they
    subscribed; the catalog subscribes when it is made, so it serves a kind
    before anything that follows the catalog announces it.
    """

    def __init__(self):
        self._definitions = {}
        self._listeners = []

    @property
    def definitions(self):
        """Every registered L{KindDefinition}, in registration order."""
        return tuple(self._definitions.values())

    @property
    def kinds(self):
        """The L{orchd.api.kinds.KindInfo} of every registered definition, in order."""
        return tuple(definition.info for definition in self._definitions.values())

    def lookup(self, group, version, resource):
        """The definition served at C{group/version/resource}, or None."""
        return self._definitions.get((group, version, resource))

    def register(self, definition):
        """
        Serve C{definition} from now on, and tell every listener.

        @raise ValueError: if its group, version and resource are already
            served.
        """
        key = _key(definition.info)
        if key in self._definitions:
            raise ValueError(f"{definition.info.qualified_resource} "
                             f"{definition.info.version} is already registered")
        self._definitions[key] = definition
        for listener in list(self._listeners):
            listener.kind_registered(definition)

    def unregister(self, group, version, resource):
        """
        Stop serving C{group/version/resource}, and tell every listener.

        @return: the definition that was served there.
        @raise LookupError: if nothing is.
        """
        definition = self._definitions.pop((group, version, resource), None)
        if definition is None:
            raise LookupError(f"{resource}.{group}/{version}" if group else f"{resource}/{version}")
        for listener in list(self._listeners):
            listener.kind_unregistered(definition)
        return definition

    def subscribe(self, listener):
        """Tell the L{IKindListener} C{listener} of every change from now on."""
        self._listeners.append(listener)

    def unsubscribe(self, listener):
        self._listeners.remove(listener)


def enabled_definitions(runtime_config_text, definitions):
    """
    The C{definitions} served under C{--runtime-config}, in their order.

    @param runtime_config_text: the flag's text; empty or C{None} for defaults.
    @raise ValueError: as L{orchd.api.versions.enabled_kinds}, for a key
        that names no group, version or resource of C{definitions}.
    """
    enabled = set(enabled_kinds(runtime_config_text, [d.info for d in definitions]))
    return [d for d in definitions if d.info in enabled]
