"""Query parameters: the split, and the typed reads that turn bad values into 400s."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.api.query import (
    INT64_MAX,
    INT64_MIN,
    is_revision,
    parse_query,
    query_bool,
    query_int,
    query_text,
)


class ParseQueryTests(SynchronousTestCase):
    def test_split_as_go_splits(self):
        """Pairs split on & only; + is a space; a name without = has an empty value."""
        self.assertEqual(
            parse_query(b"labelSelector=app+in+(a%2Cb)&watch&a=1;b=2&&limit=5"),
            {b"labelSelector": [b"app in (a,b)"], b"watch": [b""], b"a": [b"1;b=2"],
             b"limit": [b"5"]})

    def test_repeated_parameters_keep_every_value(self):
        """A repeated parameter keeps its values in order (readers take the first)."""
        self.assertEqual(parse_query(b"dryRun=All&dryRun=x&dryRun=All"),
                         {b"dryRun": [b"All", b"x", b"All"]})

    def test_any_bytes_parse(self):
        """Escapes that decode to invalid UTF-8, NUL or nothing valid never fail the split."""
        self.assertEqual(
            parse_query(b"labelSelector=%ff%fe&fieldSelector=a%00b&x=%zz%&%c0%80=%ed%a0%80"),
            {b"labelSelector": [b"\xff\xfe"], b"fieldSelector": [b"a\x00b"],
             b"x": [b"%zz%"], b"\xc0\x80": [b"\xed\xa0\x80"]})

    def test_utf8_values_decode_to_bytes(self):
        """Valid non-ASCII escapes (they made the old parser raise) decode to their bytes."""
        self.assertEqual(parse_query(b"fieldSelector=%e2%80%ae"),
                         {b"fieldSelector": ["\u202e".encode()]})


class QueryTextTests(SynchronousTestCase):
    def test_first_value_as_text(self):
        """The first value is the parameter's text; absent or empty gives the default."""
        args = parse_query(b"fieldManager=%c3%a9t%c3%a9&fieldManager=other&empty=")
        self.assertEqual(query_text(args, "fieldManager"), "\u00e9t\u00e9")
        self.assertEqual(query_text(args, "empty", "d"), "d")
        self.assertIsNone(query_text(args, "missing", None))

    def test_invalid_utf8_is_400_naming_the_parameter(self):
        """Bytes that are not UTF-8 are a 400 naming the parameter."""
        for raw in (b"%ff%fe", b"%c0%80", b"%ed%a0%80", b"a%ff"):
            error = self.assertRaises(StatusError, query_text,
                                      parse_query(b"labelSelector=" + raw), "labelSelector")
            self.assertEqual((error.code, error.reason), (400, "BadRequest"))
            self.assertEqual(error.message,
                             'invalid value for query parameter "labelSelector": not valid UTF-8')

    def test_nul_is_400(self):
        """A NUL character is a 400: no parameter of the API can carry one."""
        error = self.assertRaises(StatusError, query_text, parse_query(b"fieldManager=a%00b"),
                                  "fieldManager")
        self.assertEqual(error.message, 'invalid value for query parameter "fieldManager": '
                                        "must not contain a NUL character")


class QueryIntTests(SynchronousTestCase):
    def int_of(self, value):
        return query_int(parse_query(b"limit=" + value), "limit")

    def message(self, value):
        return self.assertRaises(StatusError, self.int_of, value).message

    def test_int64_range(self):
        """Signed decimal integers within int64 are read, both ends included."""
        self.assertEqual(self.int_of(b"500"), 500)
        self.assertEqual(self.int_of(b"-1"), -1)
        self.assertEqual(self.int_of(b"%2B5"), 5)
        self.assertEqual(self.int_of(b"9223372036854775807"), INT64_MAX)
        self.assertEqual(self.int_of(b"-9223372036854775808"), INT64_MIN)
        self.assertEqual(self.int_of(b"0" * 5000 + b"12"), 12)
        self.assertEqual(query_int({}, "limit", 7), 7)

    def test_out_of_range_is_400(self):
        """A number outside int64 is a 400, as upstream's ParseInt refuses it."""
        for value in (b"99999999999999999999", b"9223372036854775808",
                      b"-9223372036854775809", b"99999999999999999999999", b"9" * 10_000):
            message = self.message(value)
            self.assertTrue(message.startswith('invalid value for query parameter "limit": "'
                                               + value.decode()[:64]), message)
            self.assertTrue(message.endswith('" is out of range for a 64-bit integer'), message)

    def test_not_an_integer_is_400(self):
        """Anything but an optional sign and ASCII digits is a 400 (Python's int() is laxer)."""
        for value in (b"abc", b"1e9", b"1.5", b"0x10", b"1_0", b"%205", b"+", b"-", b"NaN",
                      b"%d9%a3"):
            self.assertIn("is not an integer", self.message(value), value)
        self.assertEqual(self.message(b"abc"),
                         'invalid value for query parameter "limit": "abc" is not an integer')

    def test_long_values_are_cut_in_messages(self):
        """A very long value is quoted cut short."""
        message = self.message(b"a" * 10000)
        self.assertEqual(message, 'invalid value for query parameter "limit": "' + "a" * 64
                         + '..." is not an integer')

    def test_invalid_utf8_is_400(self):
        """An integer parameter with bytes that are not UTF-8 is a 400 too."""
        self.assertEqual(self.message(b"%ff"),
                         'invalid value for query parameter "limit": not valid UTF-8')


class OtherReadsTests(SynchronousTestCase):
    def test_bool(self):
        """true, True and 1 are true; anything else, hostile bytes included, is false."""
        args = parse_query(b"a=true&b=1&c=True&d=%ff&e=yes&f")
        self.assertEqual([query_bool(args, n) for n in "abcdefg"],
                         [True, True, True, False, False, False, False])

    def test_is_revision(self):
        """A revision is ASCII digits within int64: what every store can be asked for."""
        for text in ("1", "42", "9223372036854775807", "0" * 5000 + "7"):
            self.assertTrue(is_revision(text), text)
        for text in ("-1", "+5", " 5", "abc", "1_0", "\u0663", "9223372036854775808",
                     "99999999999999999999999", "9" * 10_000, ""):
            self.assertFalse(is_revision(text), text)
