# -*- test-case-name: tests.api.test_meta -*-
"""
ObjectMeta rules: names, labels, annotations, owner references, finalizers.

Validation only, with no clock and no I/O: callers pass the values.  The
message texts are upstream's (C{api/validate/content},
C{api/validation/objectmeta.go}), because clients and people read them.
"""

import math
import os
import re
import time
from functools import lru_cache

from orchd.api.errors import FieldError
from orchd.api.kinds import DNS1035, LABEL, PATH_SEGMENT, SUBDOMAIN


_last_stamp = (None, None)


def rfc3339(seconds):
    """RFC 3339 UTC with second precision, as object timestamps are written."""
    global _last_stamp
    if seconds is None:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    whole = math.floor(seconds)
    second, text = _last_stamp
    if whole != second:
        # Writes come many a second: the text of the last second is kept.
        text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(whole))
        _last_stamp = (whole, text)
    return text


def new_uid():
    """
    A new object's uid: a random (version 4) UUID, spelt as C{str(uuid.uuid4())}
    spells one, for a third of its cost (every create takes one).
    """
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"

# -- formats -------------------------------------------------------------------

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT = "(" + LABEL_KEY_FMT + ")?"

_DNS1123_LABEL = re.compile(DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL = re.compile(DNS1035_LABEL_FMT)
_LABEL_KEY = re.compile(LABEL_KEY_FMT)
_LABEL_VALUE = re.compile(LABEL_VALUE_FMT)

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_MAX = 63
TOTAL_ANNOTATION_SIZE = 256 * 1024
FIELD_MANAGER_MAX = 128
SUBRESOURCE_MAX = 256
GENERATED_NAME_MAX = 58  # 63 minus the five random characters
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

IMMUTABLE = "field is immutable"
FINALIZER_ORPHAN = "orphan"
FINALIZER_FOREGROUND = "foregroundDeletion"


def max_len_error(length):
    return f"must be no more than {length} bytes"


def regex_error(message, fmt, *examples):
    """Upstream's RegexError: the rule, examples, then the regex itself."""
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


_SUBDOMAIN_MSG = regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character",
    DNS1123_SUBDOMAIN_FMT, "example.com")
_LABEL_MSG = regex_error(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character",
    DNS1123_LABEL_FMT, "my-name", "123-abc")
_DNS1035_MSG = regex_error(
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character",
    DNS1035_LABEL_FMT, "my-name", "abc-123")
_LABEL_KEY_MSG = regex_error(
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character",
    LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
_LABEL_VALUE_MSG = regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character",
    LABEL_VALUE_FMT, "MyValue", "my_value", "12345")


