# -*- test-case-name: tests.app.test_datadir -*-
"""
The data directory is owner-only: no other local user may read the store.

The store holds every Secret and token, and LevelDB creates its files
itself with the process umask, so the process runs with a umask that
takes every permission from group and others (L{restrict_umask}): each
file and directory orchd creates from then on (store, PKI, orchconfigs,
the node agent's files, snapshots) is 0700 or 0600 at most. Data
directories made by older versions were 0755 with 0644 files:
L{secure_data_dir} tightens them at start and says what it changed.
"""

import os
import stat

#: Group and others get nothing.
PRIVATE_UMASK = 0o077
_DIRECTORY_MODE = 0o700


class DataDirError(Exception):
    """The data directory cannot be made owner-only; the message is one line."""


def restrict_umask():
    """
    Add L{PRIVATE_UMASK} to the process umask (a stricter one stays).

    @return: the umask before.
    """
    previous = os.umask(PRIVATE_UMASK)
    os.umask(previous | PRIVATE_UMASK)
    return previous


def _tighten(path, mode, corrected):
    """
    Take group and other permissions off C{path} (what a link points at);
    note it in C{corrected} if it had any. C{mode}: the new mode, or None
    to keep the owner's bits.
    """
    current = stat.S_IMODE(os.stat(path).st_mode)
    if current & 0o077:
        os.chmod(path, current & 0o700 if mode is None else mode)
        corrected.append((path, current))


def secure_data_dir(data_dir):
    """
    Create C{data_dir} owner-only, or make an existing one so, with the
    store under it (the directory and every file in it).

    Files keep their owner bits (a file LevelDB made 0644 becomes 0600);
    directories become 0700. A data dir or store that is a symbolic link
    is followed (it is where the user put them); links inside the store
    are left alone.

    @return: C{[(path, old mode)]} of what was corrected.
    @raise DataDirError: a path cannot be created or changed (not ours).
    """
    corrected = []
    try:
        if not os.path.isdir(data_dir):
            os.makedirs(data_dir, mode=_DIRECTORY_MODE)
        else:
            _tighten(data_dir, _DIRECTORY_MODE, corrected)
        store = os.path.join(data_dir, "store")
        if os.path.isdir(store):
            _tighten(store, _DIRECTORY_MODE, corrected)
            for root, directories, files in os.walk(store):
                for name in directories:
                    path = os.path.join(root, name)
                    if not os.path.islink(path):
                        _tighten(path, _DIRECTORY_MODE, corrected)
                for name in files:
                    path = os.path.join(root, name)
                    if not os.path.islink(path):
                        _tighten(path, None, corrected)
    except OSError as error:
        where = error.filename or data_dir
        raise DataDirError(f"cannot make the data directory owner-only: {where}: "
                           f"{error.strerror or error}") from None
    return corrected
