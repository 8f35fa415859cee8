# -*- test-case-name: tests.app.test_admin,tests.integration.test_admin -*-
"""
C{orchd-admin}: offline administration of an orchd store.

    orchd-admin snapshot save FILE    [store flags]
    orchd-admin snapshot restore FILE [store flags]
    orchd-admin snapshot verify FILE

The store flags are the server's own (C{--config}, C{--storage-backend},
C{--data-dir}, C{--etcd-servers}, C{--etcd-prefix}, C{--etcd-cafile},
C{--etcd-certfile}, C{--etcd-keyfile}) with the same defaults, so the
command given the server's flags or C{--config} file finds the server's
store. Moving between backends is a save from one and a restore into the
other (L{orchd.storage.snapshot}).

This is a command of its own rather than a C{twistd orchd} sub-command:
twistd's job is to run a service until it is stopped, while these run once
and exit with a status, and must not start listeners, controllers or the
node agent that C{twistd orchd} builds.

LevelDB admits one process at a time: a store a running server holds is
reported as such, never waited for. etcd is shared, so a save from it may
run beside live servers (it reads at one revision).
"""

import argparse
import os
import sys

from twisted.internet import defer

from orchd.app.config import ConfigError, load_config
from orchd.app.datadir import DataDirError, restrict_umask, secure_data_dir
from orchd.storage import snapshot

PROGRAM = "orchd-admin"
_STORE_FLAGS = ("storage-backend", "data-dir", "etcd-servers", "etcd-prefix")
_TLS_FLAGS = ("etcd-cafile", "etcd-certfile", "etcd-keyfile")


class AdminError(Exception):
    """A problem the user can fix; the message is one line."""


def _parser():
    parser = argparse.ArgumentParser(
        prog=PROGRAM, description="Offline administration of an orchd store.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    snap = commands.add_parser(
        "snapshot", help="save a consistent snapshot of the store to a file, or restore one",
        description="Save, restore or check snapshots. Migrating between LevelDB and etcd "
                    "is a save from one and a restore into the other.")
    actions = snap.add_subparsers(dest="action", required=True, metavar="ACTION")
    store = argparse.ArgumentParser(add_help=False)
    group = store.add_argument_group("store (as for twistd orchd; defaults alike)")
    group.add_argument("--config", metavar="FILE", help="orchd's YAML settings file")
    group.add_argument("--storage-backend", choices=("leveldb", "etcd"),
                       help="leveldb (in DATA_DIR/store) or etcd [default: leveldb]")
    group.add_argument("--data-dir", metavar="DIR", help="orchd's state directory "
                       "[default: ./orchd-data]")
    group.add_argument("--etcd-servers", metavar="URL[,URL]", help="etcd client URLs")
    group.add_argument("--etcd-prefix", metavar="PREFIX", help="key prefix in etcd "
                       "[default: /registry]")
    for flag, what in zip(_TLS_FLAGS, ("CA bundle", "client certificate", "client key")):
        group.add_argument("--" + flag, metavar="FILE", help=f"TLS to etcd: {what}")
    save = actions.add_parser(
        "save", parents=[store], help="write every key under /registry/ at one revision to FILE",
        description="Write every key under /registry/ at one revision to FILE (atomically; "
                    "read back and checked). A LevelDB store must not be in use by a server.")
    save.add_argument("file", metavar="FILE")
    restore = actions.add_parser(
        "restore", parents=[store], help="write the keys of FILE into an empty store",
        description="Write every key of FILE into a store that holds nothing under "
                    "/registry/ (refused otherwise). Revisions, and so resourceVersions, are "
                    "the target's own. Start orchd on the store only afterwards.")
    restore.add_argument("file", metavar="FILE")
    check = actions.add_parser("verify", help="check that FILE is a whole snapshot")
    check.add_argument("file", metavar="FILE")
    return parser


def _settings(options):
    flags = {flag: getattr(options, flag.replace("-", "_")) for flag in _STORE_FLAGS}
    try:
        config = load_config(flags, options.config)
    except ConfigError as error:
        raise AdminError(str(error)) from None
    tls = {}
    for flag in _TLS_FLAGS:
        attribute = flag.replace("-", "_")
        tls[attribute] = getattr(options, attribute) or getattr(config, attribute, None)
    return config, tls


