# -*- test-case-name: tests.orchlet.test_logs,tests.orchlet.test_endpoint -*-
"""
The orchlet's two log endpoints: container logs, and the node's log directory.

C{/containerLogs} asks the runtime and trims the answer as the query says
(C{tailLines}, C{limitBytes}); with C{follow=true} it then keeps writing
what the container adds (L{follow_log}) until the container is gone, the
byte limit is reached or the client leaves. C{/logs/} serves files under one directory
only: every path is resolved, symbolic links included, and must stay
inside it, so C{..} and links cannot reach the rest of the host.
"""

import html
import os
from urllib.parse import quote

from twisted.internet.defer import maybeDeferred
from twisted.internet.task import deferLater

from orchd.api.query import query_bool
from orchd.orchlet.runtime import UnknownContainer


#: How often a followed log is read again for what was added.
FOLLOW_INTERVAL = 0.5


class LogError(Exception):
    """A log request that fails with C{code} and plain C{text}."""

    def __init__(self, code, text):
        super().__init__(text)
        self.code = code
        self.text = text


def _non_negative(args, name):
    values = args.get(name.encode("ascii"))
    if not values:
        return None
    try:
        number = int(values[0])
    except ValueError:
        raise LogError(400, f"{name}: invalid value {values[0].decode('latin-1')!r}") from None
    if number < 0:
        raise LogError(400, f"{name}: must be greater than or equal to 0")
    return number


def trim(log, tail_lines=None, limit_bytes=None):
    """The last C{tail_lines} lines of C{log}, then at most C{limit_bytes} of them."""
    if tail_lines is not None:
        lines = log.splitlines(keepends=True)
        log = b"".join(lines[len(lines) - tail_lines:]) if tail_lines else b""
    if limit_bytes is not None:
        log = log[:limit_bytes]
    return log


class LogRequest:
    """
    What a C{/containerLogs} query asks for, checked.

    @raise LogError: 400 for bad values.
    """

    def __init__(self, args):
        self.tail_lines = _non_negative(args, "tailLines")
        self.limit_bytes = _non_negative(args, "limitBytes")
        if self.limit_bytes == 0:
            raise LogError(400, "limitBytes: must be greater than 0")
        self.follow = query_bool(args, "follow", strict=False)


async def read_log(runtime, namespace, pod, container):
    """
    The whole log of one container.

    @raise LogError: 404 for an unknown pod or container.
    """
    try:
        return bytes(await maybeDeferred(runtime.container_logs, namespace, pod, container))
    except UnknownContainer as error:
        if error.what == "pod":
            raise LogError(404, f'pod "{pod}" does not exist') from None
        raise LogError(404, f'container "{container}" not found in pod "{pod}"') from None


async def follow_log(clock, runtime, names, read, write):
    """
    After the first C{read} bytes of a container's log, hand what it adds to
    C{write(bytes)} every L{FOLLOW_INTERVAL}, until the container is gone or
    C{write} returns False (the byte limit is reached). The caller cancels
    it when the client leaves.

    @param names: C{(namespace, pod, container)}.
    """
    while True:
        await deferLater(clock, FOLLOW_INTERVAL, lambda: None)
        try:
            log = await read_log(runtime, *names)
        except LogError:
            return  # the container is gone: the log is complete
        if len(log) < read:
            read = 0  # the log started over (a restarted container)
        if len(log) > read:
            if not write(log[read:]):
                return
            read = len(log)


def serve_log_path(base, parts):
    """
    A file under C{base} (C{text/plain}) or a directory listing (HTML, as Go's file server).

    @param parts: the path segments after C{/logs}, already cleaned.
    @return: C{(content type, body)}.
    @raise LogError: 404 for anything missing or outside C{base}.
    """
    root = os.path.realpath(base)
    target = os.path.realpath(os.path.join(root, *parts)) if parts else root
    if target != root and not target.startswith(root + os.sep):
        raise LogError(404, "404 page not found\n")
    try:
        if os.path.isdir(target):
            names = sorted(os.listdir(target))
            lines = []
            for name in names:
                shown = name + ("/" if os.path.isdir(os.path.join(target, name)) else "")
                lines.append(f'<a href="{quote(shown)}">{html.escape(shown)}</a>')
            body = "<pre>\n" + "".join(line + "\n" for line in lines) + "</pre>\n"
            return b"text/html; charset=utf-8", body.encode("utf-8")
        with open(target, "rb") as stream:
            return b"text/plain; charset=utf-8", stream.read()
    except OSError:
        raise LogError(404, "404 page not found\n") from None
