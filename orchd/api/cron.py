# -*- test-case-name: tests.api.test_cron -*-
"""
CronJob schedules, read as upstream reads them (robfig/cron's
C{ParseStandard}): five fields (minute, hour, day of month, month, day of
week) of comma-separated C{*}, C{?}, numbers, names (C{jan}, C{mon}) and
ranges with steps, or a descriptor (C{@hourly}, C{@every 90m}, ...).

L{parse_schedule} gives the allowed values of each field, so a controller
can compute run times; errors carry robfig's messages, which upstream
returns as the schedule's validation message.
"""

import re

_MONTHS = {name: i + 1 for i, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}
_DAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
#: (min, max, names) of each field, in order.
_FIELDS = ((0, 59, None), (0, 23, None), (1, 31, None), (1, 12, _MONTHS), (0, 6, _DAYS))
_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_ATOI = re.compile(r"[+-]?[0-9]+")
_DURATION = re.compile(r"[+-]?((([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+|0)")


class Schedule:
    """
    A parsed schedule.

    @ivar fields: the allowed values of minute, hour, day of month, month
        and day of week, each a frozenset; None for C{@every}.
    @ivar every: the text of an C{@every} duration, else None.
    @ivar stars: which of day of month and day of week were C{*} or C{?}
        (robfig: a day matches when both are stars, or either matches).
    """

    __slots__ = ("fields", "every", "stars")

    def __init__(self, fields=None, every=None, stars=(False, False)):
        self.fields = fields
        self.every = every
        self.stars = stars


def _atoi(text):
    """Go's C{strconv.Atoi} and robfig's C{mustParseInt}."""
    if not _ATOI.fullmatch(text):
        raise ValueError(f'failed to parse int from {text}: strconv.Atoi: parsing '
                         f'"{text}": invalid syntax')
    number = int(text)
    if number < 0:
        raise ValueError(f"negative number ({number}) not allowed: {text}")
    return number


def _int_or_name(text, names):
    if names is not None and text.lower() in names:
        return names[text.lower()]
    return _atoi(text)


def _range(expr, low, high, names):
    """robfig's C{getRange}: the values one comma-separated term allows, and if it was a star."""
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    star = low_and_high[0] in ("*", "?")
    if star:
        start, end = low, high
    else:
        start = _int_or_name(low_and_high[0], names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _int_or_name(low_and_high[1], names)
        else:
            raise ValueError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _atoi(range_and_step[1])
        if len(low_and_high) == 1:
            end = high
        if step > 1:
            star = False
    else:
        raise ValueError(f"too many slashes: {expr}")
    if start < low:
        raise ValueError(f"beginning of range ({start}) below minimum ({low}): {expr}")
    if end > high:
        raise ValueError(f"end of range ({end}) above maximum ({high}): {expr}")
    if start > end:
        raise ValueError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise ValueError(f"step of range should be a positive number: {expr}")
    return range(start, end + 1, step), star


def parse_schedule(text):
    """
    The L{Schedule} of a CronJob's C{spec.schedule}.

    @raise ValueError: with robfig/cron's message.
    """
    spec = text.strip() if isinstance(text, str) else ""
    if not spec:
        raise ValueError("empty spec string")
    if spec.startswith(("TZ=", "CRON_TZ=")):
        _, _, spec = spec.partition(" ")
        spec = spec.strip()
    if spec.startswith("@"):
        if spec.startswith("@every "):
            duration = spec[len("@every "):]
            if not _DURATION.fullmatch(duration):
                raise ValueError(f'failed to parse duration {spec}: time: invalid duration '
                                 f'"{duration}"')
            return Schedule(every=duration)
        if spec not in _DESCRIPTORS:
            raise ValueError(f"unrecognized descriptor: {spec}")
        spec = _DESCRIPTORS[spec]
    fields = spec.split()
    if len(fields) != 5:
        raise ValueError(f"expected exactly 5 fields, found {len(fields)}: "
                         f"[{' '.join(fields)}]")
    allowed, stars = [], []
    for field, (low, high, names) in zip(fields, _FIELDS):
        values, star = set(), False
        for term in field.split(","):
            term_values, term_star = _range(term, low, high, names)
            values.update(term_values)
            star = star or term_star
        allowed.append(frozenset(values))
        stars.append(star)
    return Schedule(tuple(allowed), stars=(stars[2], stars[4]))
