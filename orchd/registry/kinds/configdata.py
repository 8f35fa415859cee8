# -*- test-case-name: tests.registry.test_kinds -*-
"""
ConfigMaps and Secrets: key rules, the size bound, and C{immutable}.

Both hold a map of named values; a key must be a valid config key, the
whole payload fits in 1 MiB, and once C{immutable} is true neither the
data nor the flag may change. Secrets also fold C{stringData} into
base64 C{data} and keep their C{type}.
"""

import base64
import binascii
import re

from zope.interface import implementer

from orchd.api.errors import FieldError, StatusError
from orchd.auth.bootstraptoken import SECRET_TYPE as BOOTSTRAP_TOKEN, decoded_data
from orchd.registry.kinds.bootstraptoken import bootstrap_token_errors
from orchd.registry.strategy import DefaultStrategy, IStrategy, immutable_field

MAX_SIZE = 1024 * 1024
# \Z, not $: Go's $ ends the text, Python's also lets a final newline through.
_KEY = re.compile(r"^[-._a-zA-Z0-9]+\Z")
_KEY_MESSAGE = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
    "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
    "'[-._a-zA-Z0-9]+')"
)
#: Keys, each valid as L{config_key_errors} sees it, joined by NUL (which no
#: valid key holds): a whole map's keys checked in one match.
_VALID_KEYS = re.compile(
    r"[-_a-zA-Z0-9][-._a-zA-Z0-9]{0,252}(?:\x00[-_a-zA-Z0-9][-._a-zA-Z0-9]{0,252})*")
OPAQUE = "Opaque"
SERVICE_ACCOUNT_TOKEN = "orch.io/service-account-token"
_REQUIRED_KEYS = {
    "orch.io/dockercfg": (".dockercfg",),
    "orch.io/dockerconfigjson": (".dockerconfigjson",),
    "orch.io/ssh-auth": ("ssh-privatekey",),
    "orch.io/tls": ("tls.crt", "tls.key"),
}


def config_key_errors(key, path):
    messages = []
    if len(key) > 253:
        messages.append("must be no more than 253 characters")
    if not _KEY.match(key):
        messages.append(_KEY_MESSAGE)
    if key in (".", ".."):
        messages.append(f"must not be '{key}'")
    elif key.startswith(".."):
        messages.append("must not start with '..'")
    return [FieldError.invalid(path, key, m) for m in messages]


def _map_errors(obj, field):
    values = obj.get(field)
    if values is None:
        return [], 0
    if not isinstance(values, dict):
        return [FieldError.type_invalid(field, values, "must be a map of strings")], 0
    texts = values.values()
    keys = "\x00".join(values)
    if _VALID_KEYS.fullmatch(keys) and keys.count("\x00") == len(values) - 1:
        # The usual map, of valid keys and text values, checked in C: the
        # values join only if each is text (decoded JSON holds no str
        # subclass), and their size is the joined length.
        try:
            return [], len("".join(texts))
        except TypeError:
            pass
    errors, size = [], 0
    for key, value in values.items():
        errors += config_key_errors(key, f"{field}[{key}]")
        if not isinstance(value, str):
            errors.append(FieldError.type_invalid(f"{field}[{key}]", value, "must be a string"))
            continue
        size += len(value)
    return errors, size


def _immutability_errors(obj, old, fields):
    if not old.get("immutable"):
        return []
    errors = []
    if not obj.get("immutable"):
        errors.append(FieldError.forbidden(
            "immutable", "field is immutable when `immutable` is set"))
    for field in fields:
        if obj.get(field) != old.get(field):
            errors.append(FieldError.forbidden(field, "field is immutable when `immutable` is set"))
    return errors


@implementer(IStrategy)
class ConfigMapStrategy(DefaultStrategy):
    def validate(self, ctx, obj):
        errors, size = _map_errors(obj, "data")
        binary_errors, binary_size = _map_errors(obj, "binaryData")
        errors += binary_errors
        data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
        if isinstance(data, dict) and isinstance(binary, dict):
            for key in set(data) & set(binary):
                errors.append(FieldError.invalid(
                    f"data[{key}]", key, "duplicate of key present in binaryData"))
        if size + binary_size * 3 // 4 > MAX_SIZE:
            errors.append(FieldError.too_long("", MAX_SIZE))
        return errors

    def validate_update(self, ctx, obj, old):
        return self.validate(ctx, obj) + _immutability_errors(obj, old, ("data", "binaryData"))


@implementer(IStrategy)
class SecretStrategy(DefaultStrategy):
    def prepare_for_create(self, ctx, obj):
        _fold_string_data(obj)
        obj.setdefault("type", OPAQUE)
        if not obj["type"]:
            obj["type"] = OPAQUE

    def prepare_for_update(self, ctx, obj, old):
        _fold_string_data(obj)
        if not obj.get("type"):
            obj["type"] = old.get("type", OPAQUE)

    def validate(self, ctx, obj):
        errors, _ = _map_errors(obj, "data")
        data = obj.get("data") or {}
        if errors or not isinstance(data, dict):
            return errors
        size = 0
        for key, value in data.items():
            try:
                size += len(base64.b64decode(value, validate=True))
            except (binascii.Error, ValueError):
                raise StatusError.bad_request(
                    f'Secret in version "v1" cannot be handled as a Secret: illegal base64 data '
                    f"in data[{key}]") from None
        if size > MAX_SIZE:
            errors.append(FieldError.too_long("data", MAX_SIZE))
        secret_type = obj.get("type")
        if not isinstance(secret_type, str):
            errors.append(FieldError.type_invalid("type", secret_type, "must be a string"))
            return errors
        for key in _REQUIRED_KEYS.get(secret_type, ()):
            if key not in data:
                errors.append(FieldError.required(f"data[{key}]"))
        if secret_type == SERVICE_ACCOUNT_TOKEN:
            annotations = obj["metadata"].get("annotations") or {}
            if not annotations.get("orch.io/service-account.name"):
                errors.append(FieldError.required(
                    "metadata.annotations[orch.io/service-account.name]"))
        if secret_type == BOOTSTRAP_TOKEN:
            errors += bootstrap_token_errors(obj, decoded_data(obj))
        return errors

    def validate_update(self, ctx, obj, old):
        errors = self.validate(ctx, obj)
        changed = immutable_field(obj.get("type"), old.get("type"), "type")
        if changed:
            errors.append(changed)
        return errors + _immutability_errors(obj, old, ("data",))


def _fold_string_data(obj):
    """Merge C{stringData} into base64 C{data}, as the API stores secrets."""
    strings = obj.pop("stringData", None)
    if not strings:
        return
    if not isinstance(strings, dict):
        raise StatusError.bad_request("stringData must be a map of strings")
    data = obj.get("data")
    if not isinstance(data, dict):
        data = obj["data"] = {}
    for key, value in strings.items():
        if not isinstance(value, str):
            raise StatusError.bad_request(f"stringData[{key}] must be a string")
        data[key] = base64.b64encode(value.encode("utf-8")).decode("ascii")