def _size(text):
    """Length in bytes, as Go's len() counts."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


# -- primitive checks ------------------------------------------------------------

def dns1123_subdomain_errors(value):
    errors = []
    if _size(value) > DNS1123_SUBDOMAIN_MAX:
        errors.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errors.append(_SUBDOMAIN_MSG)
    return errors


def dns1123_label_errors(value):
    errors = []
    if _size(value) > DNS1123_LABEL_MAX:
        errors.append(max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL.fullmatch(value):
        if _DNS1123_SUBDOMAIN.fullmatch(value):
            errors.append("must not contain dots")
        else:
            errors.append(_LABEL_MSG)
    return errors


def dns1035_label_errors(value):
    errors = []
    if _size(value) > DNS1123_LABEL_MAX:
        errors.append(max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1035_LABEL.fullmatch(value):
        errors.append(_DNS1035_MSG)
    return errors


def path_segment_errors(value, prefix=False):
    if not prefix and value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in value]


@lru_cache(maxsize=4096)
def label_key_errors(key):
    """Qualified-name problems of a label key (also finalizers, annotation keys)."""
    errors = []
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend("prefix part " + m for m in dns1123_subdomain_errors(prefix))
    else:
        return ("a valid label key " + _LABEL_KEY_MSG
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",)
    if not name:
        errors.append("name part must be non-empty")
    elif _size(name) > LABEL_MAX:
        errors.append("name part " + max_len_error(LABEL_MAX))
    if not _LABEL_KEY.fullmatch(name):
        errors.append("name part " + _LABEL_KEY_MSG)
    return tuple(errors)


def label_value_errors(value):
    errors = []
    if _size(value) > LABEL_MAX:
        errors.append(max_len_error(LABEL_MAX))
    if not _LABEL_VALUE.fullmatch(value):
        errors.append(_LABEL_VALUE_MSG)
    return errors


def _mask_trailing_dash(name):
    """Stand in for the random suffix, so a prefix may end in '-' (upstream's trick)."""
    if len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


_NAME_CHECKS = {
    SUBDOMAIN: dns1123_subdomain_errors,
    LABEL: dns1123_label_errors,
    DNS1035: dns1035_label_errors,
}


def validate_name(name, rule, prefix=False):
    """
    The problems of C{name} under a name rule of L{orchd.api.kinds}; with
    C{prefix}, of a C{generateName} that will get a suffix.
    """
    if rule == PATH_SEGMENT:
        return path_segment_errors(name, prefix)
    check = _NAME_CHECKS.get(rule)
    if check is None:
        raise ValueError(f"unknown name rule {rule!r}")
    return check(_mask_trailing_dash(name) if prefix else name)


def generate_name(prefix, random_source):
    """
    C{prefix} (cut to 58 characters) plus five random characters.

    @param random_source: anything with C{choice(sequence)}, such as
        C{random.SystemRandom()} or a seeded C{random.Random} in tests.
    """
    suffix = "".join(random_source.choice(NAME_ALPHABET) for _ in range(5))
    return prefix[:GENERATED_NAME_MAX] + suffix


# -- ObjectMeta ------------------------------------------------------------------

def _type_error(field, value, json_type):
    return FieldError.type_invalid(field, value, f"must be of type {json_type}")


def _string_map(meta, name, path, errors):
    """The map at C{meta[name]}, or None after recording why it is not one."""
    value = meta.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        errors.append(_type_error(f"{path}.{name}", value, "object"))
        return None
    good = {}
    for key, item in value.items():
        if isinstance(item, str):
            good[key] = item
        else:
            errors.append(_type_error(f"{path}.{name}[{key}]", item, "string"))
    return good


def _string(meta, name, path, errors):
    value = meta.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        errors.append(_type_error(f"{path}.{name}", value, "string"))
        return ""
    return value


def _labels(labels, field):
    errors = []
    for key, value in labels.items():
        errors.extend(FieldError.invalid(field, key, m) for m in label_key_errors(key))
        errors.extend(FieldError.invalid(field, value, m) for m in label_value_errors(value))
    return errors


def _annotations(annotations, field):
    errors = []
    total = 0
    for key, value in annotations.items():
        errors.extend(FieldError.invalid(field, key, m) for m in label_key_errors(key.lower()))
        total += _size(key) + _size(value)
    if total > TOTAL_ANNOTATION_SIZE:
        errors.append(FieldError.too_long(field, TOTAL_ANNOTATION_SIZE))
    return errors


def _group_version(api_version):
    """(group, version) as upstream's ParseGroupVersion, or None if malformed."""
    if not api_version:
        return "", ""
    if api_version.count("/") > 1:
        return None
    if "/" not in api_version:
        return "", api_version
    group, version = api_version.split("/")
    return group, version


def _owner_references(refs, field):
    if not isinstance(refs, list):
        return [_type_error(field, refs, "array")]
    errors = []
    controller = None
    for index, ref in enumerate(refs):
        if not isinstance(ref, dict):
            errors.append(_type_error(f"{field}[{index}]", ref, "object"))
            continue
        api_version, kind = ref.get("apiVersion") or "", ref.get("kind") or ""
        name, uid = ref.get("name") or "", ref.get("uid") or ""
        gv = _group_version(api_version) if isinstance(api_version, str) else None
        if gv is None or not gv[1]:
            errors.append(FieldError.invalid(f"{field}.apiVersion", api_version,
                                             "version must not be empty"))
        for child, value in (("kind", kind), ("name", name), ("uid", uid)):
            if not value:
                errors.append(FieldError.invalid(f"{field}.{child}", value, "must not be empty"))
        if gv == ("", "v1") and kind == "Event":
            errors.append(FieldError.invalid(
                field, ref, "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller") is True:
            this = f"{kind}/{name}"
            if controller is None:
                controller = this
            else:
                errors.append(FieldError.invalid(
                    field, refs, "Only one reference can have Controller set to true. Found "
                    f'"true" in references for {controller} and {this}'))
    return errors


def _finalizers(finalizers, field):
    if not isinstance(finalizers, list):
        return [_type_error(field, finalizers, "array")]
    errors = []
    for index, finalizer in enumerate(finalizers):
        if not isinstance(finalizer, str):
            errors.append(_type_error(f"{field}[{index}]", finalizer, "string"))
            continue
        errors.extend(FieldError.invalid(field, finalizer, m) for m in label_key_errors(finalizer))
    if FINALIZER_ORPHAN in finalizers and FINALIZER_FOREGROUND in finalizers:
        errors.append(FieldError.invalid(
            field, finalizers,
            f"finalizer {FINALIZER_ORPHAN} and {FINALIZER_FOREGROUND} cannot be both set"))
    return errors


def _managed_fields(entries, field):
    if not isinstance(entries, list):
        return [_type_error(field, entries, "array")]
    errors = []
    for index, entry in enumerate(entries):
        at = f"{field}[{index}]"
        if not isinstance(entry, dict):
            errors.append(_type_error(at, entry, "object"))
            continue
        operation = entry.get("operation", "")
        if operation not in ("Apply", "Update"):
            errors.append(FieldError.invalid(f"{at}.operation", operation,
                                             "must be `Apply` or `Update`"))
        fields_type = entry.get("fieldsType")
        if fields_type and fields_type != "FieldsV1":
            errors.append(FieldError.invalid(f"{at}.fieldsType", fields_type, "must be `FieldsV1`"))
        manager = entry.get("manager") or ""
        if isinstance(manager, str) and _size(manager) > FIELD_MANAGER_MAX:
            errors.append(FieldError.too_long(f"{at}.manager", FIELD_MANAGER_MAX))
        subresource = entry.get("subresource") or ""
        if isinstance(subresource, str) and _size(subresource) > SUBRESOURCE_MAX:
            errors.append(FieldError.too_long(f"{at}.subresource", SUBRESOURCE_MAX))
    return errors


def _common(meta, path):
    """The checks shared by create and update."""
    errors = []
    generation = meta.get("generation")
    if generation is not None:
        if not isinstance(generation, int) or isinstance(generation, bool):
            errors.append(_type_error(f"{path}.generation", generation, "integer"))
        elif generation < 0:
            errors.append(FieldError.invalid(f"{path}.generation", generation,
                                             "must be greater than or equal to 0"))
    labels = _string_map(meta, "labels", path, errors)
    if labels:
        errors.extend(_labels(labels, f"{path}.labels"))
    annotations = _string_map(meta, "annotations", path, errors)
    if annotations:
        errors.extend(_annotations(annotations, f"{path}.annotations"))
    if meta.get("ownerReferences") is not None:
        errors.extend(_owner_references(meta["ownerReferences"], f"{path}.ownerReferences"))
    if meta.get("finalizers") is not None:
        errors.extend(_finalizers(meta["finalizers"], f"{path}.finalizers"))
    if meta.get("managedFields") is not None:
        errors.extend(_managed_fields(meta["managedFields"], f"{path}.managedFields"))
    return errors


def validate_object_meta(meta, namespaced, name_rule, path="metadata"):
    """
    Check an object's metadata on create; returns a list of L{FieldError}.

    The name may be missing only when C{generateName} is given (the caller
    generates it later); the C{generateName} prefix must be able to grow into
    a valid name.
    """
    if not isinstance(meta, dict):
        return [_type_error(path, meta, "object")]
    errors = []
    name = _string(meta, "name", path, errors)
    generate = _string(meta, "generateName", path, errors)
    if generate:
        errors.extend(FieldError.invalid(f"{path}.generateName", generate, m)
                      for m in validate_name(generate, name_rule, prefix=True))
    if name:
        errors.extend(FieldError.invalid(f"{path}.name", name, m)
                      for m in validate_name(name, name_rule))
    elif not generate and not any(e.field == f"{path}.name" for e in errors):
        errors.append(FieldError.required(f"{path}.name", "name or generateName is required"))
    namespace = _string(meta, "namespace", path, errors)
    if namespaced:
        if not namespace:
            errors.append(FieldError.required(f"{path}.namespace"))
        else:
            errors.extend(FieldError.invalid(f"{path}.namespace", namespace, m)
                          for m in dns1123_label_errors(namespace))
    elif namespace:
        errors.append(FieldError.forbidden(f"{path}.namespace", "not allowed on this type"))
    errors.extend(_common(meta, path))
    return errors


def _go_strings(values):
    """Go's C{%#v} of a []string, as the finalizer message shows it."""
    return "[]string{" + ", ".join('"' + v.replace('"', '\\"') + '"' for v in values) + "}"


def validate_object_meta_update(new_meta, old_meta, path="metadata"):
    """
    Check metadata on update against the stored metadata.

    Fields the server fills in when the client leaves them out (C{uid},
    C{creationTimestamp}, C{deletionTimestamp},
    C{deletionGracePeriodSeconds}) are only compared when the new metadata
    sets them; C{name} and C{namespace} always are.
    """
    if not isinstance(new_meta, dict):
        return [_type_error(path, new_meta, "object")]
    old_meta = old_meta or {}
    errors = []
    if old_meta.get("deletionTimestamp"):
        new_finalizers = new_meta.get("finalizers") or []
        old_finalizers = set(old_meta.get("finalizers") or [])
        if isinstance(new_finalizers, list):
            extra = sorted({f for f in new_finalizers if isinstance(f, str)} - old_finalizers)
            if extra:
                errors.append(FieldError.forbidden(
                    f"{path}.finalizers",
                    "no new finalizers can be added if the object is being deleted, found new "
                    f"finalizers {_go_strings(extra)}"))
    new_generation, old_generation = new_meta.get("generation"), old_meta.get("generation")
    if (isinstance(new_generation, int) and isinstance(old_generation, int)
            and new_generation < old_generation):
        errors.append(FieldError.invalid(f"{path}.generation", new_generation,
                                         "must not be decremented"))
    for name in ("name", "namespace"):
        new, old = new_meta.get(name) or "", old_meta.get(name) or ""
        if new != old:
            errors.append(FieldError.invalid(f"{path}.{name}", new, IMMUTABLE))
    for name in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
        new = new_meta.get(name)
        if new not in (None, "") and new != old_meta.get(name):
            errors.append(FieldError.invalid(f"{path}.{name}", new, IMMUTABLE))
    errors.extend(_common(new_meta, path))
    return errors
