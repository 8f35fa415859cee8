"""
The decoders of request bodies on hostile input: JSON, YAML (aliases,
anchors, merge keys, tags, deep nesting, huge numbers), protobuf
envelopes, and the integer ranges of typed fields.
"""

import datetime
import json
import math

import yaml
from hypothesis import example, given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from orchd.api import codecs, yamldecode
from orchd.api.bounded import MAX_DEPTH, parse_json, within_depth
from orchd.api.errors import FieldError, StatusError
from orchd.api.proto.convert import Converter
from orchd.api.proto.envelope import MAGIC, codec
from orchd.api.proto.ranges import integer_errors
from orchd.api.proto.schema import schema
from tests.api.test_proto_roundtrip import objects as message_objects
from tests.fuzz.support import as_decoded, bounded, fuzz, json_values, numbers

_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# -- hostile YAML ------------------------------------------------------------------

#: Plain scalars YAML 1.1 gives a meaning to, or that look like syntax.
_PLAIN = ["a", "b", "0", "-1", "1_000", "0x1F", "0o17", "017", "0b101", "1:20:30", "1.5e3",
          ".inf", "-.Inf", ".NaN", "~", "null", "yes", "No", "on", "OFF", "y", "true",
          "2001-12-14", "2001-12-14t21:59:43.10-05:00", "=", "<<", "1e400",
          "9" * 30, "0x" + "f" * 40, "-" + "9" * 25, "1" * 400 + ".5", "12:" + "5" * 20,
          "'q'", '"d"', "x y"]
_TAGS = ["!!str", "!!int", "!!float", "!!bool", "!!null", "!!timestamp", "!!binary", "!!map",
         "!!seq", "!!set", "!!omap", "!!pairs", "!!merge", "!!value", "!", "!local",
         "!!python/object:os.system", "!<tag:yaml.org,2002:str>", "!<tag:example.com,1:x>"]


@st.composite
def yaml_documents(draw, aliases=True, max_depth=6):
    """
    A YAML document in flow style: scalars (plain, quoted, tagged), nested
    mappings and sequences, and with C{aliases} anchors, aliases (known,
    unknown and recursive ones) and merge keys.
    """
    defined, open_anchors = [], []

    def prefix():
        out = ""
        if draw(st.integers(0, 9)) == 0:
            out += draw(st.sampled_from(_TAGS)) + " "
        anchor = None
        if aliases and draw(st.integers(0, 5)) == 0:
            anchor = f"a{len(defined) + len(open_anchors)}"
            out = f"&{anchor} " + out
        return out, anchor

    def alias():
        choice = draw(st.integers(0, 9))
        if choice == 0:
            return "*undefined"
        if choice == 1 and open_anchors:
            return "*" + draw(st.sampled_from(open_anchors))  # refers to itself
        if defined:
            return "*" + draw(st.sampled_from(defined))
        return "null"

    def scalar():
        kind = draw(st.integers(0, 3))
        if kind == 0:
            return json.dumps(draw(st.text(max_size=8)))
        return draw(st.sampled_from(_PLAIN))

    def node(depth):
        kind = draw(st.integers(0, 6 if depth < max_depth else 1))
        if aliases and kind == 1 and draw(st.booleans()):
            return alias()
        if kind <= 1:
            text, anchor = prefix()
            if anchor:
                defined.append(anchor)
            return text + scalar()
        text, anchor = prefix()
        if anchor:
            open_anchors.append(anchor)
        if kind <= 3:
            items = [node(depth + 1) for _ in range(draw(st.integers(0, 4)))]
            body = "[" + ", ".join(items) + "]"
        else:
            entries = []
            for _ in range(draw(st.integers(0, 4))):
                if aliases and draw(st.integers(0, 6)) == 0:
                    entries.append("<<: " + (alias() if draw(st.booleans())
                                             else node(depth + 1)))
                else:
                    key = draw(st.sampled_from(["a", "b", "c", "1", "true", "null", "<<",
                                                "'a'", "[k]", "{k: v}", "1.5"]))
                    entries.append(f"{key}: {node(depth + 1)}")
            body = "{" + ", ".join(entries) + "}"
        if anchor:
            open_anchors.remove(anchor)
            defined.append(anchor)
        return text + body

    return node(0)


