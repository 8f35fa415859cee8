# -*- test-case-name: tests.storage.test_contract -*-
"""
The storage seam: a revisioned key-value store with compare-and-swap and watch.

Every backend (memory, LevelDB, etcd) implements L{IStore} with one global,
increasing revision counter. Keys are C{str} paths such as
C{/registry/configmaps/default/a}; values are opaque C{bytes}. Every method
returns a Deferred; a write's Deferred fires only once the write is durable.
"""

from zope.interface import Attribute, Interface

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


class KeyValue:
    """
    One stored key: its value and the revisions that created and last wrote it.

    C{mod_revision} is what the API calls an object's C{resourceVersion}.

    @cvar stale: True when the value was stored in a form a write would no
        longer give it (encrypted with a key or provider that is no longer
        the first, see L{orchd.storage.encrypting}): an update must rewrite
        it even when the object is unchanged.
    """

    __slots__ = ("key", "value", "create_revision", "mod_revision")
    stale = False

    def __init__(self, key, value, create_revision, mod_revision):
        self.key = key
        self.value = value
        self.create_revision = create_revision
        self.mod_revision = mod_revision

    def __eq__(self, other):
        return isinstance(other, KeyValue) and (
            self.key, self.value, self.create_revision, self.mod_revision
        ) == (other.key, other.value, other.create_revision, other.mod_revision)

    def __repr__(self):
        return (
            f"KeyValue({self.key!r}, {len(self.value)} bytes, "
            f"create={self.create_revision}, mod={self.mod_revision})"
        )


class ListResult:
    """
    A page of a prefix listing read at one revision.

    @ivar items: L{KeyValue}s in key order.
    @ivar revision: the store revision the page was read at.
    @ivar more: True when keys after the last item remain.
    @ivar remaining: how many keys remain after this page, when asked for.
    """

    __slots__ = ("items", "revision", "more", "remaining")

    def __init__(self, items, revision, more=False, remaining=None):
        self.items = items
        self.revision = revision
        self.more = more
        self.remaining = remaining


class Event:
    """
    One change, as watches deliver it.

    @ivar type: L{ADDED}, L{MODIFIED} or L{DELETED}.
    @ivar value: the value after the change; for L{DELETED}, the last value.
    @ivar prev_value: the value before a L{MODIFIED} change (None otherwise),
        so that a filtered watch can tell an object leaving its selection.
    @ivar revision: the revision of this change.
    @ivar create_revision: the revision that created the key.
    """

    __slots__ = ("type", "key", "value", "revision", "create_revision", "prev_value")

    def __init__(self, type, key, value, revision, create_revision, prev_value=None):
        self.type = type
        self.key = key
        self.value = value
        self.revision = revision
        self.create_revision = create_revision
        self.prev_value = prev_value

    def __eq__(self, other):
        return isinstance(other, Event) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__
        )

    def __repr__(self):
        return f"Event({self.type} {self.key!r} @{self.revision})"


class StoreError(Exception):
    """Base of the store's sentinel errors."""


class KeyExistsError(StoreError):
    """A create found the key already present."""

    def __init__(self, key):
        super().__init__(key)
        self.key = key


class KeyNotFoundError(StoreError):
    """An update or delete found no such key."""

    def __init__(self, key):
        super().__init__(key)
        self.key = key


class ConflictError(StoreError):
    """
    A compare-and-swap failed: the key's revision differs from the expected one.

    @ivar current: the key's current L{KeyValue}.
    """

    def __init__(self, key, current):
        super().__init__(key)
        self.key = key
        self.current = current


class CompactedError(StoreError):
    """The requested revision is older than the kept history."""

    def __init__(self, requested, compacted):
        super().__init__(requested, compacted)
        self.requested = requested
        self.compacted = compacted


class FutureRevisionError(StoreError):
    """The requested revision is newer than the store has reached."""

    def __init__(self, requested, current):
        super().__init__(requested, current)
        self.requested = requested
        self.current = current


class StoreUnavailableError(StoreError):
    """The backend cannot serve (closed, disk failure, unreachable)."""


