# -*- test-case-name: tests.api.crdschema -*-
"""
L{CustomResourceSchema}: one served version's schema, compiled once and
applied to every custom resource written or read.

The order a write goes through is the caller's (upstream's): decode,
C{prune} (reporting unknown fields for C{fieldValidation}), C{default},
then C{validate}; objects read from storage are pruned and defaulted again
(the schema may have changed since they were written).
"""

from orchd.api.crdschema import patch
from orchd.api.crdschema.compiled import _MISSING, Node
from orchd.api.crdschema.structural import structural_errors as _structural
from orchd.api.errors import FieldError



def _cel():
    """
    The CEL module, imported on first use: cel-python and its parser take
    about 150 ms to import, which every start would pay for CRDs that have
    no C{x-kubernetes-validations} (and in-process test servers start often).
    """
    from orchd.api.crdschema import cel
    return cel


def _compile_rules(node, rules):
    return _cel().compile_rules(node, rules)


def _check_rules(schema, rules, path, uncorrelatable=None):
    return _cel().check_rules(schema, rules, path, uncorrelatable)

class _Context:
    """
    What one C{validate} call carries down the tree: the CEL cost budget.

    The budget counts rule evaluations weighted by the size of the value a
    rule sees; once spent, no further rule runs and the object is refused,
    as upstream refuses it when its runtime cost budget runs out.
    """

    __slots__ = ("budget", "exhausted")

    def __init__(self, budget):
        self.budget = budget
        self.exhausted = False

    def correlate_list(self, node, value, old):
        """The old item for each new item, for transition rules below a list."""
        return _cel().correlate_list(node, value, old)

    def run_rules(self, node, value, path, errors, old):
        if self.exhausted:
            return
        for rule in node.rules:
            self.budget -= rule.cost(value)
            if self.budget < 0:
                self.exhausted = True
                errors.append(FieldError.invalid(
                    path, node.type or "object",
                    "validation failed due to running out of cost budget, "
                    "no further validation rules will be run"))
                return
            error = rule.check(value, old, path, node)
            if error is not None:
                errors.append(error)


class CustomResourceSchema:
    """
    A structural schema compiled for defaulting, pruning and validation.

    Build it only from a schema L{structural_errors} accepts.

    @raise ValueError: (from the constructor) a pattern or CEL rule that
        does not compile, which L{structural_errors} would have refused.
    """

    #: CEL budget of one validate call, in L{cel.Rule.cost} units (100 per
    #: evaluation plus one per value node it sees).  cel-python takes about
    #: 0.2 ms per evaluation of a small rule, so this bounds the rules of one
    #: request to roughly half a second of CPU: 2,000 small evaluations, or
    #: rules over a few hundred thousand values; upstream bounds the same with
    #: its runtime cost budget.
    RUNTIME_BUDGET = 200_000

    def __init__(self, schema):
        self.schema = schema
        self.root = Node(schema, _compile_rules)
        self._patch_schema = None

    def default(self, obj):
        """Fill the schema's defaults into C{obj} in place (absent or non-nullable null fields)."""
        if type(obj) is dict:
            self.root.apply_defaults(obj)
        return obj

    def prune(self, obj):
        """
        Remove fields the schema does not know from C{obj}, in place.

        @return: the removed fields' paths, e.g. C{["spec.foo"]}.
        """
        unknown = []
        if type(obj) is dict:
            self.root.prune(obj, "", unknown, root=True)
        return unknown

    def validate(self, obj, old=None):
        """
        The field errors of C{obj}; C{old} (the stored object) enables CEL transition rules.
        """
        errors = []
        context = _Context(self.RUNTIME_BUDGET) if self.root.has_rules else _NO_RULES
        self.root.validate(obj, "", errors, old if old is not None else _MISSING, context)
        return errors

    @property
    def patch_schema(self):
        """The server-side apply metadata of the schema (L{orchd.api.patchschema} rows)."""
        if self._patch_schema is None:
            self._patch_schema = patch.patch_schema(self.root)
        return self._patch_schema

    def field_at(self, path):
        """
        The sub-schema (a dict) at a dotted path such as C{.spec.replicas} or
        C{status.conditions}, or None when the schema does not name it.

        Lists are stepped through transparently (C{spec.items.name} is the
        schema of each item's name), as printer columns' JSONPaths need.
        """
        node = self.root
        for name in _steps(path):
            while node is not None and node.items is not None and node.properties is None:
                node = node.items
            if node is None:
                return None
            if node.properties is not None and name in node.properties:
                node = node.properties[name]
            elif node.additional is not None:
                node = node.additional
            else:
                return None
        return node.schema if node is not None else None


