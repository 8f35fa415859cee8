"""
A custom resource schema's list and map types as server-side apply metadata.
"""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.crdschema import CustomResourceSchema
from orchd.api.fieldpath import SchemaError, item_key_element
from orchd.api.fieldwalk import field_set, merge
from orchd.api.patchschema import OBJECT_META
from tests.api.crdschema.support import widget


def rows(spec_properties):
    return CustomResourceSchema(widget(spec_properties)).patch_schema


class PatchSchemaTests(SynchronousTestCase):

    def test_metadata_rules_always(self):
        """ObjectMeta's rules are there even without list or map types."""
        found = rows({"a": {"type": "string"}})
        self.assertEqual(set(found), {"metadata"})
        self.assertEqual(set(found["metadata"].fields), set(OBJECT_META))

    def test_atomic_list_has_no_row(self):
        """Lists are atomic by default: no row, so they are replaced."""
        self.assertNotIn("spec", rows({"l": {"type": "array", "items": {"type": "string"}}}))

    def test_set_list(self):
        """list-type set merges as a set of scalars."""
        field = rows({"l": {"type": "array", "x-kubernetes-list-type": "set",
                            "items": {"type": "string"}}})["spec"].fields["l"]
        self.assertTrue(field.merge)
        self.assertIsNone(field.key)

    def test_map_list(self):
        """list-type map merges by its single key, with the items' own rows below."""
        field = rows({"l": {"type": "array", "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name"],
                            "items": {"type": "object", "required": ["name"], "properties": {
                                "name": {"type": "string"},
                                "m": {"type": "object", "x-kubernetes-map-type": "atomic"}}}}})["spec"].fields["l"]
        self.assertTrue(field.merge)
        self.assertEqual(field.key, "name")
        self.assertTrue(field.fields["m"].replace)

    def test_atomic_map(self):
        """map-type atomic replaces the map whole."""
        field = rows({"m": {"type": "object", "x-kubernetes-map-type": "atomic"}})["spec"].fields["m"]
        self.assertTrue(field.replace)

    def test_cached(self):
        """The rows are computed once per compiled schema."""
        schema = CustomResourceSchema(widget({}))
        self.assertIs(schema.patch_schema, schema.patch_schema)


class MultiKeyMapListTests(SynchronousTestCase):
    """
    A map list with several keys (x-kubernetes-list-map-keys: [name, protocol])
    is keyed by all of them in server-side apply, as upstream's field sets are.
    """

    def setUp(self):
        self.schema = CustomResourceSchema(widget({"ports": {
            "type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["protocol", "name"],
            "items": {"type": "object", "required": ["name", "protocol"], "properties": {
                "name": {"type": "string"}, "protocol": {"type": "string"},
                "port": {"type": "integer"}}}}})).patch_schema

    def test_key_is_all_fields(self):
        """The row's key holds every key field."""
        self.assertEqual(self.schema["spec"].fields["ports"].key, ("protocol", "name"))

    def test_field_set_elements(self):
        """Items are named by all key fields, sorted by name, as upstream writes them."""
        fields = field_set({"spec": {"ports": [{"name": "a", "protocol": "TCP", "port": 1}]}}, self.schema)
        self.assertEqual(list(fields["f:spec"]["f:ports"]), ['k:{"name":"a","protocol":"TCP"}'])

    def test_merge_by_both_keys(self):
        """Items that share one key but not the other are different items."""
        live = {"spec": {"ports": [{"name": "a", "protocol": "TCP", "port": 1}]}}
        config = {"spec": {"ports": [{"name": "a", "protocol": "UDP", "port": 2}]}}
        merged = merge(live, config, self.schema)
        self.assertEqual(merged["spec"]["ports"], [{"name": "a", "protocol": "TCP", "port": 1},
                                                   {"name": "a", "protocol": "UDP", "port": 2}])

    def test_missing_key_field(self):
        """An item without one of the key fields is refused, naming the field."""
        with self.assertRaises(SchemaError) as caught:
            field_set({"spec": {"ports": [{"name": "a"}]}}, self.schema)
        self.assertIn('omits key field "protocol"', str(caught.exception))

    def test_single_key_unchanged(self):
        """A one-field key still writes the one-field element."""
        self.assertEqual(item_key_element("name", {"name": "a"}), 'k:{"name":"a"}')
