# -*- test-case-name: tests.registry.test_guaranteed_update -*-
"""
The one read-modify-write of the registry: a guaranteed update of one key.

Every write that starts from what is stored (update, patch, apply, status
and other subresources, delete with its preconditions and finalizers, the
rewrite of a value stored under an old encryption key, the cluster IP and
node port ranges) goes through L{guaranteed_update}, as every write of
upstream's generic store goes through its storage's C{GuaranteedUpdate}:
read the key, let a try function decide what to write, compare-and-swap on
the revision that was read, and on a conflict decide again from the state
that won. Only a create, which starts from nothing, writes on its own.

The try function is called again after a conflict, so it must change
nothing outside the L{Write} it returns. What must happen once is not done
by it: what a write takes outside its key (a Service's cluster IP) is taken
by L{Write.begin} just before the store write and given back if that write
fails; what a write gives up, or a removed object held, is let go only once
the write has succeeded (C{commit()}, L{Write.after}).
"""

from orchd.storage.interfaces import ConflictError, KeyExistsError, KeyNotFoundError

#: How many times a write is decided and tried before it is refused as contended.
MAX_ATTEMPTS = 16

KEEP = "keep"
PUT = "put"
DELETE = "delete"


class Write:
    """
    What one attempt decided to do with the key.

    Made with L{keep}, L{put} or L{delete}.

    @ivar action: L{KEEP} (write nothing), L{PUT} (create the key when it
        was absent, else replace it) or L{DELETE}.
    @ivar obj: the object the attempt produced, the caller's answer.
    @ivar detail: anything else the caller wants back (e.g. whether the
        object was created).
    @ivar stored: after a successful L{PUT}, the L{KeyValue} written.
    """

    __slots__ = ("action", "obj", "detail", "encode", "begin", "after", "stored")

    def __init__(self, action, obj, detail=None, encode=None, begin=None, after=None):
        self.action = action
        self.obj = obj
        self.detail = detail
        self.encode = encode
        self.begin = begin
        self.after = after
        self.stored = None

    @classmethod
    def keep(cls, obj, detail=None):
        """Write nothing: the stored state (or a dry run's C{obj}) is the answer."""
        return cls(KEEP, obj, detail)

    @classmethod
    def put(cls, obj, encode, begin=None, detail=None):
        """
        Store C{encode(obj)}.

        @param begin: None, or C{async () -> holding or None}: takes what the
            write holds outside its key, just before the store write (it may
            fill C{obj}). The holding's C{revert()} gives that back when the
            write fails; its C{commit()}, if it has one, runs once the write
            succeeded (to free what the write gave up).
        """
        return cls(PUT, obj, detail, encode, begin)

    @classmethod
    def delete(cls, obj, after=None, detail=None):
        """
        Remove the key.

        @param after: None, or C{async () -> None}, run once the key is gone.
        """
        return cls(DELETE, obj, detail, after=after)


async def guaranteed_update(store, key, try_update, contended, suggestion=None,
                            attempts=MAX_ATTEMPTS):
    """
    Decide and write C{key} until the compare-and-swap holds.

    The state comes from the store, or from C{suggestion} (a state read
    elsewhere, such as a listing): then the first attempt costs no read,
    and whatever it could not do is checked against a fresh read before it
    is believed (an error, or nothing to write). A conflict hands over the
    state that won (L{ConflictError.current}), so a retry costs no read
    either; a key that another writer created costs one.

    @param store: the L{orchd.storage.interfaces.IStore}.
    @param try_update: C{async (KeyValue or None) -> Write}, given the
        current state (None: the key is absent); raises to refuse. Called
        again after a conflict: it must change nothing but what it returns.
    @param contended: C{() -> Exception}, raised when C{attempts} attempts
        all lost their race.
    @param suggestion: a L{KeyValue} believed current, or None to read.
    @return: the L{Write} that succeeded (L{Write.stored} set after a put).
    @raise Exception: what C{try_update}, C{Write.begin} or the store raised.
    """
    if suggestion is not None:
        current, fresh = suggestion, False
    else:
        current, fresh = await store.get(key), True
    for _ in range(attempts):
        try:
            write = await try_update(current)
        except Exception as refused:
            if fresh:
                raise
            # The suggestion may have been out of date: only a fresh state's
            # refusal stands.
            seen = current
            current, fresh = await store.get(key), True
            if _same(current, seen):
                raise refused
            continue
        if write.action == KEEP:
            if fresh:
                return write
            seen = current
            current, fresh = await store.get(key), True
            if _same(current, seen) and not (current is not None and current.stale):
                return write
            continue
        holding = await write.begin() if write.begin is not None else None
        try:
            if write.action == DELETE:
                await store.delete(key, current.mod_revision)
            elif current is None:
                write.stored = await store.create(key, write.encode(write.obj))
            else:
                write.stored = await store.update(key, write.encode(write.obj),
                                                  current.mod_revision)
        except (ConflictError, KeyNotFoundError, KeyExistsError) as lost:
            if holding is not None:
                await holding.revert()
            if isinstance(lost, KeyNotFoundError):
                current = None
            elif isinstance(lost, ConflictError) and lost.current is not None:
                current = lost.current
            else:
                current = await store.get(key)
            fresh = True
            continue
        except BaseException:
            if holding is not None:
                await holding.revert()
            raise
        commit = getattr(holding, "commit", None)
        if commit is not None:
            await commit()
        if write.after is not None:
            await write.after()
        return write
    raise contended()


def _same(current, seen):
    """Whether a fresh read found the key as it was seen before (absent, or unchanged)."""
    if current is None or seen is None:
        return current is seen
    return current.mod_revision == seen.mod_revision
