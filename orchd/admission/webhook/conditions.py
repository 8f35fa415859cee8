# -*- test-case-name: tests.admission.webhook.test_conditions -*-
"""
A webhook's C{matchConditions}: CEL expressions over the write, all of
which must be true for the webhook to be called.

They are compiled once, when a configuration is validated and when the
plugin picks it up. The variables are upstream's C{object}, C{oldObject}
and C{request} (the review's request); C{authorizer} is not offered, so an
expression using it is refused when the configuration is written (422)
rather than ignored. Evaluating fails (a missing field, a non-boolean
result) the way upstream does: the webhook's failurePolicy decides.
"""

import functools

#: Upstream's limit on the number of conditions of one webhook.
MAX_CONDITIONS = 64
#: Variables upstream offers that this server does not.
UNSUPPORTED_VARIABLES = ("authorizer", "params", "namespaceObject", "variables")



@functools.cache
def _environment():
    """
    The CEL environment, built on first use: building its parser takes a
    quarter of a second, which every start (and every in-process test
    server) would pay though few webhooks have conditions.
    """
    import celpy
    return celpy.Environment()


class ConditionError(Exception):
    """A condition that cannot be compiled or evaluated; the message says why."""


def compile_condition(expression):
    """
    A compiled condition: C{evaluate(variables) -> bool}.

    @raise ConditionError: for an expression that does not parse, or names
        a variable this server does not offer.
    """
    from celpy.celparser import CELParseError
    try:
        ast = _environment().compile(expression)
    except CELParseError as error:
        first = str(error).splitlines()[0] if str(error) else "syntax error"
        raise ConditionError(f"compilation failed: {first}") from None
    except Exception as error:     # the parser's own failures on odd input
        raise ConditionError(f"compilation failed: {error}") from None
    for tree in ast.iter_subtrees():
        if tree.data == "ident" and str(tree.children[0]) in UNSUPPORTED_VARIABLES:
            raise ConditionError(
                f"compilation failed: the variable {str(tree.children[0])!r} is not supported "
                f"by this server (supported: object, oldObject, request)")
    return Condition(_environment().program(ast))


class Condition:
    """One compiled expression."""

    __slots__ = ("_program",)

    def __init__(self, program):
        self._program = program

    def evaluate(self, variables):
        """
        @param variables: C{{name: CEL value}} (see L{cel_variables}).
        @raise ConditionError: for an error or a result that is not a boolean.
        """
        try:
            result = self._program.evaluate(variables)
        except Exception as error:
            raise ConditionError(f"evaluation error: {_first_line(error)}") from None
        from celpy.celtypes import BoolType
        if not isinstance(result, BoolType):
            raise ConditionError("evaluation error: the expression did not return a boolean")
        return bool(result)


def _first_line(error):
    args = getattr(error, "args", ())
    text = str(args[0]) if args else str(error)
    return text.splitlines()[0] if text else type(error).__name__


def cel_variables(obj, old, request):
    """The activation of a condition: upstream's variables as CEL values (null when absent)."""
    from celpy import json_to_cel
    return {"object": json_to_cel(obj), "oldObject": json_to_cel(old),
            "request": json_to_cel(request)}
