# -*- test-case-name: tests.api.crdschema.test_structural -*-
"""
Whether an C{openAPIV3Schema} is a structural schema a server can serve.

Upstream splits the check between C{ValidateCustomResourceDefinitionOpenAPISchema}
(apiextensions validation: forbidden keywords, list and map types) and
C{schema.ValidateStructural} (types everywhere, metadata, junctors); both
are here, with their messages and field paths, plus what this server adds
because the schema is hostile input compiled into code: a depth bound,
patterns that must compile under RE2, and CEL rules that must compile with
only the functions this server evaluates.
"""

from orchd.api.bounded import MAX_DEPTH, within_depth
from orchd.api.crdschema.compiled import compile_pattern
from orchd.api.errors import FieldError

ROOT, ITEM, FIELD = "root", "item", "field"

_TYPES = ("array", "boolean", "integer", "number", "object", "string")
_META_FIELDS = ("metadata", "apiVersion", "kind")
_EMPTY_DETAIL = {
    ROOT: "must not be empty at the root",
    ITEM: "must not be empty for specified array items",
    FIELD: "must not be empty for specified object fields",
}
_INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]


def key(path, name):
    """C{path.properties[name]}, as upstream spells a property of a schema."""
    return f"{path}.properties[{name}]"


def structural_errors(schema, path, rules_checker=None):
    """
    The field errors that keep C{schema} from being served, sorted as upstream sorts them.

    @param path: the schema's own field path in its definition, e.g.
        C{spec.versions[0].schema.openAPIV3Schema}.
    @param rules_checker: called as C{(node_schema, rules, path, uncorrelatable)} for each
        C{x-kubernetes-validations} list, returning field errors (the CEL
        compiler's verdict); None skips the rules.
    """
    if not isinstance(schema, dict):
        return [FieldError.invalid(path, _type_of(schema), "must be an object")]
    if not within_depth(schema):
        return [FieldError.forbidden(path, f"must not be nested more than {MAX_DEPTH} levels deep")]
    errors = []
    _openapi(schema, path, errors, True, False, None)
    _invariants(schema, ROOT, path, errors)
    if rules_checker is not None:
        _rules(schema, path, errors, rules_checker)
    errors.sort(key=str)
    return errors


def _type_of(value):
    return {dict: "object", list: "array", str: "string", bool: "boolean",
            int: "integer", float: "number"}.get(type(value), "null")


def _list(value):
    """A keyword's list, or nothing when it holds something else (reported by type)."""
    return value if type(value) is list else ()


def _sub(schema, name):
    value = schema.get(name)
    return value if isinstance(value, dict) else None


_STRING, _BOOL, _NUMBER, _COUNT = "string", "boolean", "number", "non-negative integer"
_LIST, _OBJECT, _STRINGS = "array", "object", "array of strings"

#: The JSON type of each keyword's value (a hostile schema may send anything).
_KEYWORD_TYPES = {
    "type": _STRING, "format": _STRING, "pattern": _STRING, "description": _STRING,
    "title": _STRING, "id": _STRING, "$schema": _STRING, "$ref": _STRING,
    "nullable": _BOOL, "exclusiveMinimum": _BOOL, "exclusiveMaximum": _BOOL, "uniqueItems": _BOOL,
    "x-kubernetes-preserve-unknown-fields": _BOOL, "x-kubernetes-embedded-resource": _BOOL,
    "x-kubernetes-int-or-string": _BOOL,
    "x-kubernetes-list-type": _STRING, "x-kubernetes-map-type": _STRING,
    "minimum": _NUMBER, "maximum": _NUMBER, "multipleOf": _NUMBER,
    "minLength": _COUNT, "maxLength": _COUNT, "minItems": _COUNT, "maxItems": _COUNT,
    "minProperties": _COUNT, "maxProperties": _COUNT,
    "required": _STRINGS, "x-kubernetes-list-map-keys": _STRINGS, "enum": _LIST,
    "allOf": _LIST, "anyOf": _LIST, "oneOf": _LIST, "x-kubernetes-validations": _LIST,
    "properties": _OBJECT, "not": _OBJECT,
}


