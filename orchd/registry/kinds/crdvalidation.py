# -*- test-case-name: tests.registry.test_customresourcedefinition -*-
"""
Defaults and validation of a CustomResourceDefinition (upstream's
C{apiextensions-apiserver/pkg/apis/apiextensions/v1/defaults.go} and
C{pkg/apis/apiextensions/validation/validation.go}), with upstream's
field paths and messages.

The schema of each version must be structural; that check is the schema
engine's (L{orchd.api.crdschema.structural_errors}). Conversion is
C{None} only: this server has no ConversionReview client, and a definition
asking for C{Webhook} is refused rather than accepted and never converted.
"""

from orchd.api.crdschema import structural_errors
from orchd.api.errors import FieldError
from orchd.api.meta import IMMUTABLE, dns1035_label_errors, dns1123_subdomain_errors
from orchd.api.printers.custom import FORMATS, parse_path
from orchd.api.printers.base import TYPES

SCOPES = ("Cluster", "Namespaced")
CONVERSION_STRATEGIES = ("None",)
_ALL_STRATEGIES = ("None", "Webhook")
_MAX_SELECTABLE_FIELDS = 8


def default_definition(crd):
    """Fill C{crd}'s defaults in place (names, conversion), as upstream's v1 defaulting."""
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return
    names = spec.get("names")
    if isinstance(names, dict) and isinstance(names.get("kind"), str) and names["kind"]:
        if not names.get("singular"):
            names["singular"] = names["kind"].lower()
        if not names.get("listKind"):
            names["listKind"] = names["kind"] + "List"
    if spec.get("conversion") is None:
        spec["conversion"] = {"strategy": "None"}
    for version in spec.get("versions") or ():
        if isinstance(version, dict):
            for column in version.get("additionalPrinterColumns") or ():
                if isinstance(column, dict) and column.get("priority") is None:
                    column["priority"] = 0


def _label_errors(path, value):
    """DNS-1035 label errors of a name (shortNames, plural, kind...)."""
    messages = dns1035_label_errors(value)
    return [FieldError.invalid(path, value, ",".join(messages))] if messages else []


def _names_errors(names, path):
    errors = []
    if not isinstance(names, dict):
        return [FieldError.required(path, "")]
    plural, singular = names.get("plural") or "", names.get("singular") or ""
    kind, list_kind = names.get("kind") or "", names.get("listKind") or ""
    for field, value in (("plural", plural), ("singular", singular)):
        if value:
            errors += _label_errors(f"{path}.{field}", value)
    if not plural:
        errors.append(FieldError.required(f"{path}.plural", ""))
    for field, value in (("kind", kind), ("listKind", list_kind)):
        if value:
            errors += _label_errors(f"{path}.{field}", value.lower())
        else:
            errors.append(FieldError.required(f"{path}.{field}", ""))
    if kind and kind == list_kind:
        errors.append(FieldError.invalid(f"{path}.listKind", list_kind,
                                         "kind and listKind may not be the same"))
    for field in ("shortNames", "categories"):
        values = names.get(field) or []
        if not isinstance(values, list):
            errors.append(FieldError.type_invalid(f"{path}.{field}", values,
                                                  "must be of type array"))
            continue
        for index, value in enumerate(values):
            errors += _label_errors(f"{path}.{field}[{index}]", str(value))
    return errors


def _subresources_errors(subresources, path):
    if subresources is None:
        return []
    if not isinstance(subresources, dict):
        return [FieldError.type_invalid(path, subresources, "must be of type object")]
    scale = subresources.get("scale")
    if scale is None:
        return []
    errors = []
    where = f"{path}.scale"
    for field, required in (("specReplicasPath", True), ("statusReplicasPath", True),
                            ("labelSelectorPath", False)):
        value = scale.get(field)
        if not value:
            if required:
                errors.append(FieldError.required(f"{where}.{field}", ""))
            continue
        if not isinstance(value, str) or not value.startswith("."):
            errors.append(FieldError.invalid(f"{where}.{field}", value,
                                             "should be a json path under .spec or .status"))
            continue
        root = value.split(".")[1]
        allowed = ("spec",) if field == "specReplicasPath" else ("spec", "status")
        if field == "statusReplicasPath":
            allowed = ("status",)
        if root not in allowed or "[" in value:
            errors.append(FieldError.invalid(
                f"{where}.{field}", value,
                "should be a json path under .spec" if field == "specReplicasPath"
                else "should be a json path under .status" if field == "statusReplicasPath"
                else "should be a json path under either .spec or .status"))
    return errors


