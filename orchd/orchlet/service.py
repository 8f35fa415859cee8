# -*- test-case-name: tests.integration.test_orchlet_agent -*-
"""
The node agent's place in the service tree: credentials, runtime, endpoint, agent.

In-process (the default) it waits for the L{ControlPlane} to be ready, then
takes its client certificate (C{system:node:<name>} in C{system:nodes}) and
a serving certificate from the cluster's PKI, stored under the root
directory and reused while valid, so it is judged like any node by the Node
authorizer. With C{--orchlet-only} it reads the API server and its
credentials from C{--orchconfig}, or joins with C{--bootstrap-token} and
C{--server} once and reuses what the join stored. The control plane's CA
key is not on that machine, yet the API server verifies the agent's
serving certificate against that CA when it proxies to it, so the agent
asks for one with a CSR (L{orchd.orchlet.servingcert}) and starts its
endpoint and agent only once it has one. A request refused, denied or left
unsigned is logged and made anew after L{SERVING_RETRY} seconds: no
self-signed fallback, which the API server could not verify either.
"""

import datetime
import os

from cryptography import x509
from twisted.application.service import MultiService
from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.task import deferLater
from twisted.logger import Logger

from orchd.tls.certs import certificate_pem, create_ca, issue_certificate, issued_by
from orchd.tls.certs import private_key_pem
from orchd.auth.authz.node import NODE_USER_PREFIX, NODES_GROUP
from orchd.client.orchconfig import load_orchconfig, write_file_atomically
from orchd.orchlet.agent import NodeAgent
from orchd.orchlet.apiclient import APIClient
from orchd.orchlet.bootstrap import credential_paths, join
from orchd.orchlet.server import OrchletEndpoint
from orchd.orchlet.servingcert import (
    request_serving_certificate, serving_names, serving_paths, usable,
)
from orchd.orchlet.simulated import SimulatedRuntime
from orchd.orchlet.startup import StartingService

#: Seconds before a stored certificate's expiry at which a new one is made.
RENEW_BEFORE = datetime.timedelta(days=1)
JOIN_RETRY = 5.0
#: Seconds between serving certificate requests after one was refused or timed out.
SERVING_RETRY = 30.0


def load_pair(cert_path, key_path, common_name, issuer=None):
    """The stored C{(cert PEM, key PEM)} if usable for C{common_name}, else None."""
    try:
        with open(cert_path, "rb") as stream:
            cert_pem = stream.read()
        with open(key_path, "rb") as stream:
            key_pem = stream.read()
        certificate = x509.load_pem_x509_certificate(cert_pem)
    except (OSError, ValueError):
        return None
    names = certificate.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    expires = certificate.not_valid_after_utc
    if not names or names[0].value != common_name:
        return None
    if expires - RENEW_BEFORE < datetime.datetime.now(datetime.timezone.utc):
        return None
    if issuer is not None and not issued_by(certificate, issuer):
        return None
    return cert_pem, key_pem


def store_pair(cert_path, key_path, pair):
    os.makedirs(os.path.dirname(cert_path), mode=0o700, exist_ok=True)
    write_file_atomically(key_path, pair[1], 0o600)
    write_file_atomically(cert_path, pair[0], 0o600)
    return pair


