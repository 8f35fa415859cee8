"""
Value validation of custom resources: upstream's messages and field paths.
"""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.crdschema import CustomResourceSchema
from orchd.api.errors import StatusError
from tests.api.crdschema.support import messages, obj, widget


def check(spec_properties, spec, **extra):
    return messages(CustomResourceSchema(widget(spec_properties, **extra)).validate(obj(spec)))


class TypeTests(SynchronousTestCase):

    def test_integer_refuses_string(self):
        """A string where an integer belongs is refused with the value's type name."""
        self.assertEqual(check({"replicas": {"type": "integer"}}, {"replicas": "3"}), [
            'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"'])

    def test_integer_refuses_float(self):
        """A fractional number is no integer."""
        self.assertEqual(check({"replicas": {"type": "integer"}}, {"replicas": 1.5}), [
            'spec.replicas: Invalid value: "number": spec.replicas in body must be of type integer: "number"'])

    def test_number_accepts_integer(self):
        """An integer is a number."""
        self.assertEqual(check({"ratio": {"type": "number"}}, {"ratio": 2}), [])

    def test_boolean_is_not_integer(self):
        """true is not the integer 1."""
        self.assertEqual(check({"n": {"type": "integer"}}, {"n": True}), [
            'spec.n: Invalid value: "boolean": spec.n in body must be of type integer: "boolean"'])

    def test_null_refused_unless_nullable(self):
        """null is refused for a non-nullable field and accepted for a nullable one."""
        self.assertEqual(check({"s": {"type": "string"}}, {"s": None}), [
            'spec.s: Invalid value: "null": spec.s in body must be of type string: "null"'])
        self.assertEqual(check({"s": {"type": "string", "nullable": True}}, {"s": None}), [])

    def test_int_or_string(self):
        """x-kubernetes-int-or-string takes integers and strings only."""
        props = {"port": {"x-kubernetes-int-or-string": True}}
        self.assertEqual(check(props, {"port": 80}), [])
        self.assertEqual(check(props, {"port": "http"}), [])
        self.assertEqual(check(props, {"port": [1]}), [
            'spec.port: Invalid value: "array": spec.port in body must be of type integer,string: "array"'])

    def test_item_path(self):
        """Errors inside lists name the item by index."""
        props = {"items": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}}}}}
        self.assertEqual(check(props, {"items": [{"name": "a"}, {"name": "b"}, {"name": 3}]}), [
            'spec.items[2].name: Invalid value: "integer": spec.items[2].name in body must be of type string: "integer"'])

    def test_renders_as_upstream_422(self):
        """The errors render through StatusError.invalid as upstream's 422 message."""
        errors = CustomResourceSchema(widget({"replicas": {"type": "integer"}})).validate(
            obj({"replicas": "x"}))
        error = StatusError.invalid("Widget", "example.com", "w", errors)
        self.assertEqual(error.code, 422)
        self.assertIn('spec.replicas: Invalid value: "string"', error.message)


class RequiredAndEnumTests(SynchronousTestCase):

    def test_required(self):
        """A missing required field reads "Required value"."""
        self.assertEqual(check({"size": {"type": "string"}}, {}, required=["size"]),
                         ["spec.size: Required value"])

    def test_enum(self):
        """A value outside the enum lists the supported values."""
        self.assertEqual(check({"color": {"type": "string", "enum": ["a", "b"]}}, {"color": "x"}),
                         ['spec.color: Unsupported value: "x": supported values: "a", "b"'])

    def test_enum_of_numbers(self):
        """Numeric enum members are listed as JSON, and 1.0 matches 1."""
        props = {"n": {"type": "number", "enum": [1, 2.5]}}
        self.assertEqual(check(props, {"n": 1.0}), [])
        self.assertEqual(check(props, {"n": 3}),
                         ['spec.n: Unsupported value: 3: supported values: "1", "2.5"'])


