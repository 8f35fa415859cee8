# -*- test-case-name: tests.orchlet.test_endpoint -*-
"""
Container checkpoints: the archive's name, its place and its atomic creation.

The runtime writes whatever it writes; this module decides where. The
archive is written under a temporary name in the same directory, made
readable by its owner only, and renamed into place, so nobody ever sees a
partial archive or a moment where it is readable by others.
"""

import os
import time

from twisted.internet.defer import CancelledError, Deferred, TimeoutError, maybeDeferred

from orchd.orchlet.runtime import UnknownContainer


class CheckpointError(Exception):
    """The checkpoint failed; C{code} and C{text} are the HTTP answer."""

    def __init__(self, code, text):
        super().__init__(text)
        self.code = code
        self.text = text


def parse_timeout(values):
    """
    C{timeout} query values to seconds; absent and 0 mean None (the runtime's default).

    @raise CheckpointError: 404, as upstream, for a value that is not an integer.
    """
    if not values:
        return None
    try:
        seconds = int(values[0])
    except ValueError:
        raise CheckpointError(404, "cannot parse value of timeout parameter") from None
    if seconds < 0:
        raise CheckpointError(404, "cannot parse value of timeout parameter")
    return seconds or None


def archive_name(namespace, pod, container, seconds):
    """C{checkpoint-<pod>_<namespace>-<container>-<RFC 3339 time>.tar}."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
    return f"checkpoint-{pod}_{namespace}-{container}-{stamp}.tar"


async def checkpoint(reactor, runtime, root_dir, namespace, pod, container, timeout=None):
    """
    Checkpoint one container into C{<root_dir>/checkpoints}.

    @param timeout: seconds, or None for C{runtime.default_checkpoint_timeout}.
    @return: the archive's path.
    @raise CheckpointError: 404 for an unknown pod or container, 500 when
        the runtime fails, cannot checkpoint or runs out of time.
    """
    if timeout is None:
        timeout = runtime.default_checkpoint_timeout
    directory = os.path.join(root_dir, "checkpoints")
    final = os.path.join(directory, archive_name(namespace, pod, container, reactor.seconds()))
    temporary = os.path.join(directory, f".{os.path.basename(final)}.{os.getpid()}.tmp")
    failed = f"checkpointing of {namespace}/{pod}/{container} failed"
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        # Created owner-only before the runtime writes a byte into it.
        os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
        work = maybeDeferred(runtime.checkpoint, namespace, pod, container, temporary, timeout)
        work.addCallback(_await_coroutine)
        work.addTimeout(timeout, reactor)
        await work
        os.chmod(temporary, 0o600)
        os.replace(temporary, final)
    except UnknownContainer as error:
        _remove(temporary)
        text = "pod does not exist" if error.what == "pod" else str(error)
        raise CheckpointError(404, text) from None
    except (CancelledError, TimeoutError):
        _remove(temporary)
        raise CheckpointError(500, f"{failed} (timed out after {timeout}s)") from None
    except Exception as error:      # RuntimeError_, CheckpointUnsupported, OSError
        _remove(temporary)
        raise CheckpointError(500, f"{failed} ({error})") from None
    return final


def _await_coroutine(result):
    """C{maybeDeferred} of an C{async def} gives a coroutine; run it."""
    if hasattr(result, "__await__") and not isinstance(result, Deferred):
        return Deferred.fromCoroutine(result)
    return result


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass
