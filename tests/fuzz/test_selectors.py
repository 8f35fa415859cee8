"""
Label and field selectors: any text parses or is a 400, and selectors
written out parse back to themselves.
"""

from hypothesis import example, given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.selectors import (
    DOES_NOT_EXIST, DOUBLE_EQUALS, EQUALS, EXISTS, GREATER_THAN, IN, LESS_THAN, METADATA_FIELDS,
    NOT_EQUALS, NOT_IN, FieldRequirement, FieldSelector, LabelSelector, Requirement,
    parse_field_selector, parse_label_selector,
)
from tests.fuzz.support import bounded, fuzz

#: Text made mostly of the characters selectors give a meaning to.
_SYNTAX = st.lists(st.sampled_from(list("=!(),<>\\ \t,abc.-_/:inotexsn0129")
                                   + ["in", "notin", "\x00", "\udcff", "é"]),
                   max_size=40).map("".join)
hostile_text = st.one_of(st.text(max_size=80), _SYNTAX,
                         st.sampled_from(["a" * 10000, "(" * 5000, "!" * 5000, "a in (" * 2000,
                                          ",".join(["a=b"] * 3000), "=" * 5000,
                                          "\\" * 5001, "a=" + "\\," * 3000]))

_names = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?", fullmatch=True)
_prefixes = st.lists(st.from_regex(r"[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?", fullmatch=True),
                     min_size=1, max_size=3).map(".".join)
label_keys = st.one_of(_names, st.builds(lambda p, n: p + "/" + n, _prefixes, _names))
label_values = st.one_of(st.just(""), _names)


@st.composite
def requirements(draw):
    key = draw(label_keys)
    operator = draw(st.sampled_from([EQUALS, DOUBLE_EQUALS, NOT_EQUALS, IN, NOT_IN, EXISTS,
                                     DOES_NOT_EXIST, GREATER_THAN, LESS_THAN]))
    if operator in (EXISTS, DOES_NOT_EXIST):
        values = []
    elif operator in (IN, NOT_IN):
        values = draw(st.lists(label_values, min_size=1, max_size=4, unique=True))
    elif operator in (GREATER_THAN, LESS_THAN):
        values = [str(draw(st.integers(0, (1 << 63) - 1)))]  # a label value: no sign
    else:
        values = [draw(label_values)]
    return Requirement(key, operator, sorted(values))


class LabelSelectorTests(SynchronousTestCase):
    @fuzz(500)
    @given(hostile_text)
    @example("a in (b,c),!d,e!=f,g notin (h),i>1,j<2,k")
    @example("a=\x00")
    def test_any_text(self, text):
        """Any labelSelector text is a selector or a 400."""
        outcome = bounded(self, parse_label_selector, text)
        if outcome.error is None:
            self.assertIsInstance(outcome.value, LabelSelector)
            outcome.value.matches({"a": "b", "k": "1"})

    @fuzz(300)
    @given(st.lists(requirements(), min_size=1, max_size=5))
    def test_round_trip(self, terms):
        """A selector written out parses back to an equal selector."""
        selector = LabelSelector(terms)
        outcome = bounded(self, parse_label_selector, str(selector))
        self.assertIsNone(outcome.error, str(selector))
        self.assertEqual(outcome.value, selector)
        self.assertEqual(str(outcome.value), str(selector))


_FIELDS = st.one_of(st.sampled_from(sorted(METADATA_FIELDS) + ["spec.nodeName", "status.phase",
                                                                "type"]),
                    st.from_regex(r"[a-z][a-zA-Z0-9_.]{0,12}", fullmatch=True))


class FieldSelectorTests(SynchronousTestCase):
    @fuzz(400)
    @given(hostile_text, st.sets(_FIELDS, max_size=3))
    @example("metadata.name=a\\", set())
    @example("metadata.name=\\x", set())
    def test_any_text(self, text, fields):
        """Any fieldSelector text is a selector or a 400, whatever fields the resource has."""
        outcome = bounded(self, parse_field_selector, text, fields | METADATA_FIELDS)
        if outcome.error is None:
            self.assertIsInstance(outcome.value, FieldSelector)
            outcome.value.matches({"metadata.name": "a"})

    @fuzz(300)
    @given(st.lists(st.tuples(_FIELDS, st.sampled_from([EQUALS, NOT_EQUALS]),
                              st.text(max_size=10)), min_size=1, max_size=5))
    def test_round_trip(self, terms):
        """A selector written out parses back to the same requirements, values escaped."""
        selector = FieldSelector([FieldRequirement(*term) for term in terms])
        fields = {field for field, _, _ in terms}
        outcome = bounded(self, parse_field_selector, str(selector), fields)
        self.assertIsNone(outcome.error, str(selector))
        self.assertEqual(sorted(map(str, outcome.value.requirements)),
                         sorted(map(str, selector.requirements)))
        self.assertEqual(set(outcome.value.requirements), set(selector.requirements))
