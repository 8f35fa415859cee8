"""
Tests for L{orchd.api.selectors}.
"""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.api.selectors import (
    EQUALS, NOT_EQUALS, FieldRequirement, parse_field_selector, parse_label_selector,
    selector_from_label_selector_object,
)

_KEY_RULE = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
             "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
             "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
_VALUE_RULE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', "
               "'_' or '.', and must start and end with an alphanumeric character (e.g. "
               "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
               "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")

WEB = {"app": "web", "tier": "frontend", "replicas": "3"}
DB = {"app": "db", "tier": "backend"}
BARE = {}


class LabelSelectorTests(SynchronousTestCase):

    def assertSelects(self, text, *expected):
        selector = parse_label_selector(text)
        chosen = [name for name, labels in (("web", WEB), ("db", DB), ("bare", BARE))
                  if selector.matches(labels)]
        self.assertEqual(chosen, list(expected), text)

    def assertParseError(self, text, message):
        with self.assertRaises(StatusError) as raised:
            parse_label_selector(text)
        self.assertEqual(raised.exception.code, 400)
        self.assertEqual(raised.exception.reason, "BadRequest")
        self.assertEqual(raised.exception.message, message)

    def test_empty(self):
        """An empty selector is empty and matches everything."""
        for text in ("", "   "):
            selector = parse_label_selector(text)
            self.assertTrue(selector.empty)
            self.assertTrue(selector.matches(WEB) and selector.matches(BARE))
        self.assertFalse(parse_label_selector("app").empty)

    def test_equality(self):
        """C{=} and C{==} need the label with that value; C{!=} accepts its absence."""
        self.assertSelects("app=web", "web")
        self.assertSelects("app==db", "db")
        self.assertSelects("app!=web", "db", "bare")

    def test_sets(self):
        """C{in} needs a listed value; C{notin} accepts the label's absence."""
        self.assertSelects("app in (web,db)", "web", "db")
        self.assertSelects("app notin (web)", "db", "bare")

    def test_existence(self):
        """A bare key needs the label; C{!key} needs its absence."""
        self.assertSelects("tier", "web", "db")
        self.assertSelects("!tier", "bare")

    def test_comparisons(self):
        """C{>} and C{<} compare integers; a missing or non-numeric label never matches."""
        self.assertSelects("replicas>2", "web")
        self.assertSelects("replicas<3")
        self.assertFalse(parse_label_selector("app>1").matches(WEB))

    def test_and_and_whitespace(self):
        """Commas join requirements; whitespace around tokens is ignored."""
        self.assertSelects(" app in ( web , db ) ,  tier != backend ", "web")
        self.assertSelects("app=web,tier=backend")

    def test_keywords_as_values(self):
        """C{in} and C{notin} are plain words where values go."""
        selector = parse_label_selector("x in (in,notin),y=in")
        self.assertTrue(selector.matches({"x": "notin", "y": "in"}))

    def test_empty_values(self):
        """C{k=} and C{k in ()} select the empty value."""
        self.assertTrue(parse_label_selector("k=").matches({"k": ""}))
        self.assertTrue(parse_label_selector("k in ()").matches({"k": ""}))

    def test_prefixed_key(self):
        """Keys may carry a DNS prefix."""
        self.assertTrue(parse_label_selector("orch.io/role=x").matches({"orch.io/role": "x"}))

    def test_string_form(self):
        """Requirements are sorted by key and written canonically."""
        self.assertEqual(str(parse_label_selector("b notin (y,x), a==1,!c")), "a==1,b notin (x,y),!c")

    def test_requires_exact_match(self):
        """A selector pinning a key to one value reports it."""
        selector = parse_label_selector("app=web,tier in (a,b)")
        self.assertEqual(selector.requires_exact_match("app"), "web")
        self.assertIsNone(selector.requires_exact_match("tier"))

    def test_bad_key(self):
        """An invalid key is reported as upstream reports it."""
        self.assertParseError(
            "app:web", f'unable to parse requirement: <nil>: Invalid value: "app:web": {_KEY_RULE}')

    def test_bad_value(self):
        """An invalid value names its index and key."""
        self.assertParseError(
            "app=a b", "found 'b', expected: ',' or 'end of string'")
        self.assertParseError(
            "app=w@b", f'unable to parse requirement: values[0][app]: Invalid value: "w@b": {_VALUE_RULE}')

    def test_long_value(self):
        """Values are at most 63 bytes."""
        value = "v" * 64
        self.assertParseError(
            f"app={value}",
            f'unable to parse requirement: values[0][app]: Invalid value: "{value}": '
            "must be no more than 63 bytes")

    def test_syntax_errors(self):
        """Syntax errors use upstream's parser messages."""
        self.assertParseError("app=web,", "found '', expected: identifier after ','")
        self.assertParseError("=web", "found '=', expected: !, identifier, or 'end of string'")
        self.assertParseError("app in web", "unable to parse requirement: found 'web' expected: '('")
        self.assertParseError(
            "app in (web", "unable to parse requirement: found '', expected: ',' or ')'")
        self.assertParseError(
            "app gt 1",
            "unable to parse requirement: found 'gt', expected: in, notin, =, ==, !=, gt, lt")
        self.assertParseError(
            "n>x", 'unable to parse requirement: values[0]: Invalid value: "x": '
                   "for 'Gt', 'Lt' operators, the value must be an integer")
        # Thousands of digits: refused as out of range, without converting them.
        self.assertRaises(StatusError, parse_label_selector, "n>" + "9" * 10_000)


