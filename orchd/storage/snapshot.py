# -*- test-case-name: tests.app.test_admin -*-
"""
Snapshots of a store: every key under C{/registry/} at one revision, in a file.

A snapshot is written through L{IStore} alone, so it is the same for every
backend, and restoring one made from another backend is how a cluster
moves between LevelDB and etcd.

The file is self-describing. Its first line is a JSON header, padded with
spaces to L{HEADER_BYTES} so that it can be written last, in place::

    {"format": "orchd-snapshot", "version": 1, "prefix": "/registry/",
     "revision": 1234, "count": 56, "sha256": "...", "source": {...},
     "created": "2024-...Z", "records": "..."}

and each further line is one key, in key order, as a JSON object
C{{"key", "value" (base64), "create_revision", "mod_revision"}}. C{count}
and C{sha256} (of every record line, newlines included) let a reader tell a
complete file from a truncated or damaged one before it writes anything.

A save lists the keys page by page at the revision of its first page, so
the snapshot is one consistent state even while a server writes (etcd);
it writes a temporary file beside the target (mode 0600), syncs it, reads
it back and checks it, and only then renames it into place. Values are
copied as the store holds them: encrypted at rest stays encrypted, and a
restore writes them back unchanged, so the target needs the same
C{--encryption-provider-config} keys to read them.

A restore writes every key with C{create} into a store that holds nothing
under the prefix. Revisions are the target store's own: every object's
resourceVersion changes (etcd's own snapshot restore keeps revisions, but
no restore across backends can), so clients must list again afterwards.
"""

import base64
import binascii
import hashlib
import os
import time

import orjson
from twisted.internet import defer

from orchd.api.meta import rfc3339
from orchd.storage.interfaces import CompactedError

FORMAT = "orchd-snapshot"
VERSION = 1
PREFIX = "/registry/"
#: The header line's fixed size, newline included.
HEADER_BYTES = 4096
#: Keys a save lists at a time.
PAGE = 500
#: Creates a restore keeps in flight (LevelDB and etcd both batch them).
CONCURRENCY = 64
_SAVE_ATTEMPTS = 3
_RECORDS = ("one JSON object per line after this header, in key order: key, "
            "value (base64), create_revision, mod_revision; sha256 covers those lines")


class SnapshotError(Exception):
    """A snapshot cannot be written, read or restored; the message is one line for the user."""


def _record_line(kv):
    return orjson.dumps({
        "key": kv.key,
        "value": base64.b64encode(kv.value).decode("ascii"),
        "create_revision": kv.create_revision,
        "mod_revision": kv.mod_revision,
    }) + b"\n"


async def save(store, path, source, prefix=PREFIX, page=PAGE):
    """
    Write a snapshot of C{store} to C{path} atomically; return its header.

    @param source: a JSON-able description of where the data came from.
    @raise SnapshotError: the file could not be written, or history was
        compacted under every attempt to list at one revision.
    """
    for attempt in range(_SAVE_ATTEMPTS):
        try:
            return await _save_once(store, path, source, prefix, page)
        except CompactedError:
            # A server's compactor passed our revision mid-way: start again.
            if attempt == _SAVE_ATTEMPTS - 1:
                raise SnapshotError(f"the store compacted past the snapshot's revision "
                                    f"{_SAVE_ATTEMPTS} times; try again with fewer writes "
                                    f"or a smaller page") from None


