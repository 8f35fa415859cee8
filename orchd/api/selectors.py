# -*- test-case-name: tests.api.test_selectors -*-
"""
Label and field selectors, parsed and matched as upstream does.

Field selectors are in L{orchd.api.fieldselectors} and re-exported here.
Both run on every list and watch, so parsing is cached and matching is a
loop over a few requirements.  Errors are 400s whose text follows upstream
(C{labels/selector.go}, C{fields/selector.go}), since kubectl shows it.
"""

from functools import lru_cache

from orchd.api.errors import StatusError, aggregate
# Field selectors live in their own module; they are part of this API.
from orchd.api.fieldselectors import (
    METADATA_FIELDS, FieldRequirement, FieldSelector, parse_field_selector,
)
from orchd.api.meta import label_key_errors, label_value_errors
from orchd.api.query import parse_int64

__all__ = [
    "EQUALS", "DOUBLE_EQUALS", "NOT_EQUALS", "IN", "NOT_IN", "EXISTS", "DOES_NOT_EXIST",
    "GREATER_THAN", "LESS_THAN", "EVERYTHING", "NOTHING", "LabelSelector", "Requirement",
    "new_requirement", "parse_label_selector", "selector_from_label_selector_object",
    "METADATA_FIELDS", "FieldRequirement", "FieldSelector", "parse_field_selector",
]

# Operators, spelled as upstream's selection package spells them.
EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
IN = "in"
NOT_IN = "notin"
EXISTS = "exists"
DOES_NOT_EXIST = "!"
GREATER_THAN = "gt"
LESS_THAN = "lt"

_BINARY = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN)

# Lexer tokens.
_EOS, _CLOSE, _COMMA, _NOT, _DEQ, _EQ, _GT, _ID, _IN, _LT, _NEQ, _NOTIN, _OPEN, _ERROR = range(14)
_TOKENS = {
    ")": _CLOSE, ",": _COMMA, "!": _NOT, "==": _DEQ, "=": _EQ, ">": _GT, "in": _IN,
    "<": _LT, "!=": _NEQ, "notin": _NOTIN, "(": _OPEN,
}
_SPECIAL = frozenset("=!(),><")
_SPACE = frozenset(" \t\r\n")


