# -*- test-case-name: tests.api.crdschema -*-
"""
A structural schema compiled once into a tree of L{Node}s, and the three
walks a custom resource goes through on every write: defaulting, pruning
and validation (upstream's C{pkg/apiserver/schema/defaulting},
C{.../pruning} and C{pkg/apiserver/validation}).

Each node precomputes what its walks need (which checks apply, whether any
default or rule lies below it), so a small object costs a few dictionary
look-ups per field.  The walks recurse once per nesting level of the value;
values reach them decoded with the depth bound of L{orchd.api.bounded}.
"""

import json

from orchd.api.crdschema import formats, messages
from orchd.api.crdschema.messages import go_number
from orchd.api.errors import FieldError

_MISSING = object()
_ROOT_KEEP = ("apiVersion", "kind", "metadata")


def child(path, name):
    """The field path of property C{name} below C{path} (bare at the root)."""
    return f"{path}.{name}" if path else name


def index(path, position):
    return f"{path}[{position}]"


def _scalar_key(value):
    """A hashable identity for a JSON value, telling C{1} from C{true} and C{1.0} from C{1}."""
    kind = type(value)
    if kind is dict or kind is list:
        return ("json", json.dumps(value, sort_keys=True, separators=(",", ":")))
    if kind is float and value.is_integer():
        return ("number", int(value))
    if kind is int:
        return ("number", value)
    return (kind.__name__, value)


