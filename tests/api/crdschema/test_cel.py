"""
CEL validation rules: evaluated with upstream's messages, or refused by name.
"""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.crdschema import CustomResourceSchema, structural_errors
from tests.api.crdschema.support import ROOT, messages, obj

RULES = f"{ROOT}.properties[spec].x-kubernetes-validations"


def schema(*rules, **spec_extra):
    spec = {"type": "object", "x-kubernetes-validations": list(rules), "properties": {
        "min": {"type": "integer"}, "max": {"type": "integer"}, "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "required": ["name"], "properties": {
                      "name": {"type": "string"},
                      "port": {"type": "integer", "x-kubernetes-validations": [
                          {"rule": "self == oldSelf", "message": "port is immutable"}]}}}}}}
    spec.update(spec_extra)
    return {"type": "object", "properties": {"spec": spec}}


def refusals(*rules):
    return messages(structural_errors(schema(*rules), ROOT))


def run(rules, spec, old=None):
    compiled = CustomResourceSchema(schema(*rules))
    return messages(compiled.validate(obj(spec), None if old is None else obj(old)))


class EvaluationTests(SynchronousTestCase):

    def test_failed_rule_default_message(self):
        """A failing rule without message reads "failed rule: <rule>" on the object's path."""
        self.assertEqual(run([{"rule": "self.min <= self.max"}], {"min": 3, "max": 1}),
                         ['spec: Invalid value: "object": failed rule: self.min <= self.max'])

    def test_passing_rule(self):
        """A rule that holds adds nothing."""
        self.assertEqual(run([{"rule": "self.min <= self.max"}], {"min": 1, "max": 3}), [])

    def test_message(self):
        """message replaces the default text."""
        self.assertEqual(run([{"rule": "self.min <= self.max", "message": "min must not exceed max"}],
                             {"min": 3, "max": 1}),
                         ['spec: Invalid value: "object": min must not exceed max'])

    def test_message_expression(self):
        """messageExpression is evaluated for the message."""
        rule = {"rule": "self.min <= self.max", "messageExpression": "'min ' + string(self.min) + ' too big'"}
        self.assertEqual(run([rule], {"min": 3, "max": 1}), ['spec: Invalid value: "object": min 3 too big'])

    def test_reason_and_field_path(self):
        """reason sets the error type and fieldPath the path."""
        rule = {"rule": "self.min >= 0", "reason": "FieldValueForbidden", "fieldPath": ".min",
                "message": "must not be negative"}
        self.assertEqual(run([rule], {"min": -1, "max": 1}), ["spec.min: Forbidden: must not be negative"])

    def test_missing_field_error(self):
        """A rule reading an absent field reports the evaluation error."""
        self.assertEqual(run([{"rule": "self.min <= self.max"}], {"min": 1}),
                         ['spec: Invalid value: "object": no such key: max evaluating rule: self.min <= self.max'])

    def test_has_and_macros(self):
        """has(), all() and string functions evaluate."""
        rule = {"rule": "!has(self.name) || self.tags.all(t, t.startsWith(self.name))"}
        self.assertEqual(run([rule], {"name": "a", "tags": ["ab", "ac"]}), [])
        self.assertEqual(len(run([rule], {"name": "a", "tags": ["ab", "b"]})), 1)

    def test_kubernetes_extensions(self):
        """Kubernetes' string and list library functions evaluate."""
        rule = {"rule": "self.name.lowerAscii() == 'ab' && self.tags.isSorted() && self.name.split('').size() >= 0"}
        self.assertEqual(run([rule], {"name": "AB", "tags": ["a", "b"]}), [])
        self.assertEqual(len(run([rule], {"name": "AB", "tags": ["b", "a"]})), 1)

    def test_transition_rule_runs_on_update_only(self):
        """A rule reading oldSelf is skipped on create and enforced on update."""
        rule = {"rule": "self.name == oldSelf.name", "message": "name is immutable"}
        self.assertEqual(run([rule], {"name": "b"}), [])
        self.assertEqual(run([rule], {"name": "b"}, old={"name": "a"}),
                         ['spec: Invalid value: "object": name is immutable'])

    def test_transition_rule_in_map_list_correlates_by_key(self):
        """Items of a map list see the old item with the same key as oldSelf."""
        new = {"ports": [{"name": "b", "port": 2}, {"name": "a", "port": 9}]}
        old = {"ports": [{"name": "a", "port": 1}]}
        self.assertEqual(run([], new, old=old),
                         ['spec.ports[1].port: Invalid value: "integer": port is immutable'])

    def test_budget_exhaustion(self):
        """Once the cost budget is spent no further rule runs and the object is refused."""
        compiled = CustomResourceSchema(schema({"rule": "true"}))
        compiled.RUNTIME_BUDGET = 50
        self.assertEqual(messages(compiled.validate(obj({}))), [
            'spec: Invalid value: "object": validation failed due to running out of cost budget, '
            "no further validation rules will be run"])