def laughs(width, levels):
    """A "billion laughs" document: each level lists the one before C{width} times."""
    lines = ['a: &a ["lol"]']
    for level in range(1, levels):
        refs = ", ".join([f"*a{level - 1}" if level > 1 else "*a"] * width)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "\n".join(lines) + "\n"


def _plain_json(value):
    """A PyYAML value in the shape this server's decoder gives: JSON types only."""
    if isinstance(value, dict):
        return {_key(k): _plain_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_json(v) for v in value]
    if isinstance(value, (datetime.date, bytes, set)):
        raise _Incomparable  # timestamps stay text here; binary and sets are refused
    if isinstance(value, int) and not isinstance(value, bool) \
            and not -(1 << 63) <= value < (1 << 63):
        return float(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise _Incomparable
    return value


def _key(key):
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, (int, float)):
        return str(_plain_json(key))
    if isinstance(key, str):
        return key
    raise _Incomparable


class _Incomparable(Exception):
    pass


class YAMLDecoderTests(SynchronousTestCase):
    """L{yamldecode.load}: a value or L{yamldecode.YAMLDecodeError}, at once."""

    @fuzz(250)
    @given(yaml_documents())
    @example("a: &a [*a]")
    @example("{<<: [*x]}")
    @example("&a [&a b]")
    @example(laughs(10, 9))
    def test_hostile_documents(self, document):
        """Documents with tags, anchors, aliases and merges decode or are refused, quickly."""
        outcome = bounded(self, yamldecode.load, document, errors=yamldecode.YAMLDecodeError)
        if outcome.error is None:
            value, duplicates = outcome.value
            self.assertTrue(within_depth(value))
            self.assertIsInstance(duplicates, list)

    @fuzz(300)
    @given(yaml_documents(aliases=False))
    def test_agrees_with_pyyaml(self, document):
        """Without aliases, a document both decoders read gives PyYAML's value, JSON-shaped."""
        ours = bounded(self, yamldecode.load, document, errors=yamldecode.YAMLDecodeError)
        try:
            theirs = yaml.load(document, Loader=_SafeLoader)
        except Exception:  # noqa: BLE001 - the reference, not the code under test
            return  # PyYAML itself crashes on some (`!!bool ""`, `!!timestamp ""`)
        if ours.error is not None:
            return
        try:
            expected = _plain_json(theirs)
        except _Incomparable:
            return
        self.assertEqual(ours.value[0], expected)

    @fuzz(60)
    @given(st.integers(2, 12), st.integers(2, 12))
    def test_alias_bombs(self, width, levels):
        """A billion-laughs document decodes only when its expansion is modest."""
        outcome = bounded(self, yamldecode.load, laughs(width, levels),
                          errors=yamldecode.YAMLDecodeError, seconds=1.0)
        if outcome.error is None:
            self.assertLessEqual(width ** levels, 10 ** 7)

    @fuzz(40)
    @given(st.integers(MAX_DEPTH - 5, 2000), st.sampled_from(["[", "{a: ", "- ", "a:\n"]))
    def test_deep_nesting(self, depth, opener):
        """Nesting past the bound is refused without a RecursionError."""
        if opener == "- ":
            document = "".join("  " * i + "-\n" for i in range(depth)) + "  " * depth + "x\n"
        elif opener == "a:\n":
            document = "".join("  " * i + "a:\n" for i in range(depth)) + "  " * depth + "x\n"
        else:
            closer = "]" if opener == "[" else "}"
            document = opener * depth + "x" + closer * depth
        outcome = bounded(self, yamldecode.load, document, errors=yamldecode.YAMLDecodeError)
        if outcome.error is None:
            self.assertTrue(within_depth(outcome.value[0]))

    @fuzz(300)
    @given(st.binary(max_size=200))
    def test_arbitrary_bytes(self, data):
        """Any bytes at all decode or are refused."""
        bounded(self, yamldecode.load, data, errors=yamldecode.YAMLDecodeError)