def _quote(value):
    """Go's C{%q} for the strings selector messages quote."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Requirement:
    """One term of a label selector: C{key <operator> values}."""

    __slots__ = ("key", "operator", "values", "_set", "_number")

    def __init__(self, key, operator, values=()):
        self.key = key
        self.operator = operator
        self.values = tuple(values)
        self._set = frozenset(self.values)
        self._number = parse_int64(self.values[0]) if len(self.values) == 1 else None

    def matches(self, labels):
        op = self.operator
        if op in (IN, EQUALS, DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self._set
        if op in (NOT_IN, NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self._set
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        value = labels.get(self.key)
        if value is None or self._number is None:
            return False
        number = parse_int64(value)
        if number is None:
            return False
        return number > self._number if op == GREATER_THAN else number < self._number

    def __str__(self):
        op = self.operator
        if op == EXISTS:
            return self.key
        if op == DOES_NOT_EXIST:
            return "!" + self.key
        values = ",".join(sorted(self.values))
        if op in (IN, NOT_IN):
            return f"{self.key} {op} ({values})"
        symbol = {GREATER_THAN: ">", LESS_THAN: "<"}.get(op, op)
        return f"{self.key}{symbol}{values}"

    def __repr__(self):
        return f"<Requirement {self}>"

    def __eq__(self, other):
        return (isinstance(other, Requirement) and self.key == other.key
                and self.operator == other.operator and self.values == other.values)

    def __hash__(self):
        return hash((self.key, self.operator, self.values))


def new_requirement(key, operator, values=()):
    """
    Build a validated requirement, as upstream's NewRequirement.

    @raise ValueError: with upstream's aggregated message.
    """
    values = list(values)
    if not isinstance(key, str) or not all(isinstance(v, str) for v in values):
        raise ValueError(f"label selector keys and values must be strings: {key!r} {values!r}")
    errors = []
    problems = label_key_errors(key)
    if problems:
        errors.append(f"key: Invalid value: {_quote(key)}: {'; '.join(problems)}")
    rendered = "[]string{" + ", ".join(_quote(v) for v in values) + "}"
    if operator in (IN, NOT_IN):
        if not values:
            errors.append(f"values: Invalid value: {rendered}: "
                          "for 'in', 'notin' operators, values set can't be empty")
    elif operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
        if len(values) != 1:
            errors.append(f"values: Invalid value: {rendered}: "
                          "exact-match compatibility requires one single value")
    elif operator in (EXISTS, DOES_NOT_EXIST):
        if values:
            errors.append(f"values: Invalid value: {rendered}: "
                          "values set must be empty for exists and does not exist")
    elif operator in (GREATER_THAN, LESS_THAN):
        if len(values) != 1:
            errors.append(f"values: Invalid value: {rendered}: "
                          "for 'Gt', 'Lt' operators, exactly one value is required")
        for i, value in enumerate(values):
            if parse_int64(value) is None:
                errors.append(f"values[{i}]: Invalid value: {_quote(value)}: "
                              "for 'Gt', 'Lt' operators, the value must be an integer")
    else:
        supported = ", ".join(_quote(o) for o in _BINARY + (EXISTS, DOES_NOT_EXIST))
        errors.append(f"operator: Unsupported value: {_quote(str(operator))}: "
                      f"supported values: {supported}")
    for i, value in enumerate(values):
        problems = label_value_errors(value)
        if problems:
            errors.append(f"values[{i}][{key}]: Invalid value: {_quote(value)}: "
                          + "; ".join(problems))
    if errors:
        raise ValueError(aggregate(errors))
    return Requirement(key, operator, values)


class LabelSelector:
    """An AND of requirements; matches a dict of labels."""

    __slots__ = ("requirements", "_nothing")

    def __init__(self, requirements=(), nothing=False):
        self.requirements = tuple(sorted(requirements, key=lambda r: r.key))
        self._nothing = nothing

    @property
    def empty(self):
        """True if the selector does not restrict anything (it matches all)."""
        return not self.requirements and not self._nothing

    def matches(self, labels):
        if self._nothing:
            return False
        labels = labels or {}
        for requirement in self.requirements:
            if not requirement.matches(labels):
                return False
        return True

    def requires_exact_match(self, key):
        """The value C{key} must have, if the selector pins it to one value."""
        for requirement in self.requirements:
            if requirement.key == key:
                pinned = requirement.operator in (EQUALS, DOUBLE_EQUALS, IN)
                if pinned and len(requirement.values) == 1:
                    return requirement.values[0]
                return None
        return None

    def __str__(self):
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self):
        return "<LabelSelector nothing>" if self._nothing else f"<LabelSelector {self}>"

    def __eq__(self, other):
        return (isinstance(other, LabelSelector) and self.requirements == other.requirements
                and self._nothing == other._nothing)

    def __hash__(self):
        return hash((self.requirements, self._nothing))


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(nothing=True)


# -- label selector text -------------------------------------------------------

def _lex(text):
    """Split selector text into (token, literal) pairs, ending with _EOS."""
    items = []
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos] in _SPACE:
            pos += 1
        if pos >= end:
            items.append((_EOS, ""))
            return items
        if text[pos] in _SPECIAL:
            buffer, token, literal = "", None, ""
            while pos < end and text[pos] in _SPECIAL:
                candidate = buffer + text[pos]
                if candidate in _TOKENS:
                    buffer, token, literal = candidate, _TOKENS[candidate], candidate
                    pos += 1
                elif token is not None:
                    break
                else:
                    buffer = candidate
                    pos += 1
            if token is None:
                items.append((_ERROR, f"error expected: keyword found '{buffer}'"))
            else:
                items.append((token, literal))
        else:
            start = pos
            while pos < end and text[pos] not in _SPECIAL and text[pos] not in _SPACE:
                pos += 1
            word = text[start:pos]
            items.append((_TOKENS.get(word, _ID), word))


class _Parser:
    """Upstream's recursive-descent label selector parser, message for message."""

    def __init__(self, text):
        self.items = _lex(text)
        self.position = 0

    def lookahead(self, values=True):
        token, literal = self.items[self.position]
        if values and token in (_IN, _NOTIN):
            token = _ID
        return token, literal

    def consume(self, values=True):
        result = self.lookahead(values)
        self.position += 1
        return result

    def parse(self):
        requirements = []
        while True:
            token, literal = self.lookahead()
            if token in (_ID, _NOT):
                try:
                    requirements.append(self.requirement())
                except ValueError as e:
                    raise ValueError(f"unable to parse requirement: {e}") from None
                token, literal = self.consume()
                if token == _EOS:
                    return requirements
                if token == _COMMA:
                    next_token, next_literal = self.lookahead()
                    if next_token not in (_ID, _NOT):
                        raise ValueError(f"found '{next_literal}', expected: identifier after ','")
                else:
                    raise ValueError(f"found '{literal}', expected: ',' or 'end of string'")
            elif token == _EOS:
                return requirements
            else:
                raise ValueError(f"found '{literal}', expected: !, identifier, or 'end of string'")

    def requirement(self):
        key, operator = self.key_and_operator()
        if operator in (EXISTS, DOES_NOT_EXIST):
            return new_requirement(key, operator)
        operator = self.operator()
        if operator in (IN, NOT_IN):
            values = self.set_values()
        else:
            values = self.exact_value()
        return new_requirement(key, operator, sorted(values))

    def key_and_operator(self):
        operator = None
        token, literal = self.consume()
        if token == _NOT:
            operator = DOES_NOT_EXIST
            token, literal = self.consume()
        if token != _ID:
            raise ValueError(f"found '{literal}', expected: identifier")
        problems = label_key_errors(literal)
        if problems:
            raise ValueError(f"<nil>: Invalid value: {_quote(literal)}: {'; '.join(problems)}")
        if self.lookahead()[0] in (_EOS, _COMMA) and operator != DOES_NOT_EXIST:
            operator = EXISTS
        return literal, operator

    def operator(self):
        token, literal = self.consume(values=False)
        operator = {_IN: IN, _EQ: EQUALS, _DEQ: DOUBLE_EQUALS, _GT: GREATER_THAN,
                    _LT: LESS_THAN, _NOTIN: NOT_IN, _NEQ: NOT_EQUALS}.get(token)
        if operator is None:
            raise ValueError(f"found '{literal}', expected: {', '.join(_BINARY)}")
        return operator

    def set_values(self):
        token, literal = self.consume()
        if token != _OPEN:
            raise ValueError(f"found '{literal}' expected: '('")
        token, literal = self.lookahead()
        if token in (_ID, _COMMA):
            values = self.identifiers()
            if self.consume()[0] != _CLOSE:
                raise ValueError(f"found '{literal}', expected: ')'")
            return values
        if token == _CLOSE:
            self.consume()
            return {""}
        raise ValueError(f"found '{literal}', expected: ',', ')' or identifier")

    def identifiers(self):
        values = set()
        while True:
            token, literal = self.consume()
            if token == _ID:
                values.add(literal)
                next_token, next_literal = self.lookahead()
                if next_token == _CLOSE:
                    return values
                if next_token != _COMMA:
                    raise ValueError(f"found '{next_literal}', expected: ',' or ')'")
            elif token == _COMMA:
                if not values:
                    values.add("")
                next_token = self.lookahead()[0]
                if next_token in (_CLOSE, _COMMA):
                    values.add("")
                    if next_token == _CLOSE:
                        return values
            else:
                raise ValueError(f"found '{literal}', expected: ',', or identifier")

    def exact_value(self):
        if self.lookahead()[0] in (_EOS, _COMMA):
            return {""}
        token, literal = self.consume()
        if token == _ID:
            return {literal}
        raise ValueError(f"found '{literal}', expected: identifier")


