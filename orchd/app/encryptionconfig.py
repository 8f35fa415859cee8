# -*- test-case-name: tests.app.test_encryptionconfig -*-
"""
C{--encryption-provider-config}: upstream's EncryptionConfiguration file.

[COMPAT] The format is upstream's
(C{staging/src/k8s.io/apiserver/pkg/apis/apiserver/types_encryption.go}),
with the group renamed::

    apiVersion: apiserver.config.orch.io/v1
    kind: EncryptionConfiguration
    resources:
    - resources: [secrets, configmaps, "*.apps"]
      providers:
      - aesgcm:
          keys:
          - name: key2
            secret: <base64 of 16, 24 or 32 random bytes>
      - aesgcm:
          keys:
          - name: key1
            secret: <...>
      - identity: {}

Resources are C{resource} (core group) or C{resource.group}; C{*.group}
covers a group, C{*.} the core group and C{*.*} everything. Groups may be
written with C{orch.io} or upstream's C{k8s.io}. A resource takes the rule
that names it, else its group's C{*.group}, else C{*.*}, else none (its
values are stored as they are). The checks are upstream's validation plus
two that upstream leaves to chance: a resource named in two rules, and a
key name used twice in one provider kind of a rule, are refused.
"""

import base64
import binascii

from orchd.api import yamldecode
from orchd.api.groups import canonical_api_version, canonical_group
from orchd.registry.kinds.builtin import KINDS
from orchd.storage.transformers import (
    AESCBCTransformer, AESGCMTransformer, PrefixTransformers, Provider, SecretboxTransformer,
    identity_provider,
)

API_VERSION = "apiserver.config.orch.io/v1"
KIND = "EncryptionConfiguration"
#: Accepted secret sizes in bytes, per provider (upstream's: AES takes 16, 24
#: or 32 bytes in either mode, though upstream's docs ask 32 for aescbc).
KEY_SIZES = {"aesgcm": (16, 24, 32), "aescbc": (16, 24, 32), "secretbox": (32,)}
_CIPHERS = {"aesgcm": AESGCMTransformer, "aescbc": AESCBCTransformer,
            "secretbox": SecretboxTransformer}
_PROVIDERS = ("aesgcm", "aescbc", "secretbox", "identity")
#: Resources upstream stores without a REST API of their own.
_NOT_REST = frozenset(("apiserveripinfo", "serviceipallocations", "servicenodeportallocations"))
_ANY = "*"


class EncryptionConfigError(ValueError):
    """The file is not a valid EncryptionConfiguration; the message is one line."""


def _fail(path, message):
    raise EncryptionConfigError(f"{path}: {message}" if path else message)


def _text(value, path):
    if not isinstance(value, str):
        _fail(path, f"must be a string, not {type(value).__name__}")
    return value


def _list(value, path):
    if not isinstance(value, list):
        _fail(path, "must be a list")
    return value


def _mapping(value, path, allowed):
    if not isinstance(value, dict):
        _fail(path, "must be a mapping")
    for field in value:
        if field not in allowed:
            _fail(path, f"unknown field {field!r}")
    return value


def parse_group_resource(text):
    """C{(group, resource)} of C{resource.group} (the group canonical), as upstream splits it."""
    resource, _, group = text.partition(".")
    return canonical_group(group), resource


def _shown(group_resource):
    group, resource = group_resource
    return f"{resource}.{group}" if group or resource == _ANY else resource