class JSONDecoderTests(SynchronousTestCase):
    """L{codecs.decode} and L{bounded.parse_json} on JSON."""

    @fuzz(300)
    @given(json_values())
    def test_round_trip(self, value):
        """What orjson encodes decodes to the same value, with no duplicates reported."""
        data = json.dumps(value).encode()
        outcome = bounded(self, codecs.decode, data, codecs.JSON, True)
        self.assertIsNone(outcome.error)
        self.assertEqual(outcome.value, (as_decoded(value), []))

    @fuzz(300)
    @given(st.one_of(st.binary(max_size=200),
                     json_values().map(lambda v: json.dumps(v).encode()).flatmap(
                         lambda data: st.tuples(st.just(data), st.integers(0, len(data)),
                                                st.binary(max_size=3)).map(
                             lambda t: t[0][:t[1]] + t[2] + t[0][t[1] + 1:]))))
    def test_mutated_and_arbitrary(self, data):
        """Broken JSON (and any bytes) is a 400, duplicates or not."""
        bounded(self, codecs.decode, data, codecs.JSON, True)
        bounded(self, parse_json, data, errors=ValueError)

    @fuzz(30)
    @given(st.integers(MAX_DEPTH - 3, 5000), st.sampled_from(["[", '{"a":']))
    def test_deep_nesting(self, depth, opener):
        """Nesting past the bound is a 400 from the decoder and a ValueError from parse_json."""
        closer = "]" if opener == "[" else "}"
        data = (opener * depth + "1" + closer * depth).encode()
        outcome = bounded(self, codecs.decode, data, codecs.JSON, True)
        self.assertEqual(outcome.error is None, depth <= MAX_DEPTH)
        parsed = bounded(self, parse_json, data, errors=ValueError)
        self.assertEqual(parsed.error is None, depth <= MAX_DEPTH)

    @fuzz(200)
    @given(st.sampled_from([codecs.JSON, codecs.YAML, codecs.PROTOBUF, "application/yml",
                            "text/yaml", "application/x-yaml", "text/plain", "",
                            "application/json; charset=utf-8", "APPLICATION/JSON",
                            "application/vnd.kubernetes.protobuf;x=y", ";", "\x00"]),
           st.one_of(st.binary(max_size=100), json_values().map(
               lambda v: json.dumps(v).encode())))
    def test_decode_body(self, content_type, data):
        """decode_body answers an object, a 400 or a 415, whatever the type and bytes."""
        outcome = bounded(self, codecs.decode_body, content_type, data)
        if outcome.error is None:
            self.assertIsInstance(outcome.value, dict)


class ProtobufTests(SynchronousTestCase):
    """The protobuf envelope on random and mutated bytes."""

    KINDS = [("v1", "ConfigMap"), ("v1", "Pod"), ("apps/v1", "Deployment"), ("v1", "Service"),
             ("v1", "Secret")]

    @fuzz(300)
    @given(st.binary(max_size=300))
    def test_random_bytes(self, data):
        """Random bytes, with and without the magic prefix, are a 400."""
        wire = codec()
        bounded(self, codecs.decode, data, codecs.PROTOBUF)
        bounded(self, wire.decode, MAGIC + data)

    @fuzz(150)
    @given(st.data())
    def test_mutated_messages(self, data):
        """A valid enveloped object with bytes flipped, cut or inserted decodes or is a 400."""
        api_version, kind = data.draw(st.sampled_from(self.KINDS))
        body = data.draw(_messages(api_version, kind))
        encoded = bytearray(codec().encode({"apiVersion": api_version, "kind": kind, **body}))
        for _ in range(data.draw(st.integers(1, 4))):
            at = data.draw(st.integers(0, len(encoded)))
            action = data.draw(st.integers(0, 3))
            if action == 0 and at < len(encoded):
                encoded[at] ^= 1 << data.draw(st.integers(0, 7))
            elif action == 3 and at < len(encoded):
                encoded[at] = data.draw(st.integers(0x80, 0xff))  # text no longer UTF-8
            elif action == 1:
                del encoded[at:]
            else:
                encoded[at:at] = data.draw(st.binary(min_size=1, max_size=4))
        outcome = bounded(self, codecs.decode, bytes(encoded), codecs.PROTOBUF)
        if outcome.error is None:
            value = outcome.value[0]
            self.assertIsInstance(value, dict)
            # What decodes encodes again (reads of the stored object work).
            json.dumps(value)