def _keyword_type_ok(expected, value):
    kind = type(value)
    if expected == _STRING:
        return kind is str
    if expected == _BOOL:
        return kind is bool
    if expected == _NUMBER:
        return kind is int or kind is float
    if expected == _COUNT:
        return kind is int and value >= 0
    if expected == _STRINGS:
        return kind is list and all(type(item) is str for item in value)
    if expected == _LIST:
        return kind is list
    return kind is dict


def _keyword_types(schema, path, errors):
    """Keywords whose values have the wrong JSON type (upstream's decoder refuses those)."""
    for name, value in schema.items():
        expected = _KEYWORD_TYPES.get(name)
        if expected is not None and value is not None and not _keyword_type_ok(expected, value):
            errors.append(FieldError.invalid(f"{path}.{name}", value, f"must be of type {expected}"))
    for junctor in ("allOf", "anyOf", "oneOf"):
        for position, sub in enumerate(schema.get(junctor) if type(schema.get(junctor)) is list else ()):
            if not isinstance(sub, dict):
                errors.append(FieldError.invalid(f"{path}.{junctor}[{position}]", sub, "must be of type object"))
    multiple = schema.get("multipleOf")
    if type(multiple) in (int, float) and multiple <= 0:
        errors.append(FieldError.invalid(f"{path}.multipleOf", multiple, "must be greater than zero"))
    items = schema.get("items")
    if items is not None and not isinstance(items, (dict, list)):
        errors.append(FieldError.invalid(f"{path}.items", items, "must be of type object"))
    additional = schema.get("additionalProperties")
    if additional is not None and not isinstance(additional, (dict, bool)):
        errors.append(FieldError.invalid(f"{path}.additionalProperties", additional,
                                         "must be of type boolean or object"))


def _openapi(schema, path, errors, root, inside_meta, defaults_forbidden):
    """ValidateCustomResourceDefinitionOpenAPISchema: keywords, list/map types, defaults."""
    get = schema.get
    _keyword_types(schema, path, errors)
    kind = get("type")
    if kind is not None and kind != "" and kind not in _TYPES:
        if kind == "null":
            errors.append(FieldError.forbidden(
                f"{path}.type", "type cannot be set to null, use nullable as an alternative"))
        else:
            errors.append(FieldError.not_supported(f"{path}.type", kind, list(_TYPES)))
    if "default" in schema and defaults_forbidden is not None:
        errors.append(FieldError.forbidden(f"{path}.default", "must not be set " + defaults_forbidden))
    for name, detail in (("id", "id is not supported"),
                         ("additionalItems", "additionalItems is not supported"),
                         ("patternProperties", "patternProperties is not supported"),
                         ("definitions", "definitions is not supported"),
                         ("dependencies", "dependencies is not supported"),
                         ("$ref", "$ref is not supported")):
        if get(name) not in (None, "", {}):
            errors.append(FieldError.forbidden(f"{path}.{name}", detail))
    if isinstance(get("items"), list):
        errors.append(FieldError.forbidden(f"{path}.items", "items must be a schema object and not an array"))
    if inside_meta and get("x-kubernetes-embedded-resource") is True:
        errors.append(FieldError.forbidden(f"{path}.x-kubernetes-embedded-resource",
                                           "must not be used inside of resource meta"))
    if get("uniqueItems") is True:
        errors.append(FieldError.forbidden(
            f"{path}.uniqueItems", "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"))
    additional = get("additionalProperties")
    properties = get("properties") if isinstance(get("properties"), dict) else {}
    if additional is not None:
        if properties and (additional is False or isinstance(additional, dict)):
            errors.append(FieldError.forbidden(
                f"{path}.additionalProperties", "additionalProperties and properties are mutual exclusive"))
        if additional is False:
            errors.append(FieldError.forbidden(
                f"{path}.additionalProperties", "additionalProperties cannot be set to false"))
        if isinstance(additional, dict):
            forbidden = defaults_forbidden
            if inside_meta:
                forbidden = "inside additionalProperties applying to object metadata"
            _openapi(additional, f"{path}.additionalProperties", errors, False, inside_meta, forbidden)
    for name, sub in properties.items():
        if not isinstance(sub, dict):
            errors.append(FieldError.invalid(key(path, name), _type_of(sub), "must be an object"))
            continue
        meta, forbidden = inside_meta, defaults_forbidden
        if (root or get("x-kubernetes-embedded-resource") is True) and name in _META_FIELDS:
            meta = True
            if root:
                forbidden = f"in top-level {name}"
        _openapi(sub, key(path, name), errors, False, meta, forbidden)
    not_ = _sub(schema, "not")
    if not_ is not None:
        _openapi(not_, f"{path}.not", errors, False, inside_meta, defaults_forbidden)
    for junctor in ("allOf", "oneOf", "anyOf"):
        for position, sub in enumerate(_list(get(junctor))):
            if isinstance(sub, dict):
                _openapi(sub, f"{path}.{junctor}[{position}]", errors, False, inside_meta,
                         defaults_forbidden)
    items = _sub(schema, "items")
    if items is not None:
        _openapi(items, f"{path}.items", errors, False, inside_meta, defaults_forbidden)
    if get("x-kubernetes-preserve-unknown-fields") is False:
        errors.append(FieldError.invalid(f"{path}.x-kubernetes-preserve-unknown-fields", False,
                                         "must be true or undefined"))
    _list_and_map_types(schema, path, errors)
    pattern = get("pattern")
    if isinstance(pattern, str) and pattern:
        try:
            compile_pattern(pattern)
        except ValueError as failure:
            errors.append(FieldError.invalid(
                f"{path}.pattern", pattern,
                f"must be a valid regular expression, but isn't: {failure}"))