class EncryptionConfig:
    """
    A checked EncryptionConfiguration: which transformer each storage key takes.

    @ivar rules: C{[(group_resources, PrefixTransformers)]} in file order.
    @ivar warnings: lines worth logging (resources this server does not store).
    """

    def __init__(self, rules, kinds=KINDS):
        self.rules = rules
        self.warnings = []
        exact, in_group, everything = {}, {}, None
        for group_resources, transformers in rules:
            for group, resource in group_resources:
                if (group, resource) == (_ANY, _ANY):
                    everything = transformers
                elif resource == _ANY:
                    in_group[group] = transformers
                else:
                    exact[(group, resource)] = transformers
        checking = PrefixTransformers([identity_provider()])
        self._exact, self._in_group, self._everything = exact, in_group, everything
        self._checking = checking
        stored = {}
        for info in kinds:
            if info.stored:
                stored[(info.group, info.resource)] = info.key_prefix()
        #: Storage key prefix -> the resource's transformer chain.
        self.by_prefix = {}
        for (group, resource), prefix in stored.items():
            chosen = exact.get((group, resource)) or in_group.get(group) or everything
            # Resources without a rule keep plaintext, and refuse to hand
            # ciphertext to a decoder (upstream's encrypt-check identity).
            self.by_prefix[prefix] = chosen or checking
        known_groups = {group for group, _ in stored}
        for group, resource in exact:
            if (group, resource) not in stored:
                self.warnings.append(f"resource {_shown((group, resource))!r} is not stored by "
                                     f"this server; its rule has no effect")
        for group in in_group:
            if group not in known_groups:
                self.warnings.append(f"group {group or 'core'!r} is not served by this "
                                     f"server; '*.{group}' has no effect")

    def transformer_for(self, key):
        """
        The chain of C{key}'s resource, or None for keys of no resource
        (the allocation ranges), whose values pass as they are.

        Keys are C{/registry/<resource>/...} (core) or
        C{/registry/<group>/<resource>/...}: one or two lookups.
        """
        end = key.find("/", 10)
        if end < 0:
            return None
        by_prefix = self.by_prefix
        found = by_prefix.get(key[:end + 1])
        if found is not None:
            return found
        group_end, end = end, key.find("/", end + 1)
        if end < 0:
            return None
        found = by_prefix.get(key[:end + 1])
        if found is None and "." in key[10:group_end]:
            # A custom resource (its group has a dot): the rules decide, as for
            # built-in kinds, once per resource.
            found = by_prefix[key[:end + 1]] = self._chain(
                key[10:group_end], key[group_end + 1:end])
        return found

    def _chain(self, group, resource):
        return (self._exact.get((group, resource)) or self._in_group.get(group)
                or self._everything or self._checking)

    def describe(self):
        """One line per rule, naming providers and the writing key, never secrets."""
        lines = []
        for group_resources, transformers in self.rules:
            providers = []
            for provider in transformers.providers:
                names = [name for name, _ in provider.keys if name]
                providers.append(f"{provider.name}({', '.join(names)})" if names
                                 else provider.name)
            lines.append(f"{', '.join(_shown(gr) for gr in group_resources)}: "
                         f"{' > '.join(providers)}")
        return lines


def load_encryption_config(path, kinds=KINDS):
    """
    Read and check the file at C{path}.

    @raise EncryptionConfigError: with one line naming the problem.
    """
    try:
        document = yamldecode.load_file(path)
    except OSError as error:
        raise EncryptionConfigError(f"cannot read {path}: {error.strerror}") from None
    except yamldecode.YAMLDecodeError as error:
        raise EncryptionConfigError(f"{path} is not valid YAML: {error}") from None
    if document is None:
        raise EncryptionConfigError(f"{path} is empty")
    try:
        return parse_encryption_config(document, kinds)
    except EncryptionConfigError as error:
        raise EncryptionConfigError(f"{path}: {error}") from None


def parse_encryption_config(document, kinds=KINDS):
    """
    The L{EncryptionConfig} of a decoded document.

    @raise EncryptionConfigError: naming the field at fault.
    """
    _mapping(document, "", ("apiVersion", "kind", "resources"))
    api_version = document.get("apiVersion")
    if not isinstance(api_version, str) or canonical_api_version(api_version) != API_VERSION:
        _fail("apiVersion", f"must be {API_VERSION}, not {api_version!r}")
    if document.get("kind") != KIND:
        _fail("kind", f"must be {KIND}, not {document.get('kind')!r}")
    entries = document.get("resources")
    if not entries:
        _fail("resources", "at least one resources entry is required")
    _list(entries, "resources")
    rules, seen = [], {}
    for index, entry in enumerate(entries):
        path = f"resources[{index}]"
        _mapping(entry, path, ("resources", "providers"))
        group_resources = _resources(entry.get("resources"), f"{path}.resources", seen)
        rules.append((group_resources, _providers(entry.get("providers"), f"{path}.providers")))
    return EncryptionConfig(rules, kinds)


