# -*- test-case-name: tests.timing.test_seconds -*-
"""Text made from a time once a second rather than per use."""

import time


class SecondText:
    """
    C{render(second)} of the second C{when} falls in, made again only when
    the second changes: a log line, a response's C{Date} header and an
    audit event's timestamps each format the time of nearly every request,
    and formatting it (C{strftime}) costs more than the rest of the line.

    @param render: C{(whole seconds since the epoch) -> text}.
    """

    __slots__ = ("_render", "_second", "_text")

    def __init__(self, render):
        self._render = render
        self._second = None
        self._text = None

    def __call__(self, when):
        second = int(when)
        if second != self._second:
            self._text = self._render(second)
            self._second = second
        return self._text


#: The text of each number below a thousand, three digits wide.
_THREE = tuple(f"{n:03d}" for n in range(1000))
_utc_second = SecondText(lambda second: time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(second)))


def micro_time(seconds):
    """
    A metav1 MicroTime: C{2021-04-09T07:50:08.137166Z} (UTC, six digits,
    rounded to the nearest microsecond). Every audit event has two: the
    second's text is made once a second, the digits are read from a table
    (formatting a float costs twice as much).
    """
    micros = round(seconds * 1e6)
    second = micros // 1_000_000
    micro = micros - second * 1_000_000
    return f"{_utc_second(second)}{_THREE[micro // 1000]}{_THREE[micro % 1000]}Z"
