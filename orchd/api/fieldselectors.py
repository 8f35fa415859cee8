# -*- test-case-name: tests.api.test_selectors -*-
"""
Field selectors (C{fieldSelector=}): C{=}, C{==} and C{!=} terms joined by
commas, values escaped with a backslash, as upstream's C{fields/selector.go}.

Re-exported by L{orchd.api.selectors}, which callers should import.
"""

from functools import lru_cache

from orchd.api.errors import StatusError

EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="

#: The fields every resource can be selected by.
METADATA_FIELDS = frozenset(("metadata.name", "metadata.namespace"))


class FieldRequirement:
    """C{field = value} or C{field != value}; C{operator} is "=" or "!="."""

    __slots__ = ("field", "operator", "value")

    def __init__(self, field, operator, value):
        self.field = field
        self.operator = operator
        self.value = value

    def matches(self, fields):
        equal = fields.get(self.field, "") == self.value
        return equal if self.operator == EQUALS else not equal

    def __str__(self):
        escaped = (self.value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\="))
        return f"{self.field}{self.operator}{escaped}"

    def __repr__(self):
        return f"<FieldRequirement {self}>"

    def __eq__(self, other):
        return (isinstance(other, FieldRequirement) and self.field == other.field
                and self.operator == other.operator and self.value == other.value)

    def __hash__(self):
        return hash((self.field, self.operator, self.value))


class FieldSelector:
    """An AND of field requirements, matched against a dict of field values."""

    __slots__ = ("requirements",)

    def __init__(self, requirements=()):
        self.requirements = tuple(requirements)

    @property
    def empty(self):
        return not self.requirements

    def matches(self, fields):
        for requirement in self.requirements:
            if not requirement.matches(fields):
                return False
        return True

    def requires_exact_match(self, field):
        """The value an C{=} term pins C{field} to, e.g. a single-name lookup."""
        for requirement in self.requirements:
            if requirement.field == field and requirement.operator == EQUALS:
                return requirement.value
        return None

    def __str__(self):
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self):
        return f"<FieldSelector {self}>"


def _split_terms(text):
    """Split on commas that are not escaped with a backslash."""
    terms, start, escaped = [], 0, False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _split_term(term):
    """(field, operator, raw value) at the first operator, or None."""
    for index in range(len(term)):
        for operator in (NOT_EQUALS, DOUBLE_EQUALS, EQUALS):
            if term.startswith(operator, index):
                return term[:index], operator, term[index + len(operator):]
    return None


def _unescape(value):
    if "\\" not in value and "," not in value and "=" not in value:
        return value
    out, escaped = [], False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise ValueError(f"invalid field selector: invalid escape sequence: \\{char}")
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            raise ValueError(f"invalid field selector: unescaped character in value: {ord(char)}")
        else:
            out.append(char)
    if escaped:
        raise ValueError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


@lru_cache(maxsize=512)
def _parse_field_selector(text, supported):
    requirements = []
    for term in sorted(_split_terms(text)):
        if not term:
            continue
        split = _split_term(term)
        if split is None:
            raise ValueError(f"invalid selector: '{text}'; can't understand '{term}'")
        field, operator, raw = split
        operator = NOT_EQUALS if operator == NOT_EQUALS else EQUALS
        requirements.append(FieldRequirement(field, operator, _unescape(raw)))
    for requirement in requirements:
        if requirement.field not in supported:
            if supported == METADATA_FIELDS:
                raise ValueError(f'"{requirement.field}" is not a known field selector: only '
                                 '"metadata.name", "metadata.namespace"')
            raise ValueError(f"field label not supported: {requirement.field}")
    return FieldSelector(requirements)


def parse_field_selector(text, supported_fields=METADATA_FIELDS):
    """
    Parse the C{fieldSelector} query form (C{a=b,c!=d}, values escaped with
    C{\\}) and check every field is one the resource supports.

    @raise StatusError: 400 with upstream's message.
    """
    if not text:
        return FieldSelector()
    try:
        return _parse_field_selector(text, frozenset(supported_fields))
    except ValueError as e:
        raise StatusError.bad_request(str(e)) from None
