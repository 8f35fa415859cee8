"""
Pruning and defaulting of custom resources, as upstream's algorithms do them.
"""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.crdschema import CustomResourceSchema
from tests.api.crdschema.support import obj, widget


class PruneTests(SynchronousTestCase):

    def test_unknown_fields_removed_and_reported(self):
        """Unknown fields go, and their paths come back in upstream's spelling."""
        schema = CustomResourceSchema(widget({"a": {"type": "string"}}))
        value = obj({"a": "x", "foo": 1}, bar=2)
        self.assertEqual(sorted(schema.prune(value)), ["bar", "spec.foo"])
        self.assertEqual(value["spec"], {"a": "x"})
        self.assertNotIn("bar", value)

    def test_root_type_and_object_meta_kept(self):
        """apiVersion, kind and metadata (all of it) stay at the root."""
        schema = CustomResourceSchema({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}}}})
        value = {"apiVersion": "a/v1", "kind": "W", "metadata": {"name": "w", "labels": {"a": "b"}}}
        self.assertEqual(schema.prune(value), [])
        self.assertEqual(value["metadata"], {"name": "w", "labels": {"a": "b"}})

    def test_list_item_paths(self):
        """Unknown fields of list items are named by index."""
        schema = CustomResourceSchema(widget({"l": {"type": "array", "items": {
            "type": "object", "properties": {"name": {"type": "string"}}}}}))
        value = obj({"l": [{"name": "a"}, {"name": "b", "x": 1}]})
        self.assertEqual(schema.prune(value), ["spec.l[1].x"])
        self.assertEqual(value["spec"]["l"], [{"name": "a"}, {"name": "b"}])

    def test_preserve_unknown_fields(self):
        """preserve-unknown-fields keeps unknown fields but still prunes named ones below."""
        schema = CustomResourceSchema(widget({"known": {"type": "object", "properties": {
            "a": {"type": "string"}}}}, **{"x-kubernetes-preserve-unknown-fields": True}))
        value = obj({"free": {"any": 1}, "known": {"a": "x", "b": 2}})
        self.assertEqual(schema.prune(value), ["spec.known.b"])
        self.assertEqual(value["spec"], {"free": {"any": 1}, "known": {"a": "x"}})

    def test_additional_properties(self):
        """Map values are pruned with the additionalProperties schema."""
        schema = CustomResourceSchema(widget({"m": {"type": "object", "additionalProperties": {
            "type": "object", "properties": {"a": {"type": "string"}}}}}))
        value = obj({"m": {"k": {"a": "x", "z": 1}}})
        self.assertEqual(schema.prune(value), ["spec.m.k.z"])

    def test_embedded_resource_keeps_type_meta(self):
        """An embedded resource keeps apiVersion, kind and metadata."""
        schema = CustomResourceSchema(widget({"t": {
            "type": "object", "x-kubernetes-embedded-resource": True,
            "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}))
        value = obj({"t": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": 1}, "y": 2}})
        self.assertEqual(schema.prune(value), ["spec.t.y"])
        self.assertEqual(set(value["spec"]["t"]), {"apiVersion", "kind", "metadata", "spec"})

    def test_object_without_properties_is_emptied(self):
        """A typed object without properties keeps nothing, as upstream's pruning does."""
        schema = CustomResourceSchema(widget({"o": {"type": "object"}}))
        value = obj({"o": {"a": 1}})
        self.assertEqual(schema.prune(value), ["spec.o.a"])


class DefaultTests(SynchronousTestCase):

    def test_absent_field_defaulted(self):
        """An absent field gets its default where its parent exists."""
        schema = CustomResourceSchema(widget({"replicas": {"type": "integer", "default": 1}}))
        value = obj({})
        schema.default(value)
        self.assertEqual(value["spec"], {"replicas": 1})

    def test_parent_not_created(self):
        """Defaults are not applied under an absent parent."""
        schema = CustomResourceSchema(widget({"replicas": {"type": "integer", "default": 1}}))
        value = {"apiVersion": "a/v1", "kind": "W", "metadata": {}}
        schema.default(value)
        self.assertNotIn("spec", value)

    def test_null_non_nullable_defaulted(self):
        """A null in a non-nullable field with a default is replaced by the default."""
        schema = CustomResourceSchema(widget({"r": {"type": "integer", "default": 1}}))
        value = obj({"r": None})
        schema.default(value)
        self.assertEqual(value["spec"], {"r": 1})

    def test_null_nullable_kept(self):
        """A null in a nullable field stays null."""
        schema = CustomResourceSchema(widget({"r": {"type": "integer", "default": 1, "nullable": True}}))
        value = obj({"r": None})
        schema.default(value)
        self.assertEqual(value["spec"], {"r": None})

    def test_null_without_default_dropped(self):
        """A null in a non-nullable field without default is dropped, as upstream does."""
        schema = CustomResourceSchema(widget({"r": {"type": "integer"}}))
        value = obj({"r": None})
        schema.default(value)
        self.assertEqual(value["spec"], {})

    def test_defaults_inside_items_and_maps(self):
        """Defaults apply inside list items and map values."""
        item = {"type": "object", "properties": {"p": {"type": "string", "default": "TCP"}}}
        schema = CustomResourceSchema(widget({
            "l": {"type": "array", "items": item},
            "m": {"type": "object", "additionalProperties": item}}))
        value = obj({"l": [{}, {"p": "UDP"}], "m": {"a": {}}})
        schema.default(value)
        self.assertEqual(value["spec"], {"l": [{"p": "TCP"}, {"p": "UDP"}], "m": {"a": {"p": "TCP"}}})

    def test_default_object_defaulted_below(self):
        """A defaulted object gets its own fields' defaults too."""
        schema = CustomResourceSchema(widget({"o": {"type": "object", "default": {}, "properties": {
            "a": {"type": "string", "default": "x"}}}}))
        value = obj({})
        schema.default(value)
        self.assertEqual(value["spec"], {"o": {"a": "x"}})

    def test_defaults_not_shared(self):
        """Each object gets its own copy of a default."""
        schema = CustomResourceSchema(widget({"l": {"type": "array", "items": {"type": "string"},
                                                    "default": ["a"]}}))
        first, second = obj({}), obj({})
        schema.default(first)
        schema.default(second)
        first["spec"]["l"].append("b")
        self.assertEqual(second["spec"]["l"], ["a"])


class FieldAtTests(SynchronousTestCase):

    def test_paths(self):
        """field_at finds sub-schemas by dotted path, through lists and maps."""
        schema = CustomResourceSchema(widget({
            "replicas": {"type": "integer"},
            "l": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "string"}}}},
            "m": {"type": "object", "additionalProperties": {"type": "boolean"}}}))
        self.assertEqual(schema.field_at(".spec.replicas"), {"type": "integer"})
        self.assertEqual(schema.field_at("spec.l[*].n"), {"type": "string"})
        self.assertEqual(schema.field_at("spec.l.n"), {"type": "string"})
        self.assertEqual(schema.field_at(".spec.m.anything"), {"type": "boolean"})
        self.assertIsNone(schema.field_at(".spec.nope"))
        self.assertIsNone(schema.field_at(".status.x"))

    def test_jsonpath_forms(self):
        """field_at reads printer columns' JSONPath forms: filters, quoted names, braces."""
        schema = CustomResourceSchema({"type": "object", "properties": {"status": {
            "type": "object", "properties": {"conditions": {"type": "array", "items": {
                "type": "object", "properties": {"type": {"type": "string"},
                                                 "status": {"type": "string"}}}}}}}})
        self.assertEqual(schema.field_at('.status.conditions[?(@.type=="Ready")].status'), {"type": "string"})
        self.assertEqual(schema.field_at("{.status['conditions'][0].type}"), {"type": "string"})
