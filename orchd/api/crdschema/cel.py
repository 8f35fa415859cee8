# -*- test-case-name: tests.api.crdschema.test_cel -*-
"""
CEL rules (C{x-kubernetes-validations}): refused until evaluated.
"""

from orchd.api.errors import FieldError


def check_rules(schema, rules, path):
    """Every rule is refused, naming it: a rule that is not run must not be accepted."""
    errors = []
    for position, rule in enumerate(rules if isinstance(rules, list) else ()):
        text = rule.get("rule") if isinstance(rule, dict) else rule
        errors.append(FieldError.invalid(
            f"{path}.x-kubernetes-validations[{position}].rule", text,
            "compilation failed: CEL validation rules are not supported by this server"))
    return errors


def compile_rules(node, rules):
    return ()


def correlate_list(node, value, old):
    return None