def _resources(names, path, seen):
    """The checked C{(group, resource)}s of one rule; C{seen} maps each to where it was named."""
    if not names:
        _fail(path, "at least one resource is required")
    _list(names, path)
    parsed = []
    for index, name in enumerate(names):
        where = f"{path}[{index}]"
        _text(name, where)
        if name != name.lower():
            _fail(where, f"resource name {name!r} should not contain capital letters")
        if name == _ANY:
            _fail(where, "use '*.' to encrypt all the resources from the core API group or "
                         "'*.*' to encrypt all resources")
        if name in _NOT_REST:
            _fail(where, f"{name!r}: resources which do not have REST APIs cannot be encrypted")
        group, resource = parse_group_resource(name)
        if not resource:
            _fail(where, f"{name!r} names no resource")
        if group == _ANY and resource != _ANY:
            _fail(where, f"{name!r}: encrypting the same resource across groups is not "
                         f"supported")
        parsed.append((group, resource))
    for index, (group, resource) in enumerate(parsed):
        where = f"{path}[{index}]"
        if (group, resource) in parsed[:index]:
            _fail(where, f"{_shown((group, resource))!r}: the same resource cannot be "
                         f"specified multiple times")
        if (group, resource) in seen:
            _fail(where, f"{_shown((group, resource))!r} is already listed at "
                         f"{seen[(group, resource)]}; a resource takes one rule")
        for other in parsed:
            if other == (group, resource):
                continue
            if other == (_ANY, _ANY) or (other[0] == group and _ANY in (other[1], resource)):
                _fail(where, f"{_shown((group, resource))!r} overlaps "
                             f"{_shown(other)!r} in the same list; one would mask the other")
        for masking in ((group, _ANY), (_ANY, _ANY)):
            if masking != (group, resource) and masking in seen:
                _fail(where, f"{_shown((group, resource))!r} is masked by the earlier rule "
                             f"{_shown(masking)!r} at {seen[masking]}")
    for index, group_resource in enumerate(parsed):
        seen[group_resource] = f"{path}[{index}]"
    return parsed


def _providers(entries, path):
    if not entries:
        _fail(path, "at least one provider is required")
    _list(entries, path)
    providers, names = [], set()
    for index, entry in enumerate(entries):
        where = f"{path}[{index}]"
        if not isinstance(entry, dict) or not entry:
            _fail(where, f"must name one provider: {', '.join(_PROVIDERS)}")
        if len(entry) > 1:
            _fail(where, f"more than one provider specified in a single element "
                         f"({', '.join(map(str, entry))}); split them into list elements")
        (kind, settings), = entry.items()
        if kind == "kms":
            _fail(f"{where}.kms", "the kms provider is not supported; use aesgcm, aescbc or "
                                  "secretbox")
        if kind not in _PROVIDERS:
            _fail(where, f"unknown provider {kind!r} (expected one of {', '.join(_PROVIDERS)})")
        if kind == "identity":
            if settings not in (None, {}):
                _fail(f"{where}.identity", "takes no settings: write identity: {}")
            providers.append(identity_provider())
            continue
        providers.append(Provider(kind, _keys(kind, settings, f"{where}.{kind}", names)))
    return PrefixTransformers(providers)


def _keys(kind, settings, path, names):
    """C{[(name, transformer)]} of one provider; C{names} holds the rule's C{(kind, name)}s."""
    _mapping(settings, path, ("keys",))
    keys = settings.get("keys")
    path = f"{path}.keys"
    if not keys:
        _fail(path, "at least one key is required")
    _list(keys, path)
    result = []
    for index, key in enumerate(keys):
        where = f"{path}[{index}]"
        _mapping(key, where, ("name", "secret"))
        name = key.get("name")
        if not name:
            _fail(f"{where}.name", "name is a mandatory field for a key")
        _text(name, f"{where}.name")
        if (kind, name) in names:
            _fail(f"{where}.name", f"duplicate key name {name!r} for provider {kind}; "
                                   f"key names must be unique")
        names.add((kind, name))
        secret = key.get("secret")
        if not secret:
            _fail(f"{where}.secret", "secret is a mandatory field for a key")
        _text(secret, f"{where}.secret")
        try:
            raw = base64.b64decode(secret.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            _fail(f"{where}.secret", f"the secret of key {name!r} must be base64 encoded")
        if len(raw) not in KEY_SIZES[kind]:
            _fail(f"{where}.secret", f"the secret of key {name!r} is {len(raw)} bytes long; "
                                     f"{kind} takes {' or '.join(map(str, KEY_SIZES[kind]))}")
        result.append((name, _CIPHERS[kind](raw)))
    return result