class BoundsTests(SynchronousTestCase):

    def test_minimum(self):
        """Below minimum reads "should be greater than or equal to"."""
        self.assertEqual(check({"r": {"type": "integer", "minimum": 1}}, {"r": 0}),
                         ["spec.r: Invalid value: 0: spec.r in body should be greater than or equal to 1"])

    def test_exclusive_maximum(self):
        """exclusiveMaximum refuses the bound itself."""
        self.assertEqual(check({"r": {"type": "integer", "maximum": 5, "exclusiveMaximum": True}}, {"r": 5}),
                         ["spec.r: Invalid value: 5: spec.r in body should be less than 5"])

    def test_maximum_large_bound_printed_as_go(self):
        """A large bound is printed as Go prints a float64."""
        self.assertEqual(check({"r": {"type": "integer", "maximum": 1000000}}, {"r": 1000001}),
                         ["spec.r: Invalid value: 1000001: spec.r in body should be less than or equal to 1e+06"])

    def test_multiple_of(self):
        """multipleOf refuses other numbers and forgives float rounding."""
        self.assertEqual(check({"r": {"type": "number", "multipleOf": 0.1}}, {"r": 0.3}), [])
        self.assertEqual(check({"r": {"type": "integer", "multipleOf": 2}}, {"r": 3}),
                         ["spec.r: Invalid value: 3: spec.r in body should be a multiple of 2"])

    def test_max_length(self):
        """Too long strings read "Too long: may not be longer than N"."""
        self.assertEqual(check({"n": {"type": "string", "maxLength": 3}}, {"n": "abcd"}),
                         ["spec.n: Too long: may not be longer than 3"])

    def test_min_length(self):
        """Too short strings read "should be at least N chars long"."""
        self.assertEqual(check({"n": {"type": "string", "minLength": 2}}, {"n": "a"}),
                         ['spec.n: Invalid value: "a": spec.n in body should be at least 2 chars long'])

    def test_max_items(self):
        """Too many items read "Too many: N: must have at most M items"."""
        self.assertEqual(check({"l": {"type": "array", "maxItems": 1, "items": {"type": "string"}}},
                               {"l": ["a", "b"]}),
                         ["spec.l: Too many: 2: must have at most 1 items"])

    def test_min_items(self):
        """Too few items read "should have at least N items"."""
        self.assertEqual(check({"l": {"type": "array", "minItems": 1, "items": {"type": "string"}}},
                               {"l": []}),
                         ["spec.l: Invalid value: []: spec.l in body should have at least 1 items"])

    def test_max_properties(self):
        """maxProperties reads like maxItems, as upstream maps both to Too many."""
        self.assertEqual(check({"m": {"type": "object", "maxProperties": 1,
                                      "additionalProperties": {"type": "string"}}},
                               {"m": {"a": "1", "b": "2"}}),
                         ["spec.m: Too many: 2: must have at most 1 items"])


class PatternAndFormatTests(SynchronousTestCase):

    def test_pattern_is_searched(self):
        """pattern is searched unanchored, as Go's regexp.MatchString does."""
        props = {"n": {"type": "string", "pattern": "[a-z]+"}}
        self.assertEqual(check(props, {"n": "1a1"}), [])
        self.assertEqual(check(props, {"n": "123"}),
                         ["spec.n: Invalid value: \"123\": spec.n in body should match '[a-z]+'"])

    def test_date_time(self):
        """format date-time refuses other strings."""
        props = {"t": {"type": "string", "format": "date-time"}}
        self.assertEqual(check(props, {"t": "2024-01-02T03:04:05Z"}), [])
        self.assertEqual(check(props, {"t": "yesterday"}), [
            'spec.t: Invalid value: "yesterday": spec.t in body must be of type date-time: "yesterday"'])

    def test_formats(self):
        """Each checked format accepts a good value and refuses a bad one."""
        cases = {"uuid": ("123e4567-e89b-12d3-a456-426614174000", "nope"),
                 "ipv4": ("10.0.0.1", "10.0.0.300"), "ipv6": ("::1", "1.2.3.4"),
                 "cidr": ("10.0.0.0/8", "10.0.0.0"), "hostname": ("a.example.com", "-a"),
                 "email": ("a@example.com", "nope"), "byte": ("aGk=", "***"),
                 "date": ("2024-02-29", "2023-02-29")}
        for name, (good, bad) in cases.items():
            props = {"v": {"type": "string", "format": name}}
            self.assertEqual(check(props, {"v": good}), [], name)
            self.assertEqual(len(check(props, {"v": bad})), 1, name)

    def test_formats_refuse_a_trailing_newline(self):
        """A value that is good but for a trailing newline is refused, as Go's regexp refuses it."""
        for name, good in (("uuid", "123e4567-e89b-12d3-a456-426614174000"),
                           ("date", "2024-02-29"), ("uri", "https://example.com/")):
            props = {"v": {"type": "string", "format": name}}
            self.assertEqual(len(check(props, {"v": good + "\n"})), 1, name)

    def test_unchecked_formats(self):
        """Numeric formats such as int32 are hints upstream does not check."""
        self.assertEqual(check({"n": {"type": "integer", "format": "int32"}}, {"n": 2 ** 40}), [])


class ObjectTests(SynchronousTestCase):

    def test_additional_properties_values(self):
        """Values of a map are validated with additionalProperties, named by key."""
        props = {"m": {"type": "object", "additionalProperties": {"type": "integer"}}}
        self.assertEqual(check(props, {"m": {"a": 1, "b": "x"}}), [
            'spec.m.b: Invalid value: "string": spec.m.b in body must be of type integer: "string"'])

    def test_embedded_resource(self):
        """An embedded resource needs apiVersion and kind."""
        props = {"template": {"type": "object", "x-kubernetes-embedded-resource": True,
                              "x-kubernetes-preserve-unknown-fields": True}}
        self.assertEqual(check(props, {"template": {"metadata": {"name": 1}}}), [
            "spec.template.apiVersion: Required value: must not be empty",
            "spec.template.kind: Required value: must not be empty",
            'spec.template.metadata.name: Invalid value: "integer": '
            'spec.template.metadata.name in body must be of type string: "integer"'])

    def test_one_of(self):
        """oneOf refuses values matching none of its schemas."""
        props = {"v": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                       "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}}
        self.assertEqual(check(props, {"v": {"a": "x"}}), [])
        self.assertEqual(check(props, {"v": {}}), [
            "spec.v: Invalid value: {}: spec.v in body must validate one and only one schema (oneOf)"])
