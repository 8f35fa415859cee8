"""
Tests for L{orchd.registry.definitions} and L{orchd.registry.kinds.builtin}:
one definition per kind, registered at start and at run time, and followed
by the catalog, discovery and OpenAPI.
"""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from orchd.api import schemas
from orchd.api.errors import FieldError
from orchd.api.kinds import KindInfo
from orchd.api.patchschema import kind_schema, merge_list, struct
from orchd.api.printers.base import INTEGER, Column, Printer, field, name_column
from orchd.registry.catalog import Catalog
from orchd.registry.definitions import (
    IKindListener, KindDefinition, KindRegistry, enabled_definitions,
)
from orchd.registry.kinds.builtin import DEFINITIONS, KINDS, builtin_registry
from orchd.registry.kinds.service import ServiceStrategy
from orchd.registry.strategy import DefaultStrategy, IStrategy
from orchd.storage.memory import MemoryStore
from tests.support import APIHarness

GROUP = "example.orch.io"
WIDGETS = f"/apis/{GROUP}/v1/namespaces/default/widgets"
TABLE = b"application/json;as=Table;v=v1;g=meta.k8s.io"
STRATEGIC = b"application/strategic-merge-patch+json"


@implementer(IKindListener)
class Recorder:
    """Writes down what it is told, with a name, into a shared list."""

    def __init__(self, name, heard):
        self.name = name
        self.heard = heard

    def kind_registered(self, definition):
        self.heard.append((self.name, "registered", definition.info.resource))

    def kind_unregistered(self, definition):
        self.heard.append((self.name, "unregistered", definition.info.resource))


class WidgetStrategy(DefaultStrategy):
    """A widget's size may not be negative."""

    def validate(self, ctx, obj):
        size = (obj.get("spec") or {}).get("size", 0)
        if isinstance(size, int) and size < 0:
            return [FieldError.invalid("spec.size", size, "must be non-negative")]
        return []


def widget_definition(version="v1"):
    """A kind the server does not have, with every facet a row can name."""
    port = schemas.obj({"name": schemas.string("A name."), "port": schemas.integer("A port.")})
    schema = schemas.KindSchema(
        {"spec": schemas.obj({"size": schemas.integer("How big."),
                              "ports": schemas.array(port, "Ports.")}, description="Spec.")},
        description="A widget.")
    printer = Printer(name_column(), Column("Size", INTEGER, "How big.", field("spec", "size")))
    info = KindInfo(GROUP, version, "widgets", "Widget", True, short_names=("wd",),
                    schema=schema, printer=printer,
                    patch_schema=kind_schema(spec=struct({"ports": merge_list("port")})),
                    selectable_fields=("spec.size",))
    return KindDefinition(info, WidgetStrategy)


