# -*- test-case-name: tests.timing.test_seconds -*-
"""Text made from a time once a second rather than per use."""

import time
from math import floor


def second_text(render):
    """
    A function of a time giving C{render(second)} of the second it falls
    in, made again only when the second changes: a log line and a
    response's C{Date} header each format the time of nearly every request
    (so do an audit event's timestamps, L{micro_time}), and formatting it
    (C{strftime}) costs more than the rest of the line. A closure rather
    than an object with C{__call__}: calling it costs half as much, and it
    is called per request.

    @param render: C{(whole seconds since the epoch, an int) -> text}.
    """
    last = text = None

    def text_of(when):
        nonlocal last, text
        # The whole second of the last call (as MicroTime passes) needs no int().
        if when != last:
            # int(), not // 1: a float's // runs fmod, whose loop costs more than the rest.
            second = int(when)
            if second != last:
                text = render(second)
                last = second
        return text
    return text_of


#: The text of each number below a thousand, three digits wide.
_DIGITS = tuple(f"{n:03d}" for n in range(1000))


def utc_seconds():
    """
    A new L{second_text} of a MicroTime's head (C{2021-04-09T07:50:08.}).
    It keeps its last second, so a thread other than the reactor's that
    formats times has its own.
    """
    return second_text(lambda second: time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(second)))


_utc_second = utc_seconds()


def micro_time(seconds):
    """
    A metav1 MicroTime: C{2021-04-09T07:50:08.137166Z} (UTC, six digits,
    rounded to the nearest microsecond). Every audit event has two, so the
    second's text is made once a second (L{second_text}) and the digits are
    read from a table, in integers (a float's C{%} and C{//} run C{fmod},
    whose loop costs more than the rest; formatting numbers costs more still).
    C{floor}, a plain function, costs less to call than the C{int} type.
    """
    second, micro = divmod(floor(seconds * 1e6 + 0.5), 1000000)
    return f"{_utc_second(second)}{_DIGITS[micro // 1000]}{_DIGITS[micro % 1000]}Z"


def micro_times(first, then, utc_second=_utc_second):
    """
    L{micro_time} of two times, as an audit event's two timestamps: the
    second's text is looked up once when they fall in the same second.

    @param utc_second: the L{utc_seconds} to use; the reactor's by default.
    """
    second, micro = divmod(floor(first * 1e6 + 0.5), 1000000)
    second_then, micro_then = divmod(floor(then * 1e6 + 0.5), 1000000)
    text = utc_second(second)
    text_then = text if second_then == second else utc_second(second_then)
    return (f"{text}{_DIGITS[micro // 1000]}{_DIGITS[micro % 1000]}Z",
            f"{text_then}{_DIGITS[micro_then // 1000]}{_DIGITS[micro_then % 1000]}Z")