_MESSAGES = {}


def _messages(api_version, kind):
    """Valid objects of a kind (the strategy is costly to build: built once)."""
    strategy = _MESSAGES.get((api_version, kind))
    if strategy is None:
        cls = schema().kind_message(api_version, kind)
        strategy = _MESSAGES[api_version, kind] = message_objects(Converter(schema()), cls)
    return strategy


def _typed_objects():
    """Objects of typed kinds with hostile values where integers belong."""
    hostile = st.one_of(numbers, st.text(max_size=3), st.booleans(), st.none(),
                        st.lists(numbers, max_size=2), st.dictionaries(st.text(max_size=2),
                                                                        numbers, max_size=2))
    deployment = st.fixed_dictionaries({"spec": st.fixed_dictionaries({}, optional={
        "replicas": hostile, "minReadySeconds": hostile, "revisionHistoryLimit": hostile,
        "template": st.fixed_dictionaries({"spec": st.fixed_dictionaries({}, optional={
            "containers": st.lists(st.fixed_dictionaries({}, optional={
                "ports": st.one_of(hostile, st.lists(st.fixed_dictionaries(
                    {"containerPort": hostile}), max_size=2))}), max_size=2),
            "terminationGracePeriodSeconds": hostile})}),
    })})
    pod = st.fixed_dictionaries({"spec": st.fixed_dictionaries({}, optional={
        "priority": hostile, "activeDeadlineSeconds": hostile,
        "containers": st.one_of(hostile, st.lists(st.one_of(hostile, st.fixed_dictionaries(
            {}, optional={"ports": st.lists(st.dictionaries(
                st.sampled_from(["containerPort", "hostPort"]), hostile), max_size=2)})),
            max_size=2))}),
        "metadata": st.fixed_dictionaries({}, optional={"generation": hostile,
                                                        "deletionGracePeriodSeconds": hostile})})
    return st.one_of(deployment.map(lambda o: ("apps/v1", "Deployment", o)),
                     pod.map(lambda o: ("v1", "Pod", o)),
                     json_values().map(lambda o: ("v1", "Service", o)))


class IntegerRangeTests(SynchronousTestCase):
    """L{integer_errors} on typed kinds with any value where an integer belongs."""

    @fuzz(300)
    @given(_typed_objects())
    def test_hostile_values(self, case):
        """Every value gets a verdict: field errors or none, never an exception."""
        api_version, kind, obj = case
        outcome = bounded(self, integer_errors, obj, api_version, kind)
        for error in outcome.value:
            self.assertIsInstance(error, FieldError)

    @fuzz(100)
    @given(st.integers(), st.floats(allow_nan=False))
    def test_replicas(self, number, real):
        """spec.replicas is accepted exactly when it is an int32, integral floats included."""
        for value in (number, real):
            obj = {"spec": {"replicas": value}}
            errors = integer_errors(obj, "apps/v1", "Deployment")
            fits = (isinstance(value, int) or value.is_integer()) \
                and -(1 << 31) <= value < (1 << 31)
            self.assertEqual(not errors, fits, (value, errors))
            if fits:
                self.assertIs(type(obj["spec"]["replicas"]), int)


class StatusErrorsTests(SynchronousTestCase):
    def test_bounded_refuses_5xx(self):
        """The contract check itself fails a function that answers 500."""
        def broken():
            raise StatusError.internal("boom")
        self.assertRaises(self.failureException, bounded, self, broken)
