"""
A custom resource schema's list and map types as server-side apply metadata.
"""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.crdschema import CustomResourceSchema
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
