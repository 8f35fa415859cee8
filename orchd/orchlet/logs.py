# -*- test-case-name: tests.orchlet.test_endpoint -*-
"""
The orchlet's two log endpoints: container logs, and the node's log directory.

C{/containerLogs} asks the runtime and trims the answer as the query says
(C{tailLines}, C{limitBytes}). C{/logs/} serves files under one directory
only: every path is resolved, symbolic links included, and must stay
inside it, so C{..} and links cannot reach the rest of the host.
"""

import html
import os
from urllib.parse import quote

from twisted.internet.defer import maybeDeferred

from orchd.orchlet.runtime import UnknownContainer


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


async def container_log(runtime, namespace, pod, container, args):
    """
    The log of one container, trimmed by the C{tailLines} and C{limitBytes} query values.

    @raise LogError: 404 for an unknown pod or container, 400 for bad values.
    """
    tail_lines = _non_negative(args, "tailLines")
    limit_bytes = _non_negative(args, "limitBytes")
    if limit_bytes == 0:
        raise LogError(400, "limitBytes: must be greater than 0")
    try:
        log = await maybeDeferred(runtime.container_logs, namespace, pod, container)
    except UnknownContainer as error:
        if error.what == "pod":
            raise LogError(404, f'pod "{pod}" does not exist') from None
        raise LogError(404, f'container "{container}" not found in pod "{pod}"') from None
    return trim(bytes(log), tail_lines, limit_bytes)


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
