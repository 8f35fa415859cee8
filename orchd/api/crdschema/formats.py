# -*- test-case-name: tests.api.crdschema.test_validate -*-
"""
The string formats a custom resource schema's values are checked against.

Upstream (kube-openapi's C{strfmt} registry, as apiextensions-apiserver
configures it) checks only strings, and only the formats named here; any
other C{format} (C{int32}, C{int64}, C{float}, C{double}, C{password}, or
one it does not know) is a documentation hint and accepts every value.
"""

import base64
import binascii
import datetime
import ipaddress
import re

# A DNS name as upstream's strfmt reads one: labels of letters, digits and
# inner hyphens, at most 63 long, the whole at most 255.
_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\Z")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+\Z|^[^@\s]+@[^@\s]+\Z")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}\Z")
_DATE_TIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?\Z")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}\Z")
_UUID_VERSIONED = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-(?P<v>[0-9a-fA-F])[0-9a-fA-F]{3}-"
    r"[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$")
_MAC = re.compile(r"^(?:[0-9a-fA-F]{2}([-:]))(?:[0-9a-fA-F]{2}\1){4}[0-9a-fA-F]{2}\Z"
                  r"|^[0-9a-fA-F]{4}\.[0-9a-fA-F]{4}\.[0-9a-fA-F]{4}\Z")
_HEXCOLOR = re.compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})\Z")
_RGBCOLOR = re.compile(
    r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])"
    r"\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$")
_BSON = re.compile(r"^[0-9a-fA-F]{24}\Z")
_DURATION = re.compile(
    r"^[-+]?(\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w)"
    r"(\s*[-+]?(\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w))*$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]*\Z|^/[^\s]*\Z")
_ISBN10 = re.compile(r"^(?:[0-9]{9}X|[0-9]{10})\Z")
_ISBN13 = re.compile(r"^(?:[0-9]{13})\Z")
_SSN = re.compile(r"^\d{3}[- ]?\d{2}[- ]?\d{4}\Z")


def _hostname(value):
    if len(value) > 255 or not value:
        return False
    labels = value[:-1].split(".") if value.endswith(".") else value.split(".")
    return all(_LABEL.match(label) for label in labels)


def _ipv4(value):
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return False
    return True


def _ipv6(value):
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return False
    return True


def _cidr(value):
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return "/" in value


def _byte(value):
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _date(value):
    if not _DATE.match(value):
        return False
    year, month, day = (int(part) for part in value.split("-"))
    try:
        datetime.date(year, month, day)
    except ValueError:
        return False
    return True


def _date_time(value):
    return bool(_DATE_TIME.match(value)) and _date(value[:10])


def _uuid(value):
    return bool(_UUID.match(value))


def _uuid_version(version):
    def check(value):
        match = _UUID_VERSIONED.match(value)
        return bool(match) and match.group("v") == version
    return check


def _isbn10(value):
    value = value.replace("-", "").replace(" ", "")
    if not _ISBN10.match(value):
        return False
    total = sum((10 - i) * (10 if c == "X" else int(c)) for i, c in enumerate(value))
    return total % 11 == 0


def _isbn13(value):
    value = value.replace("-", "").replace(" ", "")
    if not _ISBN13.match(value):
        return False
    total = sum((3 if i % 2 else 1) * int(c) for i, c in enumerate(value))
    return total % 10 == 0


def _creditcard(value):
    digits = value.replace("-", "").replace(" ", "")
    if not digits.isdigit() or not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c)
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _matcher(pattern):
    return lambda value: bool(pattern.match(value))


#: format name -> predicate over a string value.
CHECKS = {
    "bsonobjectid": _matcher(_BSON),
    "uri": _matcher(_URI),
    "email": _matcher(_EMAIL),
    "hostname": _hostname,
    "ipv4": _ipv4,
    "ipv6": _ipv6,
    "cidr": _cidr,
    "mac": _matcher(_MAC),
    "uuid": _uuid,
    "uuid3": _uuid_version("3"),
    "uuid4": _uuid_version("4"),
    "uuid5": _uuid_version("5"),
    "isbn": lambda v: _isbn10(v) or _isbn13(v),
    "isbn10": _isbn10,
    "isbn13": _isbn13,
    "creditcard": _creditcard,
    "ssn": _matcher(_SSN),
    "hexcolor": _matcher(_HEXCOLOR),
    "rgbcolor": _matcher(_RGBCOLOR),
    "byte": _byte,
    "date": _date,
    "date-time": _date_time,
    "datetime": _date_time,
    "duration": _matcher(_DURATION),
}


def check(name):
    """The predicate of format C{name}, or None when upstream checks nothing for it."""
    return CHECKS.get(name)

