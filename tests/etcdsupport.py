# -*- test-case-name: tests.storage.test_etcd_cluster -*-
"""
Real etcd members for tests: loopback ports, a temporary data dir, fast elections.

Tests that need etcd call L{require_etcd} and skip with a clear message
when Debian's C{etcd-server} (the C{etcd} binary) is not installed. The
members run as child processes with short heartbeat and election timeouts
so that a cluster elects a leader, and re-elects one after a member stops,
within a fraction of a second; C{--max-request-bytes} is raised so that
the store contract's multi-megabyte values fit. With C{tls=True} clients
speak HTTPS and must present a certificate from a CA made in the temp dir.
"""

import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request

from twisted.trial.unittest import SkipTest

ETCD = shutil.which("etcd")
SKIP_REASON = "etcd is not installed (Debian package etcd-server; .ci/run installs it)"


def require_etcd():
    """Raise SkipTest unless the etcd binary is available."""
    if ETCD is None:
        raise SkipTest(SKIP_REASON)


def _die_with_parent():
    """In the child before exec: get SIGKILL when the test process dies (Linux)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class EtcdCluster:
    """
    C{members} etcd processes forming one cluster.

    @ivar client_urls: each member's client URL, in member order.
    @ivar ca_path: with C{tls}, the CA that signed the server and client
        certificates (C{client_cert_path}, C{client_key_path}); else None.
    """

    def __init__(self, members=1, tls=False):
        require_etcd()
        self.members = members
        # Memory-backed when there is one: etcd syncs every write, and tests need no disk.
        shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self.root = tempfile.mkdtemp(prefix="orchd-etcd-", dir=shm)
        ports = _free_ports(2 * members)
        self.tls = tls
        self.ca_path = self.client_cert_path = self.client_key_path = None
        if tls:
            self._make_pki()
        scheme = "https" if tls else "http"
        self.client_urls = [f"{scheme}://127.0.0.1:{ports[2 * i]}" for i in range(members)]
        self.peer_urls = [f"http://127.0.0.1:{ports[2 * i + 1]}" for i in range(members)]
        self.names = [f"m{i}" for i in range(members)]
        self.processes = [None] * members
        self.initial = ",".join(f"{n}={u}" for n, u in zip(self.names, self.peer_urls))

    def _make_pki(self):
        """A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate."""
        from orchd.tls.certs import create_ca, issue_certificate

        ca, ca_key = create_ca("etcd-test-ca", days=1)
        self.ca_path = write_pem(self.root, "ca", ca)
        # clientAuth too: etcd 3.4's gateway dials its own gRPC port with the server pair.
        server = issue_certificate(ca, ca_key, "etcd", names=["127.0.0.1", "localhost"],
                                   server=True, client=True, days=1)
        self.server_cert_path, self.server_key_path = write_pem(self.root, "server", *server)
        client = issue_certificate(ca, ca_key, "orchd", client=True, days=1)
        self.client_cert_path, self.client_key_path = write_pem(self.root, "client", *client)

    def _command(self, i):
        tls = ["--cert-file", self.server_cert_path, "--key-file", self.server_key_path,
               "--trusted-ca-file", self.ca_path, "--client-cert-auth"] if self.tls else []
        return [
            ETCD, *tls, "--name", self.names[i],
            "--data-dir", os.path.join(self.root, self.names[i]),
            "--listen-client-urls", self.client_urls[i],
            "--advertise-client-urls", self.client_urls[i],
            "--listen-peer-urls", self.peer_urls[i],
            "--initial-advertise-peer-urls", self.peer_urls[i],
            "--initial-cluster", self.initial,
            "--initial-cluster-state", "new",
            "--initial-cluster-token", os.path.basename(self.root),
            "--heartbeat-interval", "20", "--election-timeout", "200",
            "--max-request-bytes", str(8 << 20),
            "--log-level", "error", "--logger", "zap",
        ]

    def start(self, timeout=30):
        """Start every member and wait until the cluster answers."""
        for i in range(self.members):
            self.start_member(i)
        self.wait_healthy(timeout)
        return self

    def start_member(self, i):
        log = open(os.path.join(self.root, self.names[i] + ".log"), "ab")
        self.processes[i] = subprocess.Popen(
            self._command(i), stdout=log, stderr=log, stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent)
        log.close()

    def ssl_context(self):
        """For urllib with C{tls}: trust the test CA and present the client certificate."""
        if not self.tls:
            return None
        context = ssl.create_default_context(cafile=self.ca_path)
        context.load_cert_chain(self.client_cert_path, self.client_key_path)
        return context

    def wait_healthy(self, timeout=30, members=None):
        """Wait until the given members (default: the running ones) answer /health."""
        context = self.ssl_context()
        deadline = time.monotonic() + timeout
        indexes = members if members is not None else [
            i for i, p in enumerate(self.processes) if p is not None]
        for i in indexes:
            while True:
                try:
                    with urllib.request.urlopen(self.client_urls[i] + "/health", timeout=2,
                                                context=context) as r:
                        if b"true" in r.read():
                            break
                except OSError:
                    pass
                if self.processes[i].poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"etcd member {i} did not start; see {self.root}")
                time.sleep(0.02)

    def stop_member(self, i):
        """Stop member C{i} (SIGKILL: as abrupt as a crash)."""
        process = self.processes[i]
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()
        self.processes[i] = None

    def stop(self):
        """Stop every member and remove the data dir."""
        for i in range(self.members):
            self.stop_member(i)
        shutil.rmtree(self.root, ignore_errors=True)


def write_pem(directory, name, certificate, key=None):
    """Write C{name}.crt (and C{name}.key) under C{directory}; return their paths."""
    from orchd.tls.certs import certificate_pem, private_key_pem

    paths = [os.path.join(directory, name + ".crt")]
    with open(paths[0], "wb") as f:
        f.write(certificate_pem(certificate))
    if key is not None:
        paths.append(os.path.join(directory, name + ".key"))
        with open(paths[1], "wb") as f:
            f.write(private_key_pem(key))
    return paths[0] if key is None else tuple(paths)


_shared = None


def shared_cluster():
    """One single-member cluster per test process, stopped when the process exits."""
    global _shared
    require_etcd()
    if _shared is None:
        import atexit

        _shared = EtcdCluster(1).start()
        atexit.register(_shared.stop)
    return _shared


def unique_prefix(name="test"):
    """An C{--etcd-prefix} no other test uses, so tests can share one etcd."""
    return f"/{name}-{os.getpid()}-{next(_counter)}/registry"


_counter = __import__("itertools").count(1)