def _list_and_map_types(schema, path, errors):
    get = schema.get
    kind = get("type") or ""
    map_type = get("x-kubernetes-map-type")
    if map_type is not None and kind != "object":
        _need_type(errors, path, kind, "must be object if x-kubernetes-map-type is specified")
    if map_type is not None and map_type not in ("atomic", "granular"):
        errors.append(FieldError.not_supported(f"{path}.x-kubernetes-map-type", map_type,
                                               ["atomic", "granular"]))
    list_type = get("x-kubernetes-list-type")
    items = _sub(schema, "items")
    if list_type is not None and kind != "array":
        _need_type(errors, path, kind, "must be array if x-kubernetes-list-type is specified")
    elif list_type == "set" and items is not None:
        item_kind = items.get("type")
        if item_kind == "array" and items.get("x-kubernetes-list-type", "atomic") != "atomic":
            errors.append(FieldError.invalid(
                f"{path}.items.x-kubernetes-list-type", items.get("x-kubernetes-list-type"),
                "must be atomic as item of a list with x-kubernetes-list-type=set"))
        elif item_kind == "object" and items.get("x-kubernetes-map-type") != "atomic":
            errors.append(FieldError.invalid(
                f"{path}.items.x-kubernetes-map-type", items.get("x-kubernetes-list-type"),
                "must be atomic as item of a list with x-kubernetes-list-type=set"))
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        errors.append(FieldError.not_supported(f"{path}.x-kubernetes-list-type", list_type,
                                               ["atomic", "set", "map"]))
    keys = [name for name in _list(get("x-kubernetes-list-map-keys")) if type(name) is str]
    if keys:
        if list_type is None:
            errors.append(FieldError.required(f"{path}.x-kubernetes-list-type",
                                              "must be map if x-kubernetes-list-map-keys is non-empty"))
        elif list_type != "map":
            errors.append(FieldError.invalid(f"{path}.x-kubernetes-list-type", list_type,
                                             "must be map if x-kubernetes-list-map-keys is non-empty"))
    if list_type == "map":
        if not keys:
            errors.append(FieldError.required(f"{path}.x-kubernetes-list-map-keys",
                                              "must not be empty if x-kubernetes-list-type is map"))
        if "items" not in schema:
            errors.append(FieldError.required(f"{path}.items",
                                              "must have a schema if x-kubernetes-list-type is map"))
        elif items is None:
            errors.append(FieldError.invalid(f"{path}.items", get("items"),
                                             "must only have a single schema if x-kubernetes-list-type is map"))
        elif items.get("type") != "object":
            errors.append(FieldError.invalid(f"{path}.items.type", items.get("type") or "",
                                             "must be object if parent array's x-kubernetes-list-type is map"))
        else:
            item_properties = items.get("properties")
            if not isinstance(item_properties, dict):
                item_properties = {}
            required = {name for name in _list(items.get("required")) if type(name) is str}
            seen = set()
            for name in keys:
                sub = item_properties.get(name)
                if isinstance(sub, dict):
                    if sub.get("type") in ("array", "object"):
                        errors.append(FieldError.invalid(
                            f"{key(path + '.items', name)}.type", "object",
                            "must be a scalar type if parent array's x-kubernetes-list-type is map"))
                    if name not in required and "default" not in sub:
                        errors.append(FieldError.required(
                            f"{key(path + '.items', name)}.default",
                            "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"))
                    if sub.get("nullable") is True:
                        errors.append(FieldError.forbidden(
                            f"{key(path + '.items', name)}.nullable",
                            "this property is in x-kubernetes-list-map-keys, so it cannot be nullable"))
                else:
                    errors.append(FieldError.invalid(f"{path}.x-kubernetes-list-map-keys", keys,
                                                     "entries must all be names of item properties"))
                if name in seen:
                    errors.append(FieldError.invalid(f"{path}.x-kubernetes-list-map-keys", keys,
                                                     "must not contain duplicate entries"))
                seen.add(name)
    if list_type in ("set", "map") and items is not None and items.get("nullable") is True:
        errors.append(FieldError.forbidden(f"{path}.items.nullable",
                                           f"cannot be nullable when x-kubernetes-list-type is {list_type}"))