def _column_errors(column, path):
    if not isinstance(column, dict):
        return [FieldError.type_invalid(path, column, "must be of type object")]
    errors = []
    if not column.get("name"):
        errors.append(FieldError.required(f"{path}.name", ""))
    kind = column.get("type")
    if not kind:
        errors.append(FieldError.required(f"{path}.type", ""))
    elif kind not in TYPES:
        errors.append(FieldError.not_supported(f"{path}.type", kind, TYPES))
    fmt = column.get("format")
    if fmt and fmt not in FORMATS:
        errors.append(FieldError.not_supported(f"{path}.format", fmt, FORMATS))
    priority = column.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int) or priority < 0:
        errors.append(FieldError.invalid(f"{path}.priority", priority,
                                         "must be greater than or equal to 0"))
    json_path = column.get("jsonPath")
    if not json_path:
        errors.append(FieldError.required(f"{path}.jsonPath", ""))
    else:
        try:
            parse_path(str(json_path))
        except ValueError as e:
            errors.append(FieldError.invalid(f"{path}.jsonPath", json_path, str(e)))
    return errors


def _selectable_errors(fields, schema, path):
    if not fields:
        return []
    errors = []
    if len(fields) > _MAX_SELECTABLE_FIELDS:
        errors.append(FieldError.too_many(path, len(fields), _MAX_SELECTABLE_FIELDS))
    seen = set()
    for index, field in enumerate(fields):
        where = f"{path}[{index}].jsonPath"
        json_path = field.get("jsonPath") if isinstance(field, dict) else None
        if not json_path:
            errors.append(FieldError.required(where, ""))
            continue
        if not isinstance(json_path, str) or not json_path.startswith(".") or \
                "[" in json_path or json_path.startswith(".metadata"):
            errors.append(FieldError.invalid(
                where, json_path, "must be a simple json path under .spec or .status, "
                                  "without array indices"))
            continue
        if json_path in seen:
            errors.append(FieldError.duplicate(where, json_path))
        seen.add(json_path)
        sub = _schema_at(schema, json_path[1:].split("."))
        if sub is None:
            errors.append(FieldError.invalid(where, json_path,
                                             "is an invalid path: does not exist in schema"))
        elif sub.get("type") not in ("string", "integer", "boolean"):
            errors.append(FieldError.invalid(
                where, json_path, "selectable field must be a string, integer or boolean"))
    return errors


def _schema_at(schema, parts):
    for part in parts:
        if not isinstance(schema, dict):
            return None
        schema = (schema.get("properties") or {}).get(part)
    return schema if isinstance(schema, dict) else None


def _versions_errors(spec, path):
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        return [FieldError.invalid(path, versions or [],
                                   "must have exactly one version marked as storage version")]
    errors = []
    names, storage, served = set(), 0, 0
    unique = True
    for index, version in enumerate(versions):
        where = f"{path}[{index}]"
        if not isinstance(version, dict):
            errors.append(FieldError.type_invalid(where, version, "must be of type object"))
            continue
        name = version.get("name") or ""
        if not name:
            errors.append(FieldError.required(f"{where}.name", ""))
        else:
            errors += _label_errors(f"{where}.name", name)
        if name in names:
            unique = False
        names.add(name)
        storage += bool(version.get("storage"))
        served += bool(version.get("served"))
        schema = (version.get("schema") or {}).get("openAPIV3Schema") \
            if isinstance(version.get("schema"), dict) else None
        if not isinstance(schema, dict):
            errors.append(FieldError.required(f"{where}.schema.openAPIV3Schema",
                                              "schemas are required"))
            schema = None
        else:
            errors += structural_errors(schema, f"{where}.schema.openAPIV3Schema")
        if version.get("deprecationWarning") is not None:
            warning = version["deprecationWarning"]
            if not version.get("deprecated"):
                errors.append(FieldError.invalid(
                    f"{where}.deprecationWarning", warning,
                    "can only be set for deprecated versions"))
            elif len(str(warning)) > 256:
                errors.append(FieldError.too_long(f"{where}.deprecationWarning", 256))
        errors += _subresources_errors(version.get("subresources"), f"{where}.subresources")
        for column_index, column in enumerate(version.get("additionalPrinterColumns") or ()):
            errors += _column_errors(column, f"{where}.additionalPrinterColumns[{column_index}]")
        errors += _selectable_errors(version.get("selectableFields"), schema or {},
                                     f"{where}.selectableFields")
    if not unique:
        errors.append(FieldError.invalid(path, versions, "must contain unique version names"))
    if storage != 1:
        errors.append(FieldError.invalid(
            path, versions, "must have exactly one version marked as storage version"))
    if not served:
        errors.append(FieldError.invalid(path, versions, "must have at least one served version"))
    return errors