class RefusalTests(SynchronousTestCase):

    def test_unsupported_function_named(self):
        """A Kubernetes function this server lacks is refused, naming it and the rule."""
        self.assertEqual(refusals({"rule": "quantity(self.name).isGreaterThan(quantity('1'))"}), [
            f"{RULES}[0].rule: Invalid value: \"quantity(self.name).isGreaterThan(quantity('1'))\": "
            "compilation failed: functions 'isGreaterThan', 'quantity' are not supported by this server "
            "(rule: quantity(self.name).isGreaterThan(quantity('1')))"])

    def test_syntax_error(self):
        """A rule that does not parse is refused."""
        self.assertEqual(refusals({"rule": "self.min <="}), [
            f'{RULES}[0].rule: Invalid value: "self.min <=": compilation failed: ERROR: <input>:1:10: '
            "Syntax error (rule: self.min <=)"])

    def test_undeclared_reference(self):
        """Names other than self, oldSelf and macro variables are refused."""
        self.assertEqual(refusals({"rule": "other.x == 1"}), [
            f'{RULES}[0].rule: Invalid value: "other.x == 1": compilation failed: '
            "undeclared reference to 'other' (rule: other.x == 1)"])

    def test_nested_comprehension(self):
        """Nested comprehensions are refused as their cost cannot be bounded."""
        found = refusals({"rule": "self.tags.all(a, self.tags.exists(b, a == b))"})
        self.assertEqual(len(found), 1)
        self.assertIn("nested comprehensions", found[0])

    def test_optional_old_self(self):
        """optionalOldSelf (CEL optionals) is refused by name."""
        found = refusals({"rule": "self.name == oldSelf.name", "optionalOldSelf": True})
        self.assertEqual(found, [
            f"{RULES}[0].optionalOldSelf: Invalid value: true: optional oldSelf (CEL optional types) "
            "is not supported by this server (rule: self.name == oldSelf.name)"])

    def test_bad_field_path_and_reason(self):
        """fieldPath must name a field; reason must be a known one."""
        found = refusals({"rule": "true", "fieldPath": ".nope", "reason": "Nope"})
        self.assertEqual(len(found), 2)
        self.assertIn(f'{RULES}[0].reason: Unsupported value: "Nope"', found[0] + found[1])

    def test_empty_rule(self):
        """A rule without text is required."""
        self.assertEqual(refusals({"message": "x"}), [f"{RULES}[0].rule: Required value"])

    def test_too_deep(self):
        """An expression nested deeper than the evaluator can go is refused."""
        found = refusals({"rule": "(" * 100 + "true" + ")" * 100})
        self.assertEqual(len(found), 1)
        self.assertIn("expression nested too deeply", found[0])


class EscapingAndCorrelationTests(SynchronousTestCase):

    def test_escaped_property_names(self):
        """Properties with dashes, dots or reserved names are read by their escaped names."""
        spec = {"type": "object", "x-kubernetes-validations": [
            {"rule": "self.max__dash__surge == 1 && self.__namespace__ == 'a' && self.a__dot__b"}],
            "properties": {"max-surge": {"type": "integer"}, "namespace": {"type": "string"},
                           "a.b": {"type": "boolean"}}}
        compiled = CustomResourceSchema({"type": "object", "properties": {"spec": spec}})
        self.assertEqual(compiled.validate(obj({"max-surge": 1, "namespace": "a", "a.b": True})), [])
        self.assertEqual(len(compiled.validate(obj({"max-surge": 2, "namespace": "a", "a.b": True}))), 1)

    def test_map_keys_not_escaped(self):
        """Keys of additionalProperties maps keep their spelling."""
        spec = {"type": "object", "x-kubernetes-validations": [{"rule": "self.labels['a-b'] == 'x'"}],
                "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}}}
        compiled = CustomResourceSchema({"type": "object", "properties": {"spec": spec}})
        self.assertEqual(compiled.validate(obj({"labels": {"a-b": "x"}})), [])

    def test_transition_rule_in_atomic_list_refused(self):
        """oldSelf below items of a list that is not a map list is refused."""
        schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "l": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [
                {"rule": "self == oldSelf"}]}}}}}}
        self.assertEqual(messages(structural_errors(schema, ROOT)), [
            f'{ROOT}.properties[spec].properties[l].items.x-kubernetes-validations[0].rule: '
            'Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion '
            f"of the schema within {ROOT}.properties[spec].properties[l].items"])


class UpstreamWordingTests(SynchronousTestCase):

    def test_root_rule_path_is_nil(self):
        """A failing rule at the root is reported at "<nil>", as upstream renders the root path."""
        schema = {"type": "object", "x-kubernetes-validations": [
            {"rule": "self.metadata.name.startsWith('my-prefix')"}]}
        found = messages(CustomResourceSchema(schema).validate(obj({})))
        self.assertEqual(found, ['<nil>: Invalid value: "object": failed rule: '
                                 "self.metadata.name.startsWith('my-prefix')"])

    def test_evaluation_error_names_message(self):
        """An evaluation error names the rule's message when it has one (upstream's ruleErrorString)."""
        rule = {"rule": "self.max == oldSelf.max", "message": "spec.max is immutable"}
        self.assertEqual(run([rule], {"min": 1}, old={"min": 1}), [
            'spec: Invalid value: "object": no such key: max evaluating rule: spec.max is immutable'])