def widget(name, size, ports=(), **spec):
    return {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": {"size": size, "ports": [{"port": p} for p in ports], **spec}}


class RegistryTests(SynchronousTestCase):
    def test_listeners_hear_changes_in_order(self):
        """Each registration and unregistration reaches every listener, in the order they subscribed."""
        heard = []
        registry = KindRegistry()
        first, second = Recorder("first", heard), Recorder("second", heard)
        verifyObject(IKindListener, first)
        registry.subscribe(first)
        registry.subscribe(second)
        definition = widget_definition()
        registry.register(definition)
        self.assertIs(registry.unregister(GROUP, "v1", "widgets"), definition)
        self.assertEqual(heard, [("first", "registered", "widgets"),
                                 ("second", "registered", "widgets"),
                                 ("first", "unregistered", "widgets"),
                                 ("second", "unregistered", "widgets")])

    def test_unsubscribed_hears_nothing(self):
        """A listener that unsubscribed is told nothing more."""
        heard = []
        registry = KindRegistry()
        listener = Recorder("gone", heard)
        registry.subscribe(listener)
        registry.unsubscribe(listener)
        registry.register(widget_definition())
        self.assertEqual(heard, [])

    def test_registration_order(self):
        """Definitions and kinds come in registration order, and are found by group, version and resource."""
        registry = KindRegistry()
        v2, v1 = widget_definition("v2"), widget_definition("v1")
        registry.register(v2)
        registry.register(v1)
        self.assertEqual(registry.definitions, (v2, v1))
        self.assertEqual(registry.kinds, (v2.info, v1.info))
        self.assertIs(registry.lookup(GROUP, "v1", "widgets"), v1)
        self.assertIsNone(registry.lookup(GROUP, "v3", "widgets"))

    def test_twice_refused(self):
        """A second definition at the same group, version and resource is refused, and nobody hears of it."""
        heard = []
        registry = KindRegistry()
        registry.register(widget_definition())
        registry.subscribe(Recorder("late", heard))
        error = self.assertRaises(ValueError, registry.register, widget_definition())
        self.assertEqual(str(error), "widgets.example.orch.io v1 is already registered")
        self.assertEqual(heard, [])

    def test_unregister_unknown(self):
        """Unregistering what is not registered is a LookupError."""
        self.assertRaises(LookupError, KindRegistry().unregister, GROUP, "v1", "widgets")

    def test_strategy_made_with_catalog(self):
        """A definition's strategy is made with the catalog and selects the fields its KindInfo names."""
        seen = []

        def factory(catalog):
            seen.append(catalog)
            return DefaultStrategy()

        info = KindInfo(GROUP, "v1", "gadgets", "Gadget", True, selectable_fields=("spec.a",))
        strategy = KindDefinition(info, factory).new_strategy("the catalog")
        self.assertEqual((seen, strategy.selectable_fields), (["the catalog"], ("spec.a",)))
        self.assertEqual(KindDefinition(info).new_strategy(None).field_values(
            {"spec": {"a": 1}}), {"spec.a": "1"})


class BuiltinTableTests(SynchronousTestCase):
    def test_one_row_per_resource_version(self):
        """No two rows serve the same group, version and resource."""
        keys = [(k.group, k.version, k.resource) for k in KINDS]
        self.assertEqual(len(keys), len(set(keys)))

    def test_strategies(self):
        """Every row's strategy provides IStrategy; Services take the catalog's allocators."""
        catalog = Catalog(KindRegistry(), MemoryStore(), Clock())
        for definition in DEFINITIONS:
            strategy = definition.new_strategy(catalog)
            verifyObject(IStrategy, strategy)
            self.assertEqual(strategy.selectable_fields, definition.info.selectable_fields)
            if definition.info.kind == "Service":
                self.assertIsInstance(strategy, ServiceStrategy)
                self.assertIs(strategy.allocators, catalog.allocators)

    def test_storage_versions_agree(self):
        """Every version of a stored resource names the same storage version, one of its own."""
        versions = {}
        for info in KINDS:
            if info.stored:
                versions.setdefault((info.group, info.resource), []).append(info)
        for rows in versions.values():
            self.assertEqual(len({info.storage_version for info in rows}), 1, rows)
            self.assertIn(rows[0].storage_version, [info.version for info in rows])

    def test_builtin_registry(self):
        """At start the rows --runtime-config enables are registered in table order."""
        defaults = builtin_registry()
        self.assertEqual(defaults.kinds, tuple(k for k in KINDS if k.stage == "stable"
                                               or k.group == "metrics.orch.io"))
        everything = builtin_registry("api/all=true")
        self.assertEqual(everything.definitions, DEFINITIONS)
        self.assertEqual(enabled_definitions("api/all=false,apps/v1=true", DEFINITIONS),
                         [d for d in DEFINITIONS if d.info.group == "apps"])

    def test_bad_runtime_config(self):
        """A --runtime-config key naming nothing in the table is a ValueError."""
        self.assertRaises(ValueError, builtin_registry, "example.orch.io/v1=true")


class RunTimeTests(SynchronousTestCase):
    """A kind registered into a running server is served by the catalog, discovery and OpenAPI."""

    def setUp(self):
        self.api = APIHarness()
        self.kinds = self.api.catalog.kinds

    def register(self, definition=None):
        definition = definition or widget_definition()
        self.kinds.register(definition)
        return definition

    def test_served_once_registered(self):
        """A new kind's objects can be created, read and listed once it is registered."""
        self.assertEqual(self.api.call("POST", WIDGETS, widget("a", 1))[0], 404)
        self.register()
        code, created, _ = self.api.call("POST", WIDGETS, widget("a", 1))
        self.assertEqual(code, 201)
        self.assertEqual(self.api.call("GET", WIDGETS + "/a")[1]["spec"], {"size": 1, "ports": []})
        self.assertEqual([item["metadata"]["name"] for item in self.api.call("GET", WIDGETS)[1][
            "items"]], ["a"])
        prefix = self.api.catalog.lookup(GROUP, "v1", "widgets")[0].key_prefix()
        self.assertIs(self.api.catalog.caches[prefix].ready.called, True)

    def test_strategy_applies(self):
        """The definition's strategy validates the kind's objects."""
        self.register()
        code, status, _ = self.api.call("POST", WIDGETS, widget("a", -1))
        self.assertEqual((code, status["details"]["causes"][0]["field"]), (422, "spec.size"))

    def test_schema_prunes(self):
        """Fields the definition's schema does not name are dropped with a warning, or refused when strict."""
        self.register()
        code, created, headers = self.api.call("POST", WIDGETS, widget("a", 1, extra=True))
        self.assertEqual(code, 201)
        self.assertNotIn("extra", created["spec"])
        self.assertIn('unknown field \\"spec.extra\\"',
                      headers.getRawHeaders(b"warning")[0].decode())
        code, status, _ = self.api.call("POST", WIDGETS + "?fieldValidation=Strict",
                                        widget("b", 1, extra=True))
        self.assertEqual(code, 400)
        self.assertIn('unknown field "spec.extra"', status["message"])

    def test_printer(self):
        """Tables of the kind have the columns of the definition's printer."""
        self.register()
        self.api.call("POST", WIDGETS, widget("a", 7))
        _, table, _ = self.api.call("GET", WIDGETS, headers={b"accept": TABLE})
        self.assertEqual([c["name"] for c in table["columnDefinitions"]], ["Name", "Size"])
        self.assertEqual(table["rows"][0]["cells"], ["a", 7])

    def test_patch_schema(self):
        """A strategic merge patch merges the lists the definition's patch metadata keys."""
        self.register()
        self.api.call("POST", WIDGETS, widget("a", 1, ports=(80,)))
        code, patched, _ = self.api.call("PATCH", WIDGETS + "/a", {"spec": {"ports": [
            {"port": 443, "name": "https"}]}}, content_type=STRATEGIC)
        self.assertEqual(code, 200)
        self.assertEqual(patched["spec"]["ports"], [{"port": 80}, {"port": 443, "name": "https"}])

    def test_selectable_fields(self):
        """The definition's selectable fields work in field selectors; others are refused."""
        self.register()
        for name, size in (("a", 1), ("b", 2)):
            self.api.call("POST", WIDGETS, widget(name, size))
        _, listed, _ = self.api.call("GET", WIDGETS + "?fieldSelector=spec.size%3D2")
        self.assertEqual([item["metadata"]["name"] for item in listed["items"]], ["b"])
        self.assertEqual(self.api.call("GET", WIDGETS + "?fieldSelector=spec.ports%3D1")[0], 400)

    def test_discovery_and_openapi_follow(self):
        """Discovery and OpenAPI show a kind once registered and drop it once unregistered."""
        self.assertNotIn(GROUP, str(self.api.call("GET", "/apis")[1]))
        self.assertEqual(self.api.call("GET", f"/openapi/v3/apis/{GROUP}/v1")[0], 404)
        self.register()
        groups = [g["name"] for g in self.api.call("GET", "/apis")[1]["groups"]]
        self.assertIn(GROUP, groups)
        code, resources, _ = self.api.call("GET", f"/apis/{GROUP}/v1")
        self.assertEqual((code, [r["name"] for r in resources["resources"]]), (200, ["widgets"]))
        code, document, _ = self.api.call("GET", f"/openapi/v3/apis/{GROUP}/v1")
        self.assertEqual(code, 200)
        definition = document["components"]["schemas"]["io.orch.api.example.v1.Widget"]
        ports = definition["properties"]["spec"]["properties"]["ports"]
        self.assertEqual((ports["x-kubernetes-patch-strategy"], ports["x-kubernetes-patch-merge-key"]),
                         ("merge", "port"))
        self.kinds.unregister(GROUP, "v1", "widgets")
        self.assertNotIn(GROUP, str(self.api.call("GET", "/apis")[1]))
        self.assertEqual(self.api.call("GET", f"/apis/{GROUP}/v1")[0], 404)
        self.assertEqual(self.api.call("GET", f"/openapi/v3/apis/{GROUP}/v1")[0], 404)

    def test_unregistered_not_served(self):
        """Once unregistered, a kind answers 404 and its watch cache stops."""
        self.register()
        self.api.call("POST", WIDGETS, widget("a", 1))
        prefix = self.api.catalog.lookup(GROUP, "v1", "widgets")[0].key_prefix()
        cache = self.api.catalog.caches[prefix]
        self.assertIn(prefix + "default/a", cache.state)
        self.kinds.unregister(GROUP, "v1", "widgets")
        self.assertEqual(self.api.call("GET", WIDGETS + "/a")[0], 404)
        self.assertNotIn(prefix, self.api.catalog.caches)
        self.successResultOf(self.api.store.create(prefix + "default/b", b"{}"))
        self.assertNotIn(prefix + "default/b", cache.state)

    def test_versions_share_storage(self):
        """Two versions of a resource share one cache; the other version serves on when one goes."""
        self.register(widget_definition("v1"))
        self.register(widget_definition("v2"))
        self.api.call("POST", WIDGETS, widget("a", 1))
        catalog = self.api.catalog
        prefix = catalog.lookup(GROUP, "v1", "widgets")[0].key_prefix()
        self.assertIs(catalog.resource(GROUP, "widgets"), catalog.lookup(GROUP, "v1", "widgets")[1])
        self.kinds.unregister(GROUP, "v1", "widgets")
        self.assertIn(prefix, catalog.caches)
        self.assertIs(catalog.resource(GROUP, "widgets"), catalog.lookup(GROUP, "v2", "widgets")[1])
        code, got, _ = self.api.call("GET", WIDGETS.replace("/v1/", "/v2/") + "/a")
        self.assertEqual((code, got["spec"]["size"]), (200, 1))

    def test_unservable_kind_not_announced(self):
        """A kind with neither storage nor a provider is not served, and the catalog's listeners are not told."""
        heard = []
        self.api.catalog.subscribe(Recorder("catalog", heard))
        info = KindInfo(GROUP, "v1", "checks", "Check", False, verbs=("create",), stored=False)
        self.kinds.register(KindDefinition(info))
        self.assertIsNone(self.api.catalog.lookup(GROUP, "v1", "checks"))
        self.assertEqual(heard, [])
        self.register()
        self.assertEqual(heard, [("catalog", "registered", "widgets")])