def validate_definition(crd):
    """The L{FieldError}s of a CustomResourceDefinition (create or update)."""
    meta = crd.get("metadata") or {}
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return [FieldError.required("spec", "")]
    errors = []
    group = spec.get("group") or ""
    names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
    plural = names.get("plural") or ""
    if meta.get("name") != f"{plural}.{group}":
        errors.append(FieldError.invalid("metadata.name", meta.get("name", ""),
                                         'must be spec.names.plural+"."+spec.group'))
    if not group:
        errors.append(FieldError.required("spec.group", ""))
    else:
        if len(group.split(".")) < 2:
            errors.append(FieldError.invalid("spec.group", group,
                                             "should be a domain with at least one dot"))
        messages = dns1123_subdomain_errors(group)
        if messages:
            errors.append(FieldError.invalid("spec.group", group, ",".join(messages)))
    scope = spec.get("scope")
    if not scope:
        errors.append(FieldError.required("spec.scope", ""))
    elif scope not in SCOPES:
        errors.append(FieldError.not_supported("spec.scope", scope, SCOPES))
    errors += _names_errors(spec.get("names"), "spec.names")
    errors += _versions_errors(spec, "spec.versions")
    conversion = spec.get("conversion") or {}
    strategy = conversion.get("strategy") if isinstance(conversion, dict) else conversion
    if not strategy:
        errors.append(FieldError.required("spec.conversion.strategy", ""))
    elif strategy not in _ALL_STRATEGIES:
        errors.append(FieldError.not_supported("spec.conversion.strategy", strategy,
                                               _ALL_STRATEGIES))
    elif strategy not in CONVERSION_STRATEGIES:
        errors.append(FieldError.forbidden(
            "spec.conversion.strategy",
            "Webhook conversion is not supported by this server: every version of a "
            "definition must convert with strategy None"))
    if spec.get("preserveUnknownFields") is True:
        errors.append(FieldError.invalid("spec.preserveUnknownFields", True,
                                         "must be false in order to use defaults in the schema"))
    return errors


def validate_definition_update(crd, old):
    """L{validate_definition}, plus what may not change and what stored versions keep."""
    errors = validate_definition(crd)
    spec, old_spec = crd.get("spec") or {}, old.get("spec") or {}
    for field in ("scope", "group"):
        if spec.get(field) != old_spec.get(field):
            errors.append(FieldError.invalid(f"spec.{field}", spec.get(field), IMMUTABLE))
    errors += stored_versions_errors(crd)
    return errors


def stored_versions_errors(crd):
    """Every version objects may be stored in must still be in C{spec.versions}."""
    spec = crd.get("spec") or {}
    names = {v.get("name") for v in spec.get("versions") or () if isinstance(v, dict)}
    stored = (crd.get("status") or {}).get("storedVersions") or []
    errors = []
    for index, version in enumerate(stored):
        if version not in names:
            errors.append(FieldError.invalid(f"status.storedVersions[{index}]", version,
                                             "must appear in spec.versions"))
    storage = [v.get("name") for v in spec.get("versions") or ()
               if isinstance(v, dict) and v.get("storage")]
    if stored and storage and storage[0] not in stored:
        errors.append(FieldError.invalid(
            "status.storedVersions", stored,
            "must have the storage version " + storage[0]))
    return errors