def _leveldb_store(path, reactor, must_exist):
    import plyvel

    from orchd.storage.leveldb import LevelDBStore

    if must_exist and not os.path.exists(os.path.join(path, "CURRENT")):
        raise AdminError(f"no LevelDB store in {path} (check --data-dir)")
    try:
        return LevelDBStore(path, reactor=reactor)
    except plyvel.IOError as error:
        if "lock" in str(error).lower():
            raise AdminError(
                f"the LevelDB store in {path} is in use by another process (a running "
                f"orchd?): LevelDB admits one process at a time, so stop the server "
                f"first") from None
        raise AdminError(f"cannot open the LevelDB store in {path}: {error}") from None
    except plyvel.Error as error:
        raise AdminError(f"cannot open the LevelDB store in {path}: {error}") from None


def open_store(config, tls, reactor, must_exist):
    """
    The L{IStore} C{config} names and a JSON-able description of it.

    @param must_exist: refuse to create a LevelDB store that is not there.
    """
    if config.storage_backend == "leveldb":
        path = os.path.join(config.data_dir, "store")
        if not must_exist:
            # A restore may create the data dir: owner-only, as the server makes it.
            try:
                secure_data_dir(config.data_dir)
            except DataDirError as error:
                raise AdminError(str(error)) from None
        source = {"backend": "leveldb", "path": os.path.abspath(path)}
        return _leveldb_store(path, reactor, must_exist), source
    try:
        from orchd.storage.etcd import EtcdStore
    except ImportError as error:
        raise AdminError(f"the etcd backend is not available: {error}") from None
    endpoints = list(config.etcd_servers)
    store = EtcdStore(endpoints, reactor, prefix=config.etcd_prefix, ca=tls["etcd_cafile"],
                      cert=tls["etcd_certfile"], key=tls["etcd_keyfile"])
    return store, {"backend": "etcd", "endpoints": endpoints, "prefix": config.etcd_prefix}


def _where(source):
    backend = source.get("backend") if isinstance(source, dict) else None
    if backend == "leveldb":
        return f"LevelDB store {source.get('path')}"
    if backend == "etcd":
        return f"etcd {','.join(source.get('endpoints') or ())} (prefix {source.get('prefix')})"
    return f"a {backend or 'unknown'} store"


async def run(argv, reactor, out=None, err=None):
    """
    Carry out one command line; return the exit status.

    Problems the user can fix print one line on C{err}; usage errors exit 2.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        options = _parser().parse_args(argv)
    except SystemExit as exit:
        return exit.code
    try:
        await _snapshot(options, reactor, out)
    except (AdminError, snapshot.SnapshotError) as error:
        err.write(f"{PROGRAM}: error: {error}\n")
        return 1
    return 0


async def _snapshot(options, reactor, out):
    path = options.file
    if options.action == "verify":
        header = snapshot.verify(path)
        out.write(f"{path}: {header['count']} keys at revision {header['revision']} of "
                  f"{_where(header.get('source'))}, "
                  f"saved {header['created']}; checksum good\n")
        return
    config, tls = _settings(options)
    checked = None
    if options.action == "restore":
        # Check the file before touching, or creating, a store.
        checked = snapshot.verify(path)
    store, source = open_store(config, tls, reactor, must_exist=options.action == "save")
    try:
        try:
            await store.check()
        except Exception as error:
            raise AdminError(f"{_where(source)} cannot serve: {error}") from None
        if options.action == "save":
            header = await snapshot.save(store, path, source)
            out.write(f"saved {header['count']} keys at revision {header['revision']} of "
                      f"{_where(source)} to {path}\n")
        else:
            header, written = await snapshot.restore(store, path, header=checked)
            revision = await store.current_revision()
            out.write(f"restored {written} keys from {path} (saved at revision "
                      f"{header['revision']}) into {_where(source)}, now at revision "
                      f"{revision}; resourceVersions are renumbered: clients must list "
                      f"again\n")
    finally:
        await store.close()


def main(argv=None):
    """The C{orchd-admin} console script; exits with L{run}'s status."""
    from twisted.internet.task import react

    # A restored store and a saved snapshot hold every Secret: owner-only.
    restrict_umask()

    async def command(reactor):
        status = await run(sys.argv[1:] if argv is None else argv, reactor)
        if status:
            raise SystemExit(status)

    react(lambda reactor: defer.Deferred.fromCoroutine(command(reactor)))


if __name__ == "__main__":
    main()