class LabelSelectorObjectTests(SynchronousTestCase):

    def test_match_labels_and_expressions(self):
        """matchLabels and matchExpressions are ANDed."""
        selector = selector_from_label_selector_object({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["frontend", "edge"]},
                {"key": "legacy", "operator": "DoesNotExist"},
                {"key": "replicas", "operator": "Exists"},
                {"key": "zone", "operator": "NotIn", "values": ["b"]},
            ],
        })
        self.assertTrue(selector.matches(WEB))
        self.assertFalse(selector.matches(dict(WEB, legacy="1")))
        self.assertFalse(selector.matches(DB))

    def test_empty_and_none(self):
        """An empty selector object matches everything; None matches nothing."""
        self.assertTrue(selector_from_label_selector_object({}).matches(BARE))
        self.assertTrue(selector_from_label_selector_object({}).empty)
        self.assertFalse(selector_from_label_selector_object(None).matches(BARE))
        self.assertFalse(selector_from_label_selector_object(None).empty)

    def test_bad_operator(self):
        """An unknown operator is rejected with upstream's message."""
        with self.assertRaises(StatusError) as raised:
            selector_from_label_selector_object(
                {"matchExpressions": [{"key": "a", "operator": "Near"}]})
        self.assertEqual(raised.exception.message, '"Near" is not a valid label selector operator')

    def test_in_needs_values(self):
        """C{In} without values is rejected."""
        with self.assertRaises(StatusError) as raised:
            selector_from_label_selector_object(
                {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})
        self.assertEqual(raised.exception.message,
                         "values: Invalid value: []string{}: for 'in', 'notin' operators, "
                         "values set can't be empty")


class FieldSelectorTests(SynchronousTestCase):

    def test_operators(self):
        """C{=}, C{==} and C{!=} compare a field's value; a missing field is empty."""
        selector = parse_field_selector("metadata.name==web,metadata.namespace!=kube")
        self.assertEqual(selector.requirements, (
            FieldRequirement("metadata.name", EQUALS, "web"),
            FieldRequirement("metadata.namespace", NOT_EQUALS, "kube"),
        ))
        self.assertTrue(selector.matches({"metadata.name": "web", "metadata.namespace": "default"}))
        self.assertTrue(selector.matches({"metadata.name": "web"}))
        self.assertFalse(selector.matches({"metadata.name": "db"}))

    def test_empty(self):
        """An empty field selector matches everything."""
        selector = parse_field_selector("")
        self.assertTrue(selector.empty)
        self.assertTrue(selector.matches({}))

    def test_single_name(self):
        """Callers can find a single-name lookup in the requirements."""
        selector = parse_field_selector("metadata.name=web")
        self.assertEqual(selector.requires_exact_match("metadata.name"), "web")
        self.assertIsNone(parse_field_selector("metadata.name!=web")
                          .requires_exact_match("metadata.name"))

    def test_escapes(self):
        """Values may escape commas, equals signs and backslashes."""
        selector = parse_field_selector(r"metadata.name=a\,b\=c\\d")
        self.assertEqual(selector.requirements[0].value, "a,b=c\\d")

    def test_unknown_field_default(self):
        """With only the metadata fields, the message lists them."""
        with self.assertRaises(StatusError) as raised:
            parse_field_selector("spec.nodeName=n1")
        self.assertEqual((raised.exception.code, raised.exception.message), (
            400, '"spec.nodeName" is not a known field selector: only "metadata.name", '
                 '"metadata.namespace"'))

    def test_unknown_field_own_list(self):
        """Kinds with their own fields say the label is not supported."""
        fields = {"metadata.name", "metadata.namespace", "spec.nodeName", "status.phase"}
        self.assertTrue(parse_field_selector("spec.nodeName=n1", fields)
                        .matches({"spec.nodeName": "n1"}))
        with self.assertRaises(StatusError) as raised:
            parse_field_selector("spec.bogus=1", fields)
        self.assertEqual(raised.exception.message, "field label not supported: spec.bogus")

    def test_syntax_errors(self):
        """Terms without an operator, and bad escapes, are 400s."""
        for text, message in [
            ("metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
            (r"metadata.name=a\x", r"invalid field selector: invalid escape sequence: \x"),
            ("metadata.name=a=b", "invalid field selector: unescaped character in value: 61"),
        ]:
            with self.assertRaises(StatusError) as raised:
                parse_field_selector(text)
            self.assertEqual((raised.exception.code, raised.exception.message), (400, message))
