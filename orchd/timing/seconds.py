# -*- test-case-name: tests.timing.test_seconds -*-
"""Text made from a time once a second rather than per use."""

import time


def second_text(render):
    """
    A function of a time giving C{render(second)} of the second it falls
    in, made again only when the second changes: a log line, a response's
    C{Date} header and an audit event's timestamps each format the time of
    nearly every request, and formatting it (C{strftime}) costs more than
    the rest of the line. A closure rather than an object with C{__call__}:
    calling it costs half as much, and it is called per request.

    @param render: C{(whole seconds since the epoch, a float) -> text}.
    """
    last = text = None

    def text_of(when):
        nonlocal last, text
        second = when // 1
        if second != last:
            text = render(second)
            last = second
        return text
    return text_of


#: The text of each number below a thousand, three digits wide, by its float.
_DIGITS = {float(n): f"{n:03d}" for n in range(1000)}
_utc_second = second_text(lambda second: time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(second)))


def micro_time(seconds):
    """
    A metav1 MicroTime: C{2021-04-09T07:50:08.137166Z} (UTC, six digits,
    rounded to the nearest microsecond). Every audit event has two: the
    second's text is made once a second and the digits are read from a
    table, in float arithmetic throughout (C{int}, C{round} and number
    formatting each cost more than the rest).
    """
    micros = seconds * 1e6 + 0.5
    micros -= micros % 1.0
    second = micros // 1e6
    micro = micros - second * 1e6
    return f"{_utc_second(second)}{_DIGITS[micro // 1000.0]}{_DIGITS[micro % 1000.0]}Z"
