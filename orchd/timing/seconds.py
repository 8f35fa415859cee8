# -*- test-case-name: tests.timing.test_seconds -*-
"""Text made from a time once a second rather than per use."""


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
