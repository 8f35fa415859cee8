# -*- test-case-name: tests.api.test_fieldvalidation -*-
"""
Duplicate keys in request bodies, for C{fieldValidation} (REFERENCE section 5).

The server decodes bodies with orjson (or YAML), where the last of
duplicated keys wins, as upstream's decoder does; this module only finds
the duplicates so that they can be reported, by path in upstream's form
(L{orchd.api.fieldvalidation}): C{metadata.name}, C{spec.ports[0].port},
C{kind} at the top. Each path is reported once, in document order.

Bodies that do not parse are not this module's business: they give no
duplicates, and the decoder reports the error.
"""

import json

from orchd.api import yamldecode


def duplicate_fields(body_bytes, media_type=None):
    """
    The paths of keys that occur more than once within one JSON object (or
    YAML mapping), anywhere in C{body_bytes}. C{media_type} (a Content-Type,
    str or bytes, parameters allowed) chooses the syntax: YAML when it names
    YAML (C{application/yaml}, C{application/apply-patch+yaml}), else JSON.
    """
    if isinstance(media_type, bytes):
        media_type = media_type.decode("latin-1")
    kind = (media_type or "").split(";", 1)[0].strip().lower()
    if "yaml" in kind or "yml" in kind:
        return _yaml_duplicates(body_bytes)
    return json_duplicates(body_bytes)


# JSON ---------------------------------------------------------------------------

class _Mapping(dict):
    """A decoded object that remembers its keys in order when some repeat."""

    __slots__ = ("pairs",)


def _detect(pairs):
    mapping = dict(pairs)
    if len(mapping) != len(pairs):
        raise _Found
    return mapping


class _Found(Exception):
    pass


def _tracked(pairs):
    mapping = _Mapping(pairs)
    mapping.pairs = pairs if len(mapping) != len(pairs) else None
    return mapping


def json_duplicates(data, value=None):
    """
    The paths of keys repeated within one object of a JSON document.

    @param value: C{data} as already decoded (orjson, where the last of
        repeated keys wins), if it is: the common answer, none, is then
        found by counting keys rather than by decoding C{data} again.
    """
    if value is not None and _spells_no_key_twice(data, value):
        return []
    # A first pass only looks for any duplicate: the common answer is none.
    try:
        json.loads(data, object_pairs_hook=_detect)
        return []
    except _Found:
        pass
    except (ValueError, TypeError, RecursionError):
        return []
    found = []
    _walk_json(json.loads(data, object_pairs_hook=_tracked), "", found)
    return list(dict.fromkeys(found))


def _decoded_keys(value):
    """How many keys the objects of a decoded JSON value hold, in all."""
    count = 0
    if type(value) is dict:
        count = len(value)
        value = value.values()
    elif type(value) is not list:
        return 0
    for item in value:
        kind = type(item)
        if kind is dict or kind is list:
            count += _decoded_keys(item)
    return count


def _spells_no_key_twice(text, value):
    """
    Whether the valid JSON document C{text} (bytes or str), decoded as
    C{value}, spells as many keys as C{value}'s objects hold: then no key
    repeats within an object (nor is one key spelt two ways, C{"a"} and
    C{"\\u0061"}). A key is a colon outside the document's strings.
    """
    keys = _decoded_keys(value)
    colon, quote, backslash = (b":", b'"', b"\\") if isinstance(text, bytes) else (":", '"', "\\")
    colons = text.count(colon)
    if colons == keys:
        return True     # no string holds a colon
    # Drop the strings and count again. An escape is a backslash and the
    # character after it, so pairs of backslashes go first, then escaped
    # quotes; what is left between two quotes is then one string.
    if backslash in text:
        text = text.replace(backslash + backslash, text[:0]).replace(backslash + quote, text[:0])
    return text[:0].join(text.split(quote)[::2]).count(colon) == keys


def _walk_json(value, path, found):
    if isinstance(value, _Mapping):
        prefix = path + "." if path else ""
        if value.pairs is None:
            for key, item in value.items():
                _walk_json(item, prefix + key, found)
            return
        seen = set()
        for key, item in value.pairs:
            # Upstream reports the key when it meets it again, before its value.
            if key in seen:
                found.append(prefix + key)
            seen.add(key)
            _walk_json(item, prefix + key, found)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _walk_json(item, f"{path}[{index}]", found)


# YAML ---------------------------------------------------------------------------

def _yaml_duplicates(data):
    try:
        return yamldecode.load(data)[1]
    except yamldecode.YAMLDecodeError:
        return []
