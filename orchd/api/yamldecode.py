# -*- test-case-name: tests.api.test_yamldecode -*-
"""
YAML to JSON-shaped values, with work and memory bounded by the input.

PyYAML builds an anchored value once and shares it at every alias, so a
few hundred bytes of nested aliases (a "billion laughs") load at once and
then explode in whatever walks the result next. This decoder builds the
value from libyaml's events instead: every alias becomes a copy, and each
copy is charged before it is made against an allowance that shrinks as
the document grows (the ratio rule of Kubernetes' YAML decoder since
CVE-2019-11253). Recursive and unknown aliases, nesting deeper than
L{MAX_DEPTH}, numbers out of JSON's range and values JSON cannot hold
(binary, sets, complex keys) are refused. Timestamps stay strings, as JSON
carries them; integers past int64 become floats, as upstream's decoding
of untyped JSON numbers does.

Keys repeated within one mapping are reported by path (C{spec.ports[0].port})
for C{fieldValidation}, so a body is parsed once.
"""

import yaml
from yaml import events
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from orchd.api.bounded import MAX_DEPTH

try:
    from yaml.cyaml import CParser as _Parser  # libyaml: the events come from C
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader as _Parser
_MERGE = "tag:yaml.org,2002:merge"
_STR = "tag:yaml.org,2002:str"
_MAP_TAGS = frozenset((None, "!", "tag:yaml.org,2002:map"))
_SEQ_TAGS = frozenset((None, "!", "tag:yaml.org,2002:seq"))
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

# Below ALIAS_RATIO_LOW nodes, 99% of a document may come from aliases;
# above ALIAS_RATIO_HIGH, 10%; in between the allowance falls linearly.
_ALIAS_RATIO_LOW = 400_000
_ALIAS_RATIO_HIGH = 4_000_000


class YAMLDecodeError(ValueError):
    """A document that is not YAML, or not one this decoder will build."""


class _Resolver(Resolver):
    """YAML 1.1 implicit types, but timestamps stay strings."""


_Resolver.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in Resolver.yaml_implicit_resolvers.items()
}
_resolve = _Resolver().resolve
_constructor = SafeConstructor()


def _integer(text):
    value = _constructor.construct_yaml_int(yaml.ScalarNode(None, text))
    if _INT64_MIN <= value <= _INT64_MAX:
        return value
    return _float_of(value, text)


def _float(text):
    return _float_of(_constructor.construct_yaml_float(yaml.ScalarNode(None, text)), text)


def _float_of(value, text):
    value = float(value)
    if value != value or value in (float("inf"), float("-inf")):
        raise YAMLDecodeError(f"number out of range: {text[:40]}")
    return value


_SCALARS = {
    "tag:yaml.org,2002:null": lambda text: None,
    "tag:yaml.org,2002:bool": lambda text: SafeConstructor.bool_values[text.lower()],
    "tag:yaml.org,2002:int": _integer,
    "tag:yaml.org,2002:float": _float,
    _STR: str,
    # Written out explicitly, a timestamp is still carried as its text.
    "tag:yaml.org,2002:timestamp": str,
    _MERGE: str,
    "tag:yaml.org,2002:value": str,
}


def allowed_alias_ratio(decoded):
    """The share of C{decoded} nodes that may come from expanding aliases."""
    if decoded <= _ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= _ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)


class _Frame:
    """An open mapping or sequence: what it holds so far and what it costs."""

    __slots__ = ("value", "is_map", "anchor", "segment", "key", "size", "depth", "merges")

    def __init__(self, value, is_map, anchor, segment):
        self.value = value
        self.is_map = is_map
        self.anchor = anchor
        self.segment = segment
        self.key = _NO_KEY
        self.size = 1
        self.depth = 1
        self.merges = None


_NO_KEY = object()
_MERGE_KEY = object()
_OPEN = object()