@lru_cache(maxsize=512)
def _parse_label_selector(text):
    return LabelSelector(_Parser(text).parse())


def parse_label_selector(text):
    """
    Parse the C{labelSelector} query form (C{a=b,c in (d,e),!f}).

    @raise StatusError: 400 with upstream's parser message.
    """
    if not text:
        return EVERYTHING
    try:
        return _parse_label_selector(text)
    except ValueError as e:
        raise StatusError.bad_request(str(e)) from None


_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def selector_from_label_selector_object(obj):
    """
    Turn an API C{LabelSelector} (C{matchLabels}, C{matchExpressions}) into a
    L{LabelSelector}: None matches nothing, an empty one everything.

    @raise StatusError: 400 for an unknown operator or invalid key or value.
    """
    if obj is None:
        return NOTHING
    match_labels = obj.get("matchLabels") or {}
    expressions = obj.get("matchExpressions") or []
    if not match_labels and not expressions:
        return EVERYTHING
    requirements = []
    try:
        for key, value in match_labels.items():
            requirements.append(new_requirement(key, EQUALS, [value]))
        for expression in expressions:
            operator = _OPERATORS.get(expression.get("operator"))
            if operator is None:
                raise ValueError(
                    f"{_quote(str(expression.get('operator', '')))} is not a valid label selector "
                    "operator")
            values = expression.get("values") or []
            requirements.append(new_requirement(expression.get("key", ""), operator, values))
    except ValueError as e:
        raise StatusError.bad_request(str(e)) from None
    return LabelSelector(requirements)
