# -*- test-case-name: tests.controllers.test_localvolumes -*-
"""
The directories of volumes provisioned on the node whose agent runs in
this process: C{<data dir>/volumes/<volume name>}, made when the volume is
provisioned there and removed when it is deleted.

Volumes of other nodes (simulated ones, or agents of their own) are
objects only: nothing here reaches their disks. The file system is
touched on a worker thread (a tree being removed may be large), and only
under the root, whatever path a volume names.
"""

import os
import shutil

from twisted.internet.defer import succeed
from twisted.internet.threads import deferToThreadPool


def in_thread(reactor):
    """A runner of blocking calls on C{reactor}'s thread pool."""
    return lambda f, *args: deferToThreadPool(reactor, reactor.getThreadPool(), f, *args)


def at_once(f, *args):
    """A runner that calls at once (tests)."""
    return succeed(f(*args))


class LocalVolumes:
    """
    @param node_name: the Node this process's agent runs.
    @param root: the directory that holds its volumes.
    @param run: C{run(f, *args)}: a Deferred of C{f(*args)} called off the
        reactor thread (L{in_thread}).
    """

    def __init__(self, node_name, root, run):
        self.node_name = node_name
        self.root = os.path.abspath(root)
        self._run = run

    def path(self, volume_name):
        return os.path.join(self.root, volume_name)

    def holds(self, path):
        """Whether C{path} is a volume directory under the root (nothing else is removed)."""
        if not isinstance(path, str) or not path:
            return False
        path = os.path.normpath(path)
        return os.path.dirname(path) == self.root and os.path.basename(path) not in ("", "..")

    async def create(self, path):
        await self._run(os.makedirs, path, 0o777, True)

    async def remove(self, path):
        if self.holds(path):
            await self._run(shutil.rmtree, path, True)
