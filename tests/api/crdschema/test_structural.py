"""
Structural schema checks of an openAPIV3Schema, with upstream's messages and paths.
"""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.crdschema import structural_errors
from tests.api.crdschema.support import ROOT, messages, widget


def errors(schema):
    return messages(structural_errors(schema, ROOT))


class TypeTests(SynchronousTestCase):

    def test_valid_schema(self):
        """A typed schema with list and map types is structural."""
        schema = widget({
            "replicas": {"type": "integer", "default": 1, "minimum": 0},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["port"],
                      "items": {"type": "object", "required": ["port"],
                                "properties": {"port": {"type": "integer"}}}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        })
        self.assertEqual(errors(schema), [])

    def test_missing_types(self):
        """A field, an item and the root without type are each refused with their own wording."""
        schema = {"properties": {"spec": {"properties": {"l": {"type": "array", "items": {}}}}}}
        self.assertEqual(errors(schema), [
            f"{ROOT}.properties[spec].properties[l].items.type: Required value: must not be empty for specified array items",
            f"{ROOT}.properties[spec].type: Required value: must not be empty for specified object fields",
            f"{ROOT}.type: Required value: must not be empty at the root",
        ])

    def test_int_or_string_and_preserve_need_no_type(self):
        """int-or-string and preserve-unknown-fields fields may leave type empty."""
        schema = widget({"port": {"x-kubernetes-int-or-string": True},
                         "raw": {"x-kubernetes-preserve-unknown-fields": True}})
        self.assertEqual(errors(schema), [])

    def test_unknown_type(self):
        """An unknown type lists the supported ones; null points at nullable."""
        self.assertEqual(errors(widget({"a": {"type": "float"}})), [
            f'{ROOT}.properties[spec].properties[a].type: Unsupported value: "float": supported values: '
            '"array", "boolean", "integer", "number", "object", "string"'])
        self.assertEqual(errors(widget({"a": {"type": "null"}})), [
            f"{ROOT}.properties[spec].properties[a].type: Forbidden: type cannot be set to null, "
            "use nullable as an alternative"])

    def test_array_needs_items(self):
        """An array without items is refused."""
        self.assertEqual(errors(widget({"l": {"type": "array"}})), [
            f"{ROOT}.properties[spec].properties[l].items: Required value: must be specified"])

    def test_root_must_be_object(self):
        """The root must be an object."""
        self.assertEqual(errors({"type": "string"}), [
            f'{ROOT}.type: Invalid value: "string": must be object at the root'])


class ForbiddenTests(SynchronousTestCase):

    def test_ref(self):
        """$ref is not supported."""
        self.assertEqual(errors(widget({"a": {"type": "object", "$ref": "#/definitions/x"}})), [
            f"{ROOT}.properties[spec].properties[a].$ref: Forbidden: $ref is not supported"])

    def test_additional_properties_with_properties(self):
        """additionalProperties and properties together are refused in upstream's words."""
        schema = widget({"a": {"type": "object", "properties": {"b": {"type": "string"}},
                               "additionalProperties": {"type": "string"}}})
        self.assertEqual(errors(schema), [
            f"{ROOT}.properties[spec].properties[a].additionalProperties: Forbidden: "
            "additionalProperties and properties are mutual exclusive"])

    def test_items_array(self):
        """items must be a single schema."""
        self.assertIn(
            f"{ROOT}.properties[spec].properties[l].items: Forbidden: items must be a schema object and not an array",
            errors(widget({"l": {"type": "array", "items": [{"type": "string"}]}})))

    def test_unique_items(self):
        """uniqueItems is refused as upstream refuses it."""
        self.assertEqual(errors(widget({"l": {"type": "array", "uniqueItems": True, "items": {"type": "string"}}})), [
            f"{ROOT}.properties[spec].properties[l].uniqueItems: Forbidden: "
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"])

    def test_additional_properties_at_root(self):
        """additionalProperties may not be used at the root."""
        self.assertEqual(errors({"type": "object", "additionalProperties": {"type": "string"}}), [
            f"{ROOT}.additionalProperties: Forbidden: must not be used at the root"])

    def test_metadata_only_name_and_generate_name(self):
        """Root metadata may only restrict name and generateName."""
        ok = {"type": "object", "properties": {"metadata": {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 10}}}}}
        self.assertEqual(errors(ok), [])
        bad = {"type": "object", "properties": {"metadata": {"type": "object", "properties": {
            "labels": {"type": "object"}}}}}
        self.assertEqual(errors(bad), [
            f"{ROOT}.properties[metadata]: Forbidden: must not specify anything other than name and "
            "generateName, but metadata is implicitly specified"])

    def test_default_in_top_level_metadata(self):
        """Defaults are refused in top-level apiVersion, kind and metadata."""
        schema = {"type": "object", "properties": {"kind": {"type": "string", "default": "W"}}}
        self.assertEqual(errors(schema), [
            f"{ROOT}.properties[kind].default: Forbidden: must not be set in top-level kind"])

    def test_junctor_type_forbidden(self):
        """A type inside anyOf is refused; the int-or-string anyOf pattern is allowed."""
        schema = widget({"a": {"type": "string", "anyOf": [{"type": "string"}, {"maxLength": 3}]}})
        self.assertEqual(errors(schema), [
            f"{ROOT}.properties[spec].properties[a].anyOf[0].type: Forbidden: must be empty to be structural"])
        schema = widget({"a": {"x-kubernetes-int-or-string": True,
                               "anyOf": [{"type": "integer"}, {"type": "string"}]}})
        self.assertEqual(errors(schema), [])

    def test_preserve_false(self):
        """x-kubernetes-preserve-unknown-fields: false is refused."""
        self.assertEqual(errors(widget({"a": {"type": "object", "x-kubernetes-preserve-unknown-fields": False}})), [
            f"{ROOT}.properties[spec].properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: false: "
            "must be true or undefined"])

    def test_bad_pattern(self):
        """A pattern RE2 cannot compile is refused."""
        found = errors(widget({"a": {"type": "string", "pattern": "(?<=a)b"}}))
        self.assertEqual(len(found), 1)
        self.assertTrue(found[0].startswith(
            f'{ROOT}.properties[spec].properties[a].pattern: Invalid value: "(?<=a)b": '
            "must be a valid regular expression, but isn't: "), found)

    def test_too_deep(self):
        """A schema nested beyond the decoder bound is refused without recursion."""
        schema = {"type": "object"}
        for _ in range(200):
            schema = {"type": "object", "properties": {"a": schema}}
        self.assertEqual(errors(schema), [f"{ROOT}: Forbidden: must not be nested more than 100 levels deep"])

    def test_not_an_object(self):
        """A schema that is not an object is refused, not a traceback."""
        self.assertEqual(errors(["x"]), [f'{ROOT}: Invalid value: "array": must be an object'])
        self.assertEqual(errors(widget({"a": "x"})), [
            f'{ROOT}.properties[spec].properties[a]: Invalid value: "string": must be an object'])


