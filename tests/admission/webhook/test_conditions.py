"""CEL matchConditions: compiled once, evaluated over object, oldObject and request."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.admission.webhook.conditions import ConditionError, cel_variables, compile_condition


class ConditionTests(SynchronousTestCase):
    def test_evaluates(self):
        """An expression over the variables gives a boolean."""
        condition = compile_condition(
            "object.metadata.name == 'a' && oldObject == null && request.operation == 'CREATE'")
        self.assertTrue(condition.evaluate(cel_variables(
            {"metadata": {"name": "a"}}, None, {"operation": "CREATE"})))
        self.assertFalse(condition.evaluate(cel_variables(
            {"metadata": {"name": "b"}}, None, {"operation": "CREATE"})))

    def test_refused_at_compile(self):
        """Syntax errors and the variables this server does not offer are refused."""
        for expression in ("object.metadata.name ==", "authorizer.group('').check()",
                           "params.x == 1"):
            self.assertRaises(ConditionError, compile_condition, expression)

    def test_evaluation_errors(self):
        """A missing field or a non-boolean result is an error, not a silent false."""
        variables = cel_variables({"metadata": {}}, None, {})
        self.assertRaises(ConditionError, compile_condition("object.spec.x == 1").evaluate,
                          variables)
        self.assertRaises(ConditionError, compile_condition("'text'").evaluate, variables)
