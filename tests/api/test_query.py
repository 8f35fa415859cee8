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
    query_parse_bool,
    query_present,
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
    def test_bool_false_only_for_0_and_false(self):
        """Only 0 and false in any case are false; any other value, yes and empty too, is true."""
        args = parse_query(b"a=false&b=FALSE&c=False&d=fAlSe&e=0&f=fal%C5%BFe"
                           b"&g=true&h=1&i=True&j=yes&k&l=&m=off&n=00&o=no&p=%20false")
        self.assertEqual({n: query_bool(args, n) for n in "abcdefghijklmnop"},
                         dict(zip("abcdefghijklmnop", [False] * 6 + [True] * 10)))

    def test_bool_absent_is_default(self):
        """An absent parameter is the default: False, or None to keep absent apart from false."""
        args = parse_query(b"watch=0")
        self.assertIs(query_bool(args, "watch", None), False)
        self.assertIs(query_bool(args, "sendInitialEvents"), False)
        self.assertIsNone(query_bool(args, "sendInitialEvents", None))
        self.assertIs(query_bool(parse_query(b"sendInitialEvents"), "sendInitialEvents", None),
                      True)

    def test_bool_first_value_counts(self):
        """Of a repeated parameter only the first value counts."""
        self.assertFalse(query_bool(parse_query(b"watch=0&watch=true"), "watch"))
        self.assertTrue(query_bool(parse_query(b"watch&watch=false"), "watch"))

    def test_bool_strict_refuses_what_is_not_text(self):
        """Read strictly, a value that is not UTF-8 or holds a NUL is a 400 naming it."""
        for raw, reason in ((b"%ff", "not valid UTF-8"), (b"tr%00ue", "must not contain a "
                                                          "NUL character")):
            error = self.assertRaises(StatusError, query_bool, parse_query(b"force=" + raw),
                                      "force")
            self.assertEqual((error.code, error.message),
                             (400, f'invalid value for query parameter "force": {reason}'))

    def test_bool_lenient_reads_any_bytes(self):
        """Read leniently, hostile bytes are simply not false, as upstream reads them."""
        for raw in (b"%ff", b"%00", b"%c0%80", b"false%00"):
            self.assertTrue(query_bool(parse_query(b"watch=" + raw), "watch", strict=False), raw)
        self.assertFalse(query_bool(parse_query(b"watch=FAL%C5%BFE"), "watch", strict=False))

    def test_present(self):
        """A parameter is present with any value, an empty one or false too."""
        args = parse_query(b"verbose=false&exclude")
        self.assertEqual([query_present(args, n) for n in ("verbose", "exclude", "pretty")],
                         [True, True, False])

    def test_parse_bool(self):
        """pretty's rule, Go's ParseBool: 1, t, T, TRUE, true, True; nothing else, yes included."""
        for raw in (b"1", b"t", b"T", b"TRUE", b"true", b"True"):
            self.assertTrue(query_parse_bool(parse_query(b"pretty=" + raw), "pretty"), raw)
        for raw in (b"yes", b"", b"tRUE", b"on", b"0", b"false", b"%ff", b"true%00"):
            self.assertFalse(query_parse_bool(parse_query(b"pretty=" + raw), "pretty"), raw)
        self.assertFalse(query_parse_bool(parse_query(b"pretty"), "pretty"))
        self.assertFalse(query_parse_bool({}, "pretty"))

    def test_is_revision(self):
        """A revision is ASCII digits within int64: what every store can be asked for."""
        for text in ("1", "42", "9223372036854775807", "0" * 5000 + "7"):
            self.assertTrue(is_revision(text), text)
        for text in ("-1", "+5", " 5", "abc", "1_0", "\u0663", "9223372036854775808",
                     "99999999999999999999999", "9" * 10_000, ""):
            self.assertFalse(is_revision(text), text)