class Node:
    """
    One compiled schema.

    Attributes mirror the schema's keywords; C{checks} is the list of
    value checks that apply (empty for most fields), C{has_defaults},
    C{has_rules} and C{needs_prune} say whether the matching walk must
    descend at all.
    """

    __slots__ = (
        "schema", "type", "nullable", "properties", "additional", "additional_allows",
        "items", "required", "enum", "enum_keys", "enum_values", "pattern", "pattern_text",
        "minimum", "maximum", "exclusive_minimum", "exclusive_maximum", "multiple_of",
        "min_length", "max_length", "min_items", "max_items", "unique_items",
        "min_properties", "max_properties", "format", "format_check", "int_or_string",
        "preserve", "embedded", "default", "all_of", "any_of", "one_of", "not_",
        "rules", "list_type", "list_map_keys", "map_type",
        "has_defaults", "has_rules", "needs_prune", "has_value_checks", "descends",
    )

    def __init__(self, schema, rules_compiler=None):
        get = schema.get
        self.schema = schema
        self.type = get("type") or None
        self.nullable = get("nullable") is True
        self.int_or_string = get("x-kubernetes-int-or-string") is True
        self.preserve = get("x-kubernetes-preserve-unknown-fields") is True
        self.embedded = get("x-kubernetes-embedded-resource") is True
        self.default = get("default", _MISSING)
        self.list_type = get("x-kubernetes-list-type")
        self.list_map_keys = tuple(get("x-kubernetes-list-map-keys") or ())
        self.map_type = get("x-kubernetes-map-type")
        properties = get("properties")
        self.properties = (
            {name: Node(sub, rules_compiler) for name, sub in properties.items()}
            if isinstance(properties, dict) else None)
        additional = get("additionalProperties", _MISSING)
        self.additional = Node(additional, rules_compiler) if isinstance(additional, dict) else None
        self.additional_allows = additional is True
        items = get("items")
        self.items = Node(items, rules_compiler) if isinstance(items, dict) else None
        required = get("required")
        self.required = tuple(required) if isinstance(required, list) else ()
        enum = get("enum")
        if isinstance(enum, list) and enum:
            self.enum = enum
            self.enum_keys = frozenset(_scalar_key(v) for v in enum)
            self.enum_values = messages.enum_values(enum)
        else:
            self.enum = self.enum_keys = self.enum_values = None
        self.pattern_text = get("pattern")
        self.pattern = compile_pattern(self.pattern_text) if isinstance(self.pattern_text, str) else None
        self.minimum = _number(get("minimum"))
        self.maximum = _number(get("maximum"))
        self.exclusive_minimum = get("exclusiveMinimum") is True
        self.exclusive_maximum = get("exclusiveMaximum") is True
        self.multiple_of = _number(get("multipleOf"))
        self.min_length = _count(get("minLength"))
        self.max_length = _count(get("maxLength"))
        self.min_items = _count(get("minItems"))
        self.max_items = _count(get("maxItems"))
        self.unique_items = get("uniqueItems") is True
        self.min_properties = _count(get("minProperties"))
        self.max_properties = _count(get("maxProperties"))
        self.format = get("format")
        self.format_check = formats.check(self.format) if isinstance(self.format, str) else None
        self.all_of = _junctor(get("allOf"), rules_compiler)
        self.any_of = _junctor(get("anyOf"), rules_compiler)
        self.one_of = _junctor(get("oneOf"), rules_compiler)
        not_ = get("not")
        self.not_ = Node(not_) if isinstance(not_, dict) else None
        rules = get("x-kubernetes-validations")
        self.rules = (rules_compiler(self, rules) if rules and rules_compiler is not None else ())
        below = [n for n in (self.additional, self.items) if n is not None]
        if self.properties:
            below.extend(self.properties.values())
        self.has_defaults = any(n.default is not _MISSING or n.has_defaults for n in below)
        self.descends = bool(self.properties or self.additional is not None or self.items is not None)
        self.has_rules = bool(self.rules) or any(n.has_rules for n in below)
        self.needs_prune = (self.properties is not None or self.embedded or any(
            n.needs_prune for n in below) or (self.type == "object" and not self.preserve
                                              and self.additional is None
                                              and not self.additional_allows))
        self.has_value_checks = bool(
            self.enum is not None or self.pattern is not None or self.minimum is not None
            or self.maximum is not None or self.multiple_of is not None
            or self.min_length is not None or self.max_length is not None
            or self.min_items is not None or self.max_items is not None or self.unique_items
            or self.min_properties is not None or self.max_properties is not None
            or self.format_check is not None or self.all_of or self.any_of or self.one_of
            or self.not_ is not None)

    # -- defaulting ---------------------------------------------------------

    def apply_defaults(self, value):
        """
        Upstream's C{Default}: fill absent (or non-nullable null) fields, then
        descend; and, as its C{PruneNonNullableNullsWithoutDefaults}, drop
        nulls of non-nullable fields that have no default.
        """
        kind = type(value)
        if kind is dict:
            properties = self.properties
            if properties:
                if self.has_defaults:
                    for name, prop in properties.items():
                        if prop.default is not _MISSING:
                            current = value.get(name, _MISSING)
                            if current is _MISSING or (current is None and not prop.nullable):
                                value[name] = _copy(prop.default)
                doomed = None
                for name, item in value.items():
                    prop = properties.get(name)
                    if prop is None:
                        continue
                    if item is None:
                        if not prop.nullable and prop.default is _MISSING:
                            if doomed is None:
                                doomed = []
                            doomed.append(name)
                    elif prop.descends and (type(item) is dict or type(item) is list):
                        prop.apply_defaults(item)
                if doomed:
                    for name in doomed:
                        del value[name]
            elif self.additional is not None:
                extra = self.additional
                for name, item in value.items():
                    if item is None and not extra.nullable and extra.default is not _MISSING:
                        value[name] = item = _copy(extra.default)
                    if extra.descends and (type(item) is dict or type(item) is list):
                        extra.apply_defaults(item)
        elif kind is list and self.items is not None:
            items = self.items
            for position, item in enumerate(value):
                if item is None and not items.nullable and items.default is not _MISSING:
                    value[position] = item = _copy(items.default)
                if items.descends and (type(item) is dict or type(item) is list):
                    items.apply_defaults(item)

    # -- pruning -------------------------------------------------------------

    def prune(self, value, path, unknown, root=False):
        """Upstream's pruning: drop fields the schema does not name, noting their paths."""
        kind = type(value)
        if kind is dict:
            properties = self.properties
            additional = self.additional
            keep_root = root or self.embedded
            if properties is None and additional is None and (self.preserve or self.additional_allows):
                return
            doomed = None
            for name, item in value.items():
                if keep_root and name in _ROOT_KEEP:
                    continue  # metadata is pruned as ObjectMeta by the caller
                prop = properties.get(name) if properties is not None else None
                if prop is None:
                    if additional is not None:
                        prop = additional
                    elif self.preserve or self.additional_allows:
                        continue
                    else:
                        if doomed is None:
                            doomed = []
                        doomed.append(name)
                        continue
                if prop.needs_prune and (type(item) is dict or type(item) is list):
                    prop.prune(item, child(path, name), unknown)
            if doomed:
                for name in doomed:
                    del value[name]
                    unknown.append(child(path, name))
        elif kind is list:
            items = self.items
            if items is not None and items.needs_prune:
                for position, item in enumerate(value):
                    if type(item) is dict or type(item) is list:
                        items.prune(item, index(path, position), unknown)

    # -- validation ----------------------------------------------------------

    def validate(self, value, path, errors, old, ctx):
        """Append the field errors of C{value} against this schema to C{errors}."""
        if value is None:
            if self.nullable:
                return
            if self.type is not None or self.int_or_string:
                errors.append(messages.wrong_type(path, self._type_text(), value))
                return
        elif not self._type_ok(value):
            errors.append(messages.wrong_type(path, self._type_text(), value))
            return
        if self.has_value_checks:
            self._value_checks(value, path, errors, ctx)
        kind = type(value)
        if kind is dict:
            self._validate_object(value, path, errors, old, ctx)
        elif kind is list:
            items = self.items
            if items is not None:
                correlated = ctx.correlate_list(self, value, old) if self.has_rules and old is not _MISSING else None
                for position, item in enumerate(value):
                    item_old = correlated[position] if correlated is not None else _MISSING
                    items.validate(item, index(path, position), errors, item_old, ctx)
        if self.rules:
            ctx.run_rules(self, value, path, errors, old)

    def _type_text(self):
        return "integer,string" if self.int_or_string else self.type

    def _type_ok(self, value):
        expected = self.type
        kind = type(value)
        if self.int_or_string:
            return kind is int or kind is str
        if expected is None:
            return True
        if expected == "object":
            return kind is dict
        if expected == "string":
            return kind is str
        if expected == "integer":
            return kind is int
        if expected == "number":
            return kind is int or kind is float
        if expected == "boolean":
            return kind is bool
        if expected == "array":
            return kind is list
        return True

    def _validate_object(self, value, path, errors, old, ctx):
        for name in self.required:
            if name not in value:
                errors.append(FieldError.required(child(path, name), ""))
        properties = self.properties
        additional = self.additional
        if self.embedded:
            _validate_embedded(value, path, errors)
        track_old = self.has_rules and type(old) is dict
        for name, item in value.items():
            prop = properties.get(name) if properties is not None else None
            if prop is None:
                prop = additional
                if prop is None:
                    continue
            prop.validate(item, child(path, name), errors,
                          old.get(name, _MISSING) if track_old else _MISSING, ctx)

    def _value_checks(self, value, path, errors, ctx):
        kind = type(value)
        if self.enum is not None and _scalar_key(value) not in self.enum_keys:
            errors.append(FieldError.not_supported(path, value, self.enum_values))
        if kind is str:
            if self.max_length is not None and len(value) > self.max_length:
                errors.append(messages.too_long(path, self.max_length))
            if self.min_length is not None and len(value) < self.min_length:
                errors.append(messages.invalid(
                    path, value, f"should be at least {self.min_length} chars long"))
            if self.pattern is not None and self.pattern.search(value) is None:
                errors.append(messages.invalid(path, value, f"should match '{self.pattern_text}'"))
            if self.format_check is not None and not self.format_check(value):
                errors.append(messages.bad_format(path, self.format, value))
        elif (kind is int or kind is float) and kind is not bool:
            self._number_checks(value, path, errors)
        elif kind is list:
            count = len(value)
            if self.max_items is not None and count > self.max_items:
                errors.append(messages.too_many(path, count, self.max_items))
            if self.min_items is not None and count < self.min_items:
                errors.append(messages.invalid(
                    path, value, f"should have at least {self.min_items} items"))
            if self.unique_items and len({_scalar_key(v) for v in value}) != count:
                errors.append(messages.invalid(path, value, "shouldn't contain duplicates"))
        elif kind is dict:
            count = len(value)
            if self.max_properties is not None and count > self.max_properties:
                errors.append(messages.too_many(path, count, self.max_properties))
            if self.min_properties is not None and count < self.min_properties:
                errors.append(messages.invalid(
                    path, value, f"should have at least {self.min_properties} properties"))
        if self.all_of or self.any_of or self.one_of or self.not_ is not None:
            self._junctors(value, path, errors, ctx)

    def _number_checks(self, value, path, errors):
        if self.maximum is not None:
            if self.exclusive_maximum and value >= self.maximum:
                errors.append(messages.invalid(
                    path, value, f"should be less than {go_number(self.maximum)}"))
            elif value > self.maximum:
                errors.append(messages.invalid(
                    path, value, f"should be less than or equal to {go_number(self.maximum)}"))
        if self.minimum is not None:
            if self.exclusive_minimum and value <= self.minimum:
                errors.append(messages.invalid(
                    path, value, f"should be greater than {go_number(self.minimum)}"))
            elif value < self.minimum:
                errors.append(messages.invalid(
                    path, value, f"should be greater than or equal to {go_number(self.minimum)}"))
        if self.multiple_of is not None and self.multiple_of > 0 and not _multiple(
                value, self.multiple_of):
            errors.append(messages.invalid(
                    path, value, f"should be a multiple of {go_number(self.multiple_of)}"))

    def _junctors(self, value, path, errors, ctx):
        """allOf/anyOf/oneOf/not: value validations only, as structural schemas allow."""
        if self.all_of:
            found = [e for sub in self.all_of for e in sub.validate_quietly(value, path, ctx)]
            if found:
                errors.extend(found)
                errors.append(messages.invalid(path, value, "must validate all the schemas (allOf)"))
        if self.any_of and all(sub.validate_quietly(value, path, ctx) for sub in self.any_of):
            errors.append(messages.invalid(path, value, "must validate at least one schema (anyOf)"))
        if self.one_of:
            passing = sum(1 for sub in self.one_of if not sub.validate_quietly(value, path, ctx))
            if passing != 1:
                errors.append(messages.invalid(
                    path, value, "must validate one and only one schema (oneOf)"))
        if self.not_ is not None and not self.not_.validate_quietly(value, path, ctx):
            errors.append(messages.invalid(path, value, "must not validate the schema (not)"))

    def validate_quietly(self, value, path, ctx):
        """The errors of C{value} against this node, for a junctor's verdict."""
        errors = []
        self.validate(value, path, errors, _MISSING, ctx)
        return errors