class IStoreWatch(Interface):
    """A running watch; events go to the callables given to L{IStore.watch}."""

    def stop():
        """Stop delivering events and release everything the watch holds."""


class IStore(Interface):
    """
    A revisioned key-value store.

    Every write takes the next global revision and is atomic with its event.
    """

    compacted_revision = Attribute("Events at or below this revision are gone.")

    def get(key):
        """
        @return: Deferred firing with the key's L{KeyValue}, or None.
        """

    def list(prefix, revision=0, start=None, limit=0, count_remaining=False):
        """
        Keys starting with C{prefix}, in key order, at one revision.

        @param revision: 0 for the latest, or an exact past revision.
        @param start: the first key to include (for paging), or None.
        @param limit: at most this many items (0: all).
        @param count_remaining: fill L{ListResult.remaining}.
        @return: Deferred firing with a L{ListResult}.
        @raise CompactedError: C{revision} is older than the kept history.
        @raise FutureRevisionError: C{revision} is newer than the store.
        """

    def count(prefix):
        """
        @return: Deferred firing with the number of keys under C{prefix}.
        """

    def create(key, value):
        """
        @return: Deferred firing with the new L{KeyValue}.
        @raise KeyExistsError: the key is present.
        """

    def update(key, value, expected_revision):
        """
        Compare-and-swap: write only if the key's mod revision is C{expected_revision}.

        @return: Deferred firing with the new L{KeyValue}.
        @raise KeyNotFoundError: the key is absent.
        @raise ConflictError: the key's revision differs.
        """

    def delete(key, expected_revision=None):
        """
        Delete a key, optionally only at C{expected_revision}.

        @return: Deferred firing with C{(revision, previous KeyValue)}.
        @raise KeyNotFoundError: the key is absent.
        @raise ConflictError: the key's revision differs.
        """

    def watch(prefix, after_revision, on_events, on_error):
        """
        Deliver every change under C{prefix} with a revision above C{after_revision}.

        C{on_events(list of Event)} is called in revision order, replayed
        history first; it may be called before the returned Deferred fires.
        C{on_error(StoreError)} ends the watch (e.g. the history it needs
        was compacted while it lagged).

        @param after_revision: 0 for changes from now on.
        @return: Deferred firing with an L{IStoreWatch}.
        @raise CompactedError: C{after_revision} is below the kept history.
        """

    def current_revision():
        """
        @return: Deferred firing with the latest durable revision. Every live
            watch has been handed the changes up to it by then, so a watch
            consumer that sees this revision has seen everything before it.
        """

    def compact(revision):
        """
        Forget history at or below C{revision}; lists and watches from there fail.

        @return: Deferred firing when done.
        """

    def check():
        """
        @return: Deferred firing when the backend can serve, failing otherwise.
        """

    def close():
        """
        @return: Deferred firing once pending writes are done and files closed.
        """


class IWatchEncoder(Interface):
    """
    Turns what happens in one watch into the frames of its stream.

    The watch cache says what happened (a change and its object, a
    bookmark's revision, the error that ends the watch) and never writes a
    frame itself: the request's layer supplies the encoder of the format
    the client negotiated, so bookmarks and errors come in the stream's
    format like every change.
    """

    key = Attribute(
        "A hashable naming the format (and everything else the frames depend on): "
        "watchers whose encoders have equal keys share the encoded frames of a change, "
        "so a change is encoded once per format however many clients watch.")

    def event(type, obj):
        """
        The frame of a change.

        @param type: C{ADDED}, C{MODIFIED} or C{DELETED}.
        @param obj: the object as stored, its resourceVersion set; shared
            between watchers, so not to be changed.
        @return: C{bytes}.
        """

    def bookmark(revision, initial_events_end=False):
        """
        The frame of a BOOKMARK: every change up to C{revision} was sent.

        @param initial_events_end: this bookmark ends the initial events of
            a streaming list (C{sendInitialEvents=true}).
        @return: C{bytes}.
        """

    def error(error):
        """
        The frame of the ERROR event that ends a watch.

        @param error: the L{StoreError}; a L{CompactedError} when the
            changes the watcher needs are no longer kept (clients list again).
        @return: C{bytes}.
        """