class _Builder:
    """Builds one document from events; see the module docstring."""

    def __init__(self, max_depth):
        self.max_depth = max_depth
        self.stack = []
        self.anchors = {}
        self.decoded = 0
        self.aliased = 0
        self.duplicates = []
        self.root = None
        self.plain = {}

    def scalar(self, event):
        tag = event.tag
        text = event.value
        if tag is None and event.implicit[0] and event.anchor is None:
            # Plain scalars repeat (keys above all); their value depends on
            # the text alone.
            cached = self.plain.get(text, _NO_KEY)
            if cached is not _NO_KEY:
                self.decoded += 1
                self.add(cached, 1, 0)
                return
            tag = _resolve(yaml.ScalarNode, text, event.implicit)
            value = self.construct(tag, text)
            if value is _MERGE_KEY:
                return
            if tag != _MERGE:
                self.plain[text] = value
            self.decoded += 1
            self.add(value, 1, 0)
            return
        if tag is None or tag == "!":
            tag = _resolve(yaml.ScalarNode, text, event.implicit)
        value = self.construct(tag, text)
        if value is _MERGE_KEY:
            return
        self.decoded += 1
        if event.anchor is not None:
            self.define(event.anchor, (value, 1, 0))
        self.add(value, 1, 0)

    def construct(self, tag, text):
        """The value of a scalar; a merge key (C{<<}) in key position is taken here."""
        if tag == _MERGE and self.stack and self.stack[-1].is_map \
                and self.stack[-1].key is _NO_KEY:
            self.decoded += 1
            self.stack[-1].key = _MERGE_KEY
            return _MERGE_KEY
        construct = _SCALARS.get(tag)
        if construct is None:
            raise YAMLDecodeError(f"could not determine a constructor for the tag {tag!r}")
        try:
            return construct(text)
        except YAMLDecodeError:
            raise
        except (ValueError, KeyError, IndexError, OverflowError) as e:
            # IndexError: PyYAML's int and float constructors index the
            # text's first character, so an explicitly tagged empty scalar
            # (`!!int ""`) fails there.
            raise YAMLDecodeError(f"cannot read the value {text[:40]!r}: {e}") from None

    def start(self, event, is_map):
        tags = _MAP_TAGS if is_map else _SEQ_TAGS
        if event.tag not in tags:
            raise YAMLDecodeError(f"unsupported YAML value of tag {event.tag!r}")
        stack = self.stack
        if len(stack) >= self.max_depth:
            raise YAMLDecodeError(f"exceeded max depth of {self.max_depth}")
        segment = None
        if stack:
            parent = stack[-1]
            if parent.is_map:
                if parent.key is _NO_KEY:
                    raise YAMLDecodeError("mapping keys must be strings, numbers, "
                                          "booleans or null")
                segment = parent.key
            else:
                segment = len(parent.value)
        if event.anchor is not None:
            self.define(event.anchor, _OPEN)
        self.decoded += 1
        stack.append(_Frame({} if is_map else [], is_map, event.anchor, segment))

    def end(self):
        frame = self.stack.pop()
        if frame.merges:
            value = frame.value
            for source in frame.merges:
                for key, item in source.items():
                    value.setdefault(key, item)
        if frame.anchor is not None:
            self.anchors[frame.anchor] = (frame.value, frame.size, frame.depth)
        self.add(frame.value, frame.size, frame.depth)

    def alias(self, event):
        name = event.anchor
        found = self.anchors.get(name)
        if found is None:
            raise YAMLDecodeError(f"unknown anchor {name!r} referenced")
        if found is _OPEN:
            raise YAMLDecodeError(f"anchor {name!r} value contains itself")
        value, size, depth = found
        self.decoded += size
        self.aliased += size
        if (self.aliased > 100 and self.decoded > 1000
                and self.aliased / self.decoded > allowed_alias_ratio(self.decoded)):
            raise YAMLDecodeError("document contains excessive aliasing")
        if len(self.stack) + depth > self.max_depth:
            raise YAMLDecodeError(f"exceeded max depth of {self.max_depth}")
        self.add(_copy(value) if depth else value, size, depth)

    def define(self, name, entry):
        if name in self.anchors:
            # libyaml allows redefinition; a redefined anchor only makes a
            # document harder to read, so it is refused as PyYAML does.
            raise YAMLDecodeError(f"found duplicate anchor {name!r}")
        self.anchors[name] = entry

    def add(self, value, size, depth):
        """Put a finished value into the open collection (or make it the document)."""
        stack = self.stack
        if not stack:
            self.root = value
            return
        frame = stack[-1]
        frame.size += size
        if depth >= frame.depth:
            frame.depth = depth + 1
        if not frame.is_map:
            frame.value.append(value)
            return
        key = frame.key
        if key is _NO_KEY:
            frame.key = _json_key(value)
            return
        frame.key = _NO_KEY
        if key is _MERGE_KEY:
            frame.merges = (frame.merges or []) + _merge_sources(value)
            return
        mapping = frame.value
        if key in mapping:
            self.duplicates.append(self.path(key))
        mapping[key] = value

    def path(self, key):
        """The dotted path of C{key} in the innermost open mapping."""
        parts = []
        for frame in self.stack[1:]:
            segment = frame.segment
            if type(segment) is int:
                parts.append(f"[{segment}]")
            else:
                parts.append(("." if parts else "") + segment)
        parts.append(("." if parts else "") + key)
        return "".join(parts)