def _steps(path):
    """
    The field names of a dotted path or simple JSONPath: C{.spec.replicas},
    C{spec.items[*].name}, C{.status.conditions[?(@.type=="Ready")].status},
    C{.metadata['name']}.  List subscripts and filters name no field.
    """
    steps, current, position, length = [], [], 0, len(path)
    while position < length:
        char = path[position]
        if char == ".":
            if current:
                steps.append("".join(current))
                current = []
            position += 1
        elif char == "[":
            if current:
                steps.append("".join(current))
                current = []
            end, depth, quote = position + 1, 1, None
            while end < length and depth:
                c = path[end]
                if quote:
                    if c == quote:
                        quote = None
                elif c in "'\"":
                    quote = c
                elif c == "[":
                    depth += 1
                elif c == "]":
                    depth -= 1
                end += 1
            inner = path[position + 1:end - 1].strip()
            if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
                steps.append(inner[1:-1])
            position = end
        elif char in "{}" or (char == "$" and not current):
            position += 1
        else:
            current.append(char)
            position += 1
    if current:
        steps.append("".join(current))
    return steps


class _NoRules:
    """The context of schemas without CEL rules: nothing to carry."""

    __slots__ = ()

    def correlate_list(self, node, value, old):  # pragma: no cover - only with rules
        return None

    def run_rules(self, node, value, path, errors, old):  # pragma: no cover - only with rules
        return


_NO_RULES = _NoRules()


def structural_errors(schema, path):
    """
    The field errors that keep C{schema} (an C{openAPIV3Schema}) from being
    served, with upstream's messages; C{path} is its field path in the
    CustomResourceDefinition, e.g. C{spec.versions[0].schema.openAPIV3Schema}.

    Beyond upstream's structural rules: defaults must validate against
    their schema and have no unknown fields, and every CEL rule must
    compile with the functions this server supports.
    """
    errors = _structural(schema, path, _check_rules)
    if errors:
        return errors
    root = Node(schema)
    errors.extend(_default_errors(root, path))
    errors.sort(key=str)
    return errors


def _default_errors(node, path):
    """Each default, pruned and validated against its own schema (upstream's defaulting checks)."""
    errors = []
    pending = [(node, path, False)]
    while pending:
        node, where, meta = pending.pop()
        if node.default is not _MISSING:
            value = node.default
            copy = _copy_json(value)
            unknown = []
            node.prune(copy, "", unknown)
            if unknown:
                errors.append(FieldError.invalid(f"{where}.default", value, "must not have unknown fields"))
            else:
                node.apply_defaults(copy)
                found = []
                node.validate(copy, "", found, _MISSING, _NO_RULES)
                for error in found:
                    field = f"{where}.default" + (f".{error.field}" if error.field else "")
                    errors.append(FieldError(error.type, field, error.value, error.detail))
        if node.properties:
            for name, sub in node.properties.items():
                pending.append((sub, f"{where}.properties[{name}]", meta))
        if node.items is not None:
            pending.append((node.items, f"{where}.items", meta))
        if node.additional is not None:
            pending.append((node.additional, f"{where}.additionalProperties", meta))
    return errors


def _copy_json(value):
    kind = type(value)
    if kind is dict:
        return {k: _copy_json(v) for k, v in value.items()}
    if kind is list:
        return [_copy_json(v) for v in value]
    return value


__all__ = ["CustomResourceSchema", "structural_errors"]
