# -*- test-case-name: tests.api.test_query,tests.server.test_query_flags -*-
"""
Query parameters, parsed and read as the API reads them.

The query is split as Go's C{url.ParseQuery} splits it (C{&} only, C{+}
for a space) into bytes, so no input can fail the split itself. Reading
one parameter is where a value is judged: text must be UTF-8 without NUL,
integers follow Go's C{strconv.ParseInt(v, 10, 64)}. A value that fails
is the client's error, a 400 naming the parameter, never a 500.

Only the first value of a repeated parameter counts, as upstream's
conversions take C{values[0]}.

Booleans are read here and nowhere else, with upstream's two rules: every
option (C{watch}, C{allowWatchBookmarks}, C{sendInitialEvents}, C{force},
C{orphanDependents}, C{follow}, ...) as C{Convert_Slice_string_To_bool}
converts it (L{query_bool}: only C{0} and C{false}, in any case, are
false; C{?watch} with no value is true), and C{pretty} as Go's
C{strconv.ParseBool} reads it (L{query_parse_bool}).
"""

from urllib.parse import unquote_to_bytes

from orchd.api.errors import StatusError

#: Go's int64 range: upstream parses every integer option into one.
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
#: What Go's C{strconv.ParseBool} reads as true; upstream reads C{pretty} so.
_PARSE_BOOL_TRUE = frozenset((b"1", b"t", b"T", b"TRUE", b"true", b"True"))


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


def query_bool(args, name, default=False, strict=True):
    """
    The first value of C{name} as upstream converts a query value to a bool
    (C{Convert_Slice_string_To_bool}): C{0} and C{false} in any case are
    false, anything else is true, an empty value (C{?watch}) too.

    @param default: the answer when C{name} is absent; None keeps absent
        apart from false, as upstream's C{*bool} options (C{sendInitialEvents},
        C{force}, C{orphanDependents}) do.
    @param strict: False where no 400 can be answered (classifying a
        request, the node agent's own query): the value is then read as it
        comes, as upstream reads it.
    @raise StatusError: 400 when C{strict} and the value is not UTF-8 or
        holds a NUL character, as for every parameter a handler reads.
    """
    raw = _first(args, name)
    if raw is None:
        return default
    if raw.isascii() and b"\x00" not in raw:
        return raw != b"0" and raw.lower() != b"false"
    text = _decode(name, raw) if strict else raw.decode("utf-8", "replace")
    # Go's strings.EqualFold: "fal\u017fe" is false too (the long s folds to s).
    return text.casefold() != "false"


def query_present(args, name):
    """
    True when C{name} is in the query at all, whatever its value.

    Upstream's health checks answer verbosely for any C{verbose}, even
    C{verbose=false}, as they ask only whether it is there.
    """
    return name.encode("ascii") in args


def query_parse_bool(args, name):
    """
    The first value of C{name} as Go's C{strconv.ParseBool} reads it, which
    upstream uses for C{pretty} alone: C{1}, C{t}, C{T}, C{TRUE}, C{true} and
    C{True} are true; anything else, or nothing, is false. Never raises: it
    is read while writing any answer, errors included.
    """
    raw = _first(args, name)
    return raw is not None and raw in _PARSE_BOOL_TRUE


def _quote(value):
    """A value in a message: quoted, and cut short when long."""
    if len(value) > 64:
        value = value[:64] + "..."
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