class ListTypeTests(SynchronousTestCase):

    def test_list_map_keys_need_map(self):
        """list-map-keys require list-type map."""
        schema = widget({"l": {"type": "array", "x-kubernetes-list-type": "set",
                               "x-kubernetes-list-map-keys": ["name"], "items": {"type": "string"}}})
        self.assertEqual(errors(schema), [
            f'{ROOT}.properties[spec].properties[l].x-kubernetes-list-type: Invalid value: "set": '
            "must be map if x-kubernetes-list-map-keys is non-empty"])

    def test_map_keys_required_or_defaulted(self):
        """A map list's key must be required or defaulted, and scalar."""
        schema = widget({"l": {"type": "array", "x-kubernetes-list-type": "map",
                               "x-kubernetes-list-map-keys": ["name"],
                               "items": {"type": "object", "properties": {"name": {"type": "string"}}}}})
        self.assertEqual(errors(schema), [
            f"{ROOT}.properties[spec].properties[l].items.properties[name].default: Required value: "
            "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"])

    def test_map_key_must_exist(self):
        """Map keys must name item properties."""
        schema = widget({"l": {"type": "array", "x-kubernetes-list-type": "map",
                               "x-kubernetes-list-map-keys": ["nope"],
                               "items": {"type": "object", "properties": {"name": {"type": "string"}}}}})
        self.assertEqual(errors(schema), [
            f'{ROOT}.properties[spec].properties[l].x-kubernetes-list-map-keys: Invalid value: ["nope"]: '
            "entries must all be names of item properties"])

    def test_list_type_needs_array(self):
        """list-type on a non-array is refused."""
        self.assertEqual(errors(widget({"l": {"type": "string", "x-kubernetes-list-type": "set"}})), [
            f'{ROOT}.properties[spec].properties[l].type: Invalid value: "string": '
            "must be array if x-kubernetes-list-type is specified"])

    def test_unknown_map_type(self):
        """An unknown map-type lists atomic and granular."""
        self.assertEqual(errors(widget({"m": {"type": "object", "x-kubernetes-map-type": "merge"}})), [
            f'{ROOT}.properties[spec].properties[m].x-kubernetes-map-type: Unsupported value: "merge": '
            'supported values: "atomic", "granular"'])


class DefaultTests(SynchronousTestCase):

    def test_default_must_validate(self):
        """A default of the wrong type is refused at its default path."""
        found = errors(widget({"r": {"type": "integer", "default": "one"}}))
        self.assertEqual(len(found), 1)
        self.assertTrue(found[0].startswith(
            f'{ROOT}.properties[spec].properties[r].default: Invalid value: "string": '), found)

    def test_default_must_not_have_unknown_fields(self):
        """A default object with fields the schema does not know is refused."""
        found = errors(widget({"o": {"type": "object", "properties": {"a": {"type": "string"}},
                                     "default": {"a": "x", "b": "y"}}}))
        self.assertEqual(found, [
            f'{ROOT}.properties[spec].properties[o].default: Invalid value: {{"a":"x","b":"y"}}: '
            "must not have unknown fields"])


class KeywordTypeTests(SynchronousTestCase):

    def test_wrong_keyword_types(self):
        """Keywords holding the wrong JSON type are refused, not a traceback."""
        schema = widget({"a": {"type": "string", "required": "x", "maxLength": -1, "nullable": "yes",
                               "enum": "a", "minimum": "1"}})
        where = f"{ROOT}.properties[spec].properties[a]"
        self.assertEqual(errors(schema), [
            f'{where}.enum: Invalid value: "a": must be of type array',
            f"{where}.maxLength: Invalid value: -1: must be of type non-negative integer",
            f'{where}.minimum: Invalid value: "1": must be of type number',
            f'{where}.nullable: Invalid value: "yes": must be of type boolean',
            f'{where}.required: Invalid value: "x": must be of type array of strings',
        ])

    def test_multiple_of_positive(self):
        """multipleOf must be positive."""
        self.assertEqual(errors(widget({"a": {"type": "integer", "multipleOf": 0}})), [
            f"{ROOT}.properties[spec].properties[a].multipleOf: Invalid value: 0: must be greater than zero"])