async def _save_once(store, path, source, prefix, page):
    directory = os.path.dirname(os.path.abspath(path))
    temporary = os.path.join(directory, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    try:
        # Owner-only, like the store it copies: it holds every Secret (as
        # ciphertext where encryption at rest covers them).
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as out:
            os.fchmod(descriptor, 0o600)
            out.write(b" " * (HEADER_BYTES - 1) + b"\n")
            digest, count, revision, start = hashlib.sha256(), 0, 0, None
            while True:
                result = await store.list(prefix, revision=revision, start=start, limit=page)
                revision = result.revision
                for kv in result.items:
                    line = _record_line(kv)
                    out.write(line)
                    digest.update(line)
                    count += 1
                if not result.more or not result.items:
                    break
                start = result.items[-1].key + "\x00"
            header = {
                "format": FORMAT, "version": VERSION, "prefix": prefix,
                "revision": revision, "count": count, "sha256": digest.hexdigest(),
                "source": source,
                "created": rfc3339(time.time()),
                "records": _RECORDS,
            }
            encoded = orjson.dumps(header)
            if len(encoded) >= HEADER_BYTES:
                raise SnapshotError("the snapshot's header is too long (its source description)")
            out.seek(0)
            out.write(encoded.ljust(HEADER_BYTES - 1) + b"\n")
            out.flush()
            os.fsync(out.fileno())
        written = verify(temporary)
        if (written["count"], written["sha256"]) != (count, header["sha256"]):
            raise SnapshotError(f"reading {temporary} back gave other contents than written")
        os.replace(temporary, path)
        _sync_directory(directory)
        return header
    except OSError as error:
        raise SnapshotError(f"cannot write {path}: {error.strerror or error}") from None
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _sync_directory(directory):
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_header(path, stream):
    first = stream.readline()
    try:
        header = orjson.loads(first)
    except orjson.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise SnapshotError(f"{path} is not an orchd snapshot")
    if header.get("version") != VERSION:
        raise SnapshotError(f"{path} is a snapshot of format version {header.get('version')}; "
                            f"this orchd reads version {VERSION}")
    for field, kind in (("count", int), ("revision", int), ("sha256", str), ("prefix", str)):
        if not isinstance(header.get(field), kind):
            raise SnapshotError(f"{path}: the header has no valid {field!r}")
    return header


def _records(path, stream, header):
    """C{(key, value bytes)} of each record line, checked one by one, then the digest."""
    digest, previous, prefix = hashlib.sha256(), None, header["prefix"]
    for number, line in enumerate(stream, start=2):
        if not line.endswith(b"\n"):
            raise SnapshotError(f"{path} is truncated: line {number} is incomplete")
        digest.update(line)
        try:
            record = orjson.loads(line)
            key = record["key"]
            value = base64.b64decode(record["value"], validate=True)
        except (orjson.JSONDecodeError, KeyError, TypeError, binascii.Error) as error:
            raise SnapshotError(f"{path} is corrupt at line {number}: {error}") from None
        if not isinstance(key, str) or not key.startswith(prefix):
            raise SnapshotError(f"{path} is corrupt at line {number}: key {key!r} is not "
                                f"under {prefix}")
        if previous is not None and key <= previous:
            raise SnapshotError(f"{path} is corrupt at line {number}: keys out of order")
        previous = key
        yield key, value
    yield digest.hexdigest()


def verify(path):
    """
    Read all of the snapshot at C{path}; return its header if it is whole.

    @raise SnapshotError: the file is missing, not a snapshot, truncated or damaged.
    """
    try:
        with open(path, "rb") as stream:
            header = _read_header(path, stream)
            count = 0
            for item in _records(path, stream, header):
                if isinstance(item, str):
                    digest = item
                else:
                    count += 1
    except OSError as error:
        raise SnapshotError(f"cannot read {path}: {error.strerror or error}") from None
    if count != header["count"]:
        raise SnapshotError(f"{path} is truncated or damaged: it holds {count} of the "
                            f"{header['count']} keys its header announces")
    if digest != header["sha256"]:
        raise SnapshotError(f"{path} is corrupt: its checksum does not match its header")
    return header


async def restore(store, path, concurrency=CONCURRENCY, header=None):
    """
    Write every key of the snapshot at C{path} into the empty C{store}.

    The whole file is checked first, so a damaged one writes nothing.

    @param header: what L{verify} returned for C{path}, if the caller has
        just checked it (a big file is then not read through twice).

    @return: C{(header, keys written)}.
    @raise SnapshotError: the file is damaged, the store holds keys under
        the snapshot's prefix, or a write failed (the store then holds a
        partial restore and must be emptied before trying again).
    """
    if header is None:
        header = verify(path)
    existing = await store.count(header["prefix"])
    if existing:
        raise SnapshotError(
            f"the target store already holds {existing} keys under {header['prefix']}; "
            f"restore only into an empty store (a new --data-dir, or an etcd prefix "
            f"nothing has written to; do not start orchd on it before restoring)")
    written = 0
    failures = []
    with open(path, "rb") as stream:
        _read_header(path, stream)
        records = (item for item in _records(path, stream, header) if not isinstance(item, str))

        async def writer():
            nonlocal written
            for key, value in records:
                if failures:
                    return
                try:
                    await store.create(key, value)
                except Exception as error:
                    failures.append((key, error))
                    return
                written += 1

        await defer.gatherResults(
            [defer.Deferred.fromCoroutine(writer()) for _ in range(max(1, concurrency))])
    if failures:
        key, error = failures[0]
        raise SnapshotError(
            f"restoring {key} failed after {written} of {header['count']} keys: "
            f"{type(error).__name__}: {error}; the target now holds a partial restore: "
            f"empty it before trying again")
    return header, written