def _junctor(schemas, rules_compiler):
    """The value-validation schemas of allOf/anyOf/oneOf (rules live in the structural part)."""
    if not isinstance(schemas, list):
        return ()
    return tuple(Node(sub) for sub in schemas if isinstance(sub, dict))


def _multiple(value, factor):
    """Whether C{value} is a multiple of C{factor}, with float rounding forgiven."""
    if type(value) is int and type(factor) is int:
        return value % factor == 0
    try:
        quotient = value / factor
        return abs(quotient - round(quotient)) <= 1e-9 * max(1.0, abs(quotient))
    except (OverflowError, ValueError):  # beyond float64: no float64 check can tell either
        return True


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def _count(value):
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _copy(value):
    """A deep copy of a JSON default (defaults are never shared between objects)."""
    kind = type(value)
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    return value


def _validate_embedded(value, path, errors):
    """An embedded resource: C{apiVersion} and C{kind} required, metadata an ObjectMeta."""
    for name in ("apiVersion", "kind"):
        field = value.get(name)
        if field is None or field == "":
            errors.append(FieldError.required(child(path, name), "must not be empty"))
        elif type(field) is not str:
            errors.append(messages.wrong_type(child(path, name), "string", field))
    meta = value.get("metadata", _MISSING)
    if meta is _MISSING:
        return
    where = child(path, "metadata")
    if type(meta) is not dict:
        errors.append(messages.wrong_type(where, "object", meta))
        return
    for name in ("name", "generateName", "namespace", "uid", "resourceVersion",
                 "creationTimestamp", "deletionTimestamp"):
        field = meta.get(name)
        if field is not None and type(field) is not str:
            errors.append(messages.wrong_type(child(where, name), "string", field))
    for name in ("labels", "annotations"):
        field = meta.get(name)
        if field is None:
            continue
        if type(field) is not dict:
            errors.append(messages.wrong_type(child(where, name), "object", field))
            continue
        for key, item in field.items():
            if type(item) is not str:
                errors.append(messages.wrong_type(child(child(where, name), key), "string", item))


#: Longest C{pattern} accepted; a regular expression is code run on every write.
MAX_PATTERN_LENGTH = 4096


def compile_pattern(text):
    """
    The compiled C{pattern}, searched (unanchored) as Go's RE2 does.

    RE2 (C{google-re2}, which cel-python brings) runs in linear time, so a
    hostile pattern cannot stall the reactor; Python's C{re} is only the
    fallback when RE2 is absent, with the pattern length bounded.

    @raise ValueError: the pattern does not compile or is too long.
    """
    if len(text) > MAX_PATTERN_LENGTH:
        raise ValueError(f"may not be longer than {MAX_PATTERN_LENGTH}")
    try:
        return _re2_compile(text)
    except Exception as failure:  # re2.error and re.error alike
        raise ValueError(str(failure) or "does not compile") from None


def _load_re2():
    try:
        import re2
    except ImportError:  # pragma: no cover - cel-python depends on it
        import re
        return re.compile
    options = re2.Options()
    options.log_errors = False

    def compile_re2(text):
        return re2.compile(text, options)
    return compile_re2


_re2_compile = _load_re2()
