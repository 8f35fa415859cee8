# -*- test-case-name: tests.api.test_query -*-
"""
Query parameters, parsed and read as the API reads them.

The query is split as Go's C{url.ParseQuery} splits it (C{&} only, C{+}
for a space) into bytes, so no input can fail the split itself. Reading
one parameter is where a value is judged: text must be UTF-8 without NUL,
integers follow Go's C{strconv.ParseInt(v, 10, 64)}. A value that fails
is the client's error, a 400 naming the parameter, never a 500.

Only the first value of a repeated parameter counts, as upstream's
conversions take C{values[0]}.
"""

from urllib.parse import unquote_to_bytes

from orchd.api.errors import StatusError

#: Go's int64 range: upstream parses every integer option into one.
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_TRUE = (b"true", b"1", b"True")


def parse_query(query):
    """
    Split a raw query (bytes, after C{?}) into C{{name: [values]}}, all bytes.

    Pairs without C{=} keep an empty value (C{?watch}, C{?verbose}); C{;}
    is not a separator. Malformed percent escapes are kept as written.
    """
    args = {}
    for pair in query.split(b"&"):
        if not pair:
            continue
        key, _, value = pair.partition(b"=")
        if b"%" in key or b"+" in key:
            key = unquote_to_bytes(key.replace(b"+", b" "))
        if b"%" in value or b"+" in value:
            value = unquote_to_bytes(value.replace(b"+", b" "))
        values = args.get(key)
        if values is None:
            args[key] = [value]
        else:
            values.append(value)
    return args


def query_error(name, reason):
    """The 400 for a query parameter whose value cannot be used."""
    return StatusError.bad_request(f'invalid value for query parameter "{name}": {reason}')


def _first(args, name):
    """The first raw value of C{name} (bytes), or None."""
    values = args.get(name.encode("ascii"))
    return values[0] if values else None


def query_text(args, name, default=""):
    """
    The first value of C{name} as text.

    @raise StatusError: 400 when it is not UTF-8 or holds a NUL character,
        which no parameter of the API can carry.
    """
    raw = _first(args, name)
    if not raw:
        return default
    return _decode(name, raw)


def _decode(name, raw):
    """C{raw} (bytes) as the text of parameter C{name}; see L{query_text}."""
    try:
        value = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise query_error(name, "not valid UTF-8") from None
    if "\x00" in value:
        raise query_error(name, "must not contain a NUL character")
    return value


def query_int(args, name, default=0):
    """
    The first value of C{name} as a 64-bit integer, as upstream parses it.

    @raise StatusError: 400 for anything but optional sign and decimal
        digits, or a number outside the int64 range.
    """
    raw = _first(args, name)
    if not raw:
        return default
    if raw.isdigit() and len(raw) < 19:     # bytes.isdigit: ASCII digits only
        return int(raw)
    value = _decode(name, raw)
    number = parse_int64(value)
    if number is None:
        if _is_integer(value):
            raise query_error(name, f"{_quote(value)} is out of range for a 64-bit integer")
        raise query_error(name, f"{_quote(value)} is not an integer")
    return number


def _is_integer(text):
    digits = text[1:] if text[:1] in ("+", "-") else text
    return bool(digits) and digits.isascii() and digits.isdigit()


def parse_int64(text):
    """
    C{text} as Go's C{strconv.ParseInt(text, 10, 64)} reads it (optional
    sign, ASCII digits, within int64), or None. Thousands of digits are
    refused without converting them (Python refuses past 4300).
    """
    if not _is_integer(text):
        return None
    significant = (text[1:] if text[:1] in ("+", "-") else text).lstrip("0") or "0"
    if len(significant) > 19:
        return None
    number = -int(significant) if text[0] == "-" else int(significant)
    return number if INT64_MIN <= number <= INT64_MAX else None


def is_revision(text):
    """
    True when C{text} is a revision the stores can be asked for: decimal
    digits only, within int64 (what etcd takes; upstream parses a uint64).
    """
    if not (text.isdigit() and text.isascii()):
        return False
    significant = text.lstrip("0")
    return len(significant) < 19 or (len(significant) == 19 and int(significant) <= INT64_MAX)


def query_bool(args, name):
    """True when the first value of C{name} is C{true}, C{True} or C{1}."""
    raw = _first(args, name)
    return raw is not None and raw in _TRUE


def _quote(value):
    """A value in a message: quoted, and cut short when long."""
    if len(value) > 64:
        value = value[:64] + "..."
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