class OrchletService(StartingService):
    """
    One node agent: its endpoint and its L{NodeAgent}, started once credentials exist.

    @param settings: the L{orchd.orchlet.settings.OrchletSettings}.
    @param plane: the in-process L{orchd.app.service.ControlPlane}, or None
        with C{--orchlet-only}.
    @ivar ready: fires with the agent once it runs (its C{registered} follows).
    """

    log = Logger()
    what = "The node agent"

    def __init__(self, settings, reactor, plane=None):
        super().__init__()
        self.settings = settings
        self.reactor = reactor
        self.plane = plane
        self.node_name = settings.node_name
        self.root_dir = settings.root_dir
        self.api = None
        self.agent = None
        self.endpoint = None
        self.runtime = None
        self.ready = Deferred()

    async def _start(self):
        os.makedirs(self.root_dir, mode=0o700, exist_ok=True)
        if self.plane is not None:
            await self._wait(self.plane.ready)
            cert_pem, key_pem = self._client_pair()
            self.api = APIClient(self.reactor, self.plane.url, self.plane.pki.server_ca_pem,
                                 cert_pem, key_pem)
            client_cas = self.plane.pki.client_ca_pems
        else:
            orchconfig = await self._orchconfig()
            if orchconfig is None:
                return
            self.api = APIClient(self.reactor, orchconfig.server, orchconfig.ca_pem,
                                 orchconfig.client_cert_pem, orchconfig.client_key_pem,
                                 orchconfig.token)
            client_cas = [orchconfig.ca_pem] if orchconfig.ca_pem else []
        if not self.running:
            return
        if self.plane is not None:
            serving_cert, serving_key = self._serving_pair()
        else:
            serving_pair = await self._requested_serving_pair(client_cas)
            if serving_pair is None:
                return
            serving_cert, serving_key = serving_pair
        self.runtime = SimulatedRuntime(self.reactor, root=self.root_dir,
                                        host_ip=self.settings.bind_address)
        self.endpoint = self._endpoint(serving_cert, serving_key, client_cas)
        self.agent = NodeAgent(self.reactor, self.api, self.runtime, self.node_name,
                               self.settings.bind_address, self.root_dir, self.port)
        self.agent.setServiceParent(self)
        self.ready.callback(self.agent)

    def port(self):
        """The endpoint's real port (the configured one until it listens)."""
        port = getattr(self.endpoint, "port", None)
        if port is not None and hasattr(port, "getHost"):
            return port.getHost().port
        if isinstance(port, int) and port:
            return port
        return self.settings.port

    # -- credentials -----------------------------------------------------------------------

    def _client_pair(self):
        """The in-process client certificate, issued by the cluster's PKI and stored."""
        pki = self.plane.pki
        cert_path, key_path, _ = credential_paths(self.root_dir)
        user = NODE_USER_PREFIX + self.node_name
        issuer = pki.client_signer[0] if pki.client_signer is not None else None
        pair = load_pair(cert_path, key_path, user, issuer)
        if pair is None:
            pair = store_pair(cert_path, key_path,
                               pki.issue_client_certificate(user, [NODES_GROUP]))
            self.log.info("Issued the node client certificate for {user}", user=user)
        return pair

    def _serving_pair(self):
        """The in-process serving certificate, issued by the cluster's PKI and stored."""
        cert_path, key_path = serving_paths(self.root_dir)
        pair = load_pair(cert_path, key_path, self.node_name)
        if pair is not None:
            return pair
        names = [self.node_name, self.settings.bind_address, "localhost", "127.0.0.1"]
        if self.plane.pki.ca_key is not None:
            return store_pair(cert_path, key_path,
                               self.plane.pki.issue_serving_certificate(names))
        self.log.warn("The cluster CA key is missing: the node agent serves with a CA of its "
                      "own, which the API server cannot verify")
        ca_certificate, ca_key = create_ca(f"orchlet-ca@{self.node_name}")
        certificate, key = issue_certificate(ca_certificate, ca_key, self.node_name,
                                             names=names, server=True)
        return store_pair(cert_path, key_path, (certificate_pem(certificate),
                                                 private_key_pem(key)))

    async def _requested_serving_pair(self, ca_pems):
        """The serving certificate of C{--orchlet-only}: stored, or asked for until issued."""
        cert_path, key_path = serving_paths(self.root_dir)
        names = serving_names(self.node_name, self.settings.bind_address)
        pair = load_pair(cert_path, key_path, NODE_USER_PREFIX + self.node_name)
        if pair is not None and usable(pair[0], names, ca_pems):
            return pair
        while self.running:
            try:
                pair = await request_serving_certificate(self.reactor, self.api, self.node_name,
                                                         names, self.log)
                return store_pair(cert_path, key_path, pair)
            except CancelledError:
                raise
            except Exception as e:
                self.log.error("No serving certificate yet ({error}); asking again in "
                               "{retry:.0f} s. The API server cannot reach this node's "
                               "endpoint until one is issued.", error=e, retry=SERVING_RETRY)
                await self._wait(deferLater(self.reactor, SERVING_RETRY, lambda: None))
        return None

    async def _orchconfig(self):
        """The orchconfig of C{--orchlet-only}: given, stored by an earlier join, or joined."""
        path = self.settings.orchconfig
        if path is None:
            path = credential_paths(self.root_dir)[2]
            token = self.settings.bootstrap_token
            while not os.path.exists(path) and self.running:
                if token is None:
                    self.log.error("--orchlet-only needs --orchconfig or --bootstrap-token")
                    return None
                try:
                    await join(self.reactor, self.settings.server, token, self.node_name,
                               self.root_dir)
                except CancelledError:
                    raise
                except Exception as e:
                    self.log.error("Joining with the bootstrap token failed: {error}", error=e)
                    await self._wait(deferLater(self.reactor, JOIN_RETRY, lambda: None))
        return load_orchconfig(path) if self.running else None

    # -- parts -----------------------------------------------------------------------------

    def _endpoint(self, cert_pem, key_pem, client_ca_pems):
        endpoint = OrchletEndpoint(self.reactor, self.settings, self.runtime, self.node_name,
                                   cert_pem, key_pem, client_ca_pems, api=self.api)
        endpoint.setServiceParent(self)
        return endpoint

    def stopService(self):
        return Deferred.fromCoroutine(self._stop())

    async def _stop(self):
        self._cancel_waiting()
        await MultiService.stopService(self)
        self._cancel_start()
        if self.runtime is not None:
            self.runtime.close()
        if self.api is not None:
            await self.api.close()