def _problem(error):
    """A libyaml error as one line: where, then what."""
    mark = getattr(error, "problem_mark", None)
    problem = " ".join((getattr(error, "problem", None) or str(error)).split())
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return problem


def _json_key(value):
    kind = type(value)
    if kind is str:
        return value
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    if kind in (int, float):
        return str(value)
    raise YAMLDecodeError("mapping keys must be strings, numbers, booleans or null")


def _merge_sources(value):
    """The mappings a merge key (C{<<}) names: one mapping or a list of them."""
    if type(value) is dict:
        return [value]
    if type(value) is list and all(type(item) is dict for item in value):
        return value
    raise YAMLDecodeError("expected a mapping or list of mappings for merging")


def _copy(value):
    if type(value) is dict:
        return {k: _copy(v) for k, v in value.items()}
    if type(value) is list:
        return [_copy(v) for v in value]
    return value


#: The largest YAML file read from disk (configuration, orchconfigs).
MAX_FILE = 4 * 1024 * 1024


def load_file(path):
    """
    The one document of the YAML file at C{path} (see L{load}).

    @raise OSError: the file cannot be read.
    @raise YAMLDecodeError: as L{load}, or the file is larger than L{MAX_FILE}.
    """
    with open(path, "rb") as stream:
        data = stream.read(MAX_FILE + 1)
    if len(data) > MAX_FILE:
        raise YAMLDecodeError(f"larger than {MAX_FILE} bytes")
    return load(data)[0]


def load(data, max_depth=MAX_DEPTH):
    """
    Decode one YAML document (bytes or text) into JSON-shaped values.

    @return: C{(value, duplicate_key_paths)}; the value is None for an
        empty document.
    @raise YAMLDecodeError: for malformed YAML, several documents, or a
        document refused by the bounds above.
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise YAMLDecodeError(f"invalid UTF-8: {e}") from None
    parser = _Parser(data)
    builder = _Builder(max_depth)
    documents = 0
    try:
        while True:
            event = parser.get_event()
            kind = type(event)
            if kind is events.ScalarEvent:
                builder.scalar(event)
            elif kind is events.MappingStartEvent:
                builder.start(event, True)
            elif kind is events.SequenceStartEvent:
                builder.start(event, False)
            elif kind is events.MappingEndEvent or kind is events.SequenceEndEvent:
                builder.end()
            elif kind is events.AliasEvent:
                builder.alias(event)
            elif kind is events.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise YAMLDecodeError("expected a single document in the stream")
            elif event is None or kind is events.StreamEndEvent:
                break
    except yaml.YAMLError as e:
        raise YAMLDecodeError(_problem(e)) from None
    except RecursionError:
        raise YAMLDecodeError(f"exceeded max depth of {max_depth}") from None
    finally:
        dispose = getattr(parser, "dispose", None)
        if dispose is not None:
            dispose()
    return builder.root, list(dict.fromkeys(builder.duplicates))