def _need_type(errors, path, kind, detail):
    if kind:
        errors.append(FieldError.invalid(f"{path}.type", kind, detail))
    else:
        errors.append(FieldError.required(f"{path}.type", detail))


def _invariants(schema, level, path, errors):
    """schema.ValidateStructural's invariants: types, metadata, junctors, embedded resources."""
    get = schema.get
    kind = get("type") or ""
    embedded = get("x-kubernetes-embedded-resource") is True
    int_or_string = get("x-kubernetes-int-or-string") is True
    preserve = get("x-kubernetes-preserve-unknown-fields") is True
    properties = get("properties") if isinstance(get("properties"), dict) else {}
    items = _sub(schema, "items")
    if kind == "array" and items is None and not isinstance(get("items"), list):
        errors.append(FieldError.required(f"{path}.items", "must be specified"))
    if items is not None:
        _invariants(items, ITEM, f"{path}.items", errors)
    for name, sub in properties.items():
        if isinstance(sub, dict):
            _invariants(sub, FIELD, key(path, name), errors)
    additional = get("additionalProperties")
    if additional is not None and additional is not False:
        if level == ROOT:
            errors.append(FieldError.forbidden(f"{path}.additionalProperties", "must not be used at the root"))
        if isinstance(additional, dict):
            _invariants(additional, FIELD, f"{path}.additionalProperties", errors)
    if int_or_string and preserve:
        errors.append(FieldError.invalid(f"{path}.x-kubernetes-preserve-unknown-fields", True,
                                         "must be false if x-kubernetes-int-or-string is true"))
    if int_or_string and embedded:
        errors.append(FieldError.invalid(f"{path}.x-kubernetes-embedded-resource", True,
                                         "must be false if x-kubernetes-int-or-string is true"))
    skip_any_of = get("anyOf") == _INT_OR_STRING_ANY_OF
    all_of = get("allOf") if isinstance(get("allOf"), list) else []
    skip_first = bool(all_of) and isinstance(all_of[0], dict) and all_of[0].get("anyOf") == _INT_OR_STRING_ANY_OF
    _value_validation(schema, skip_any_of, skip_first, path, errors)
    if embedded and kind != "object":
        _need_type(errors, path, kind, "must be object if x-kubernetes-embedded-resource is true")
    elif not kind and not int_or_string and not preserve:
        errors.append(FieldError.required(f"{path}.type", _EMPTY_DETAIL[level]))
    if embedded and additional is not None:
        errors.append(FieldError.forbidden(f"{path}.additionalProperties",
                                           "must not be used if x-kubernetes-embedded-resource is set"))
    if level == ROOT and kind and kind != "object":
        errors.append(FieldError.invalid(f"{path}.type", kind, "must be object at the root"))
    check_metadata = level == ROOT or embedded
    for name in ("kind", "apiVersion"):
        sub = properties.get(name)
        if isinstance(sub, dict) and check_metadata and sub.get("type", "") != "string":
            errors.append(FieldError.invalid(f"{key(path, name)}.type", sub.get("type", ""), "must be string"))
    metadata = properties.get("metadata")
    if isinstance(metadata, dict) and check_metadata and metadata.get("type", "") != "object":
        errors.append(FieldError.invalid(f"{key(path, 'metadata')}.type", metadata.get("type", ""),
                                         "must be object"))
    if isinstance(metadata, dict) and level == ROOT and not _plain_metadata(metadata):
        errors.append(FieldError.forbidden(
            key(path, "metadata"),
            "must not specify anything other than name and generateName, but metadata is implicitly specified"))
    if embedded and not preserve and not properties:
        errors.append(FieldError.required(
            f"{path}.properties",
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"))


def _plain_metadata(metadata):
    """Whether a root metadata schema restricts only name and generateName (and says nothing else)."""
    for name, value in metadata.items():
        if name in ("type", "default"):
            continue
        if name == "properties" and isinstance(value, dict) and set(value) <= {"name", "generateName"}:
            continue
        if value in (None, "", [], {}, False):
            continue
        return False
    return True


_FORBIDDEN_IN_JUNCTORS = (
    ("type", "must be empty to be structural"),
    ("additionalProperties", "must be undefined to be structural"),
    ("default", "must be undefined to be structural"),
    ("title", "must be empty to be structural"),
    ("description", "must be empty to be structural"),
    ("nullable", "must be false to be structural"),
    ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
    ("x-kubernetes-embedded-resource", "must be false to be structural"),
    ("x-kubernetes-int-or-string", "must be false to be structural"),
    ("x-kubernetes-list-map-keys", "must be empty to be structural"),
    ("x-kubernetes-list-type", "must be undefined to be structural"),
    ("x-kubernetes-map-type", "must be undefined to be structural"),
    ("x-kubernetes-validations", "must be empty to be structural"),
)


def _value_validation(schema, skip_any_of, skip_first_all_of_any_of, path, errors):
    get = schema.get
    if not skip_any_of:
        for position, sub in enumerate(_list(get("anyOf"))):
            if isinstance(sub, dict):
                _nested(sub, False, f"{path}.anyOf[{position}]", errors)
    for position, sub in enumerate(_list(get("allOf"))):
        if isinstance(sub, dict):
            _nested(sub, skip_first_all_of_any_of and position == 0, f"{path}.allOf[{position}]", errors)
    for position, sub in enumerate(_list(get("oneOf"))):
        if isinstance(sub, dict):
            _nested(sub, False, f"{path}.oneOf[{position}]", errors)
    not_ = _sub(schema, "not")
    if not_ is not None:
        _nested(not_, False, f"{path}.not", errors)


def _nested(schema, skip_any_of, path, errors):
    """A schema under allOf/anyOf/oneOf/not: value validations only."""
    _value_validation(schema, skip_any_of, False, path, errors)
    items = _sub(schema, "items")
    if items is not None:
        _nested(items, False, f"{path}.items", errors)
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    for name, sub in properties.items():
        if isinstance(sub, dict):
            _nested(sub, False, key(path, name), errors)
    for name, detail in _FORBIDDEN_IN_JUNCTORS:
        value = schema.get(name)
        if value not in (None, "", False, [], {}):
            errors.append(FieldError.forbidden(f"{path}.{name}", detail))
    if "metadata" in properties:
        errors.append(FieldError.forbidden(key(path, "metadata"), "must not be specified in a nested context"))


def _rules(schema, path, errors, checker):
    """
    Hand every C{x-kubernetes-validations} list of the structural part to
    C{checker}, with the schema path of the first list below which old
    values cannot be correlated (items of lists other than C{map} lists).
    """
    pending = [(schema, path, None)]
    while pending:
        node, where, uncorrelatable = pending.pop()
        rules = node.get("x-kubernetes-validations")
        if rules:
            errors.extend(checker(node, rules, where, uncorrelatable))
        properties = node.get("properties")
        for name, sub in (properties.items() if isinstance(properties, dict) else ()):
            if isinstance(sub, dict):
                pending.append((sub, key(where, name), uncorrelatable))
        sub = node.get("additionalProperties")
        if isinstance(sub, dict):
            pending.append((sub, f"{where}.additionalProperties", uncorrelatable))
        sub = node.get("items")
        if isinstance(sub, dict):
            below = f"{where}.items"
            if uncorrelatable is None and node.get("x-kubernetes-list-type") != "map":
                uncorrelatable = below
            pending.append((sub, below, uncorrelatable))

