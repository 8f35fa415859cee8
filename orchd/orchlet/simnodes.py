# -*- test-case-name: tests.orchlet.test_simnodes,tests.integration.test_simulated_nodes -*-
"""
A simulated cluster: many nodes in one process, for scheduling, cordons,
taints and heartbeats at scale on one machine (C{--simulated-nodes N}).

Node C{i} is named C{<node name>-sim-<i>} and is a node like any other to
the API server: it registers its own Node (labelled
C{orchlet.orch.io/simulated=true}, with the configured capacity), renews
its own Lease every 10 s, reports its status (at upstream's cadence: on a
change, else every 5 minutes) and runs the pods bound to it in its own
L{SimulatedRuntime} (pod IPs from its own C{/24}, L{pod_network}). Each
acts with its own client certificate (C{system:node:<name>} in
C{system:nodes}), so the Node authorizer and NodeRestriction judge it as a
node: a TLS client identity belongs to a connection, so each node keeps
its own connection (one, L{KEPT_PER_NODE}) to the API server.

Where the identities come from (L{PlaneIdentities}, L{OrchconfigIdentities}):

  - beside the API server (the default), they are issued from its CA;
  - in a process of their own (C{--orchlet-only --orchconfig <admin's>}),
    each node asks for its certificate with a CertificateSigningRequest
    made with the orchconfig's credentials (approved by the controller
    for a user who may create C{certificatesigningrequests/nodeclient},
    as an administrator or a bootstrap token may), and their shared
    serving certificate with one made as the first node. The simulated
    cluster then uses the other core, and the API server's own CPU is
    what it spends on the nodes. No node agent of the process's own runs.

Either way the certificates are stored under C{<root-dir>/simulated/<name>}
and reused while valid, so later starts are quick.

What is shared: the reactor and its timers (a node has no thread; its
first Lease renewal is placed on a common 10 s cycle, node C{i} at C{i/N}
of it, L{heartbeat_phase}, whenever it registered, so that renewals come
evenly, N/10 a second, each later one up to 4% late at random, as every
node agent's; and so are the 5-minute status reports: nodes that
registered within the same minute would otherwise all report again within
a minute, every 5 minutes, a burst of thousands of Node writes); the pod
watch (a node may list and watch all pods, so one list and one watch of
every bound pod, C{spec.nodeName!=}, made with the first node's identity,
feeds every node's worker); the serving
certificate and its TLS context. Each node serves its own HTTPS endpoint
(L{OrchletEndpoint}) on a free port of the local address, reported in its
C{daemonEndpoints}: the API server finds a node's endpoint only by address
and port, so C{kubectl logs}, C{nodes/proxy} reads and the resource
metrics of each node need a port of its own; a listening socket is all it
costs. Registrations run a few at a time (L{REGISTRATIONS_AT_ONCE}), so
that many nodes do not all connect at once, and the latency of every Lease
renewal is logged as a summary every L{REPORT_INTERVAL} seconds
(L{RenewalStats}).
"""

import ipaddress
import os

import attr
from cryptography import x509

from twisted.application.service import MultiService
from twisted.internet.defer import Deferred, DeferredList, DeferredSemaphore, succeed
from twisted.internet.error import CannotListenError
from twisted.internet.task import LoopingCall
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger

from orchd.auth.authz.node import NODE_USER_PREFIX, NODES_GROUP
from orchd.client.orchconfig import load_orchconfig
from orchd.orchlet.agent import NodeAgent
from orchd.orchlet.apiclient import APIClient
from orchd.orchlet.bootstrap import credential_paths, request_certificate
from orchd.orchlet.heartbeat import RENEW_INTERVAL
from orchd.orchlet.nodestatus import REPORT_INTERVAL as REPORT_STATUS_INTERVAL
from orchd.orchlet.podwatch import PodWatch
from orchd.orchlet.server import OrchletEndpoint
from orchd.orchlet.service import load_pair, store_pair
from orchd.orchlet.servingcert import (
    request_serving_certificate, serving_names, serving_paths, usable,
)
from orchd.orchlet.simulated import SimulatedRuntime
from orchd.orchlet.startup import StartingService
from orchd.tls.certs import issued_by
from orchd.tls.server import server_tls_options

#: The label every simulated Node carries.
SIMULATED_LABEL = "orchlet.orch.io/simulated"
#: Node i takes its pod IPs from 10.(89 + i // 256).(i % 256).0/24.
_FIRST_NETWORK = int(ipaddress.ip_address("10.89.0.0"))
#: Registrations under way at once.
REGISTRATIONS_AT_ONCE = 32
#: Certificate requests under way at once (a process of their own).
REQUESTS_AT_ONCE = 16
#: Connections each node keeps open to the API server: its requests are
#: rare (a Lease renewal every 10 s), and each kept one is a socket and a
#: TLS session on both sides.
KEPT_PER_NODE = 1
#: Seconds between two summaries of the Lease renewals in the log.
REPORT_INTERVAL = 30.0


def node_names(base_name, count):
    """The names of C{count} simulated nodes beside node C{base_name}."""
    return [f"{base_name}-sim-{index}" for index in range(count)]


def pod_network(index):
    """The C{/24} the pods of simulated node C{index} get their IPs from."""
    return ipaddress.ip_network((_FIRST_NETWORK + index * 256, 24))


def heartbeat_phase(index, count, interval=RENEW_INTERVAL):
    """Where in the common renewal cycle node C{index} of C{count} renews: C{i/N} of it."""
    return interval * index / max(count, 1)


def delay_to_phase(now, phase, interval=RENEW_INTERVAL):
    """
    Seconds from C{now} to the next moment at C{phase} of the common cycle
    (the cycle starts at the epoch, so every process agrees): a node that
    registers late still renews in its own slot.
    """
    return (phase - now) % interval


class RenewalStats:
    """
    The latencies of the nodes' Lease renewals since the last L{take}:
    the nodes' own view of the API server's answer time.
    """

    def __init__(self):
        self._latencies = []

    def observe(self, seconds):
        self._latencies.append(seconds)

    def take(self):
        """C{(count, p50, p99, max)} in seconds since the last call (None figures if none)."""
        ordered, self._latencies = sorted(self._latencies), []
        if not ordered:
            return 0, None, None, None

        def at(q):
            return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
        return len(ordered), at(0.5), at(0.99), ordered[-1]


def node_directory(root_dir, name):
    return os.path.join(root_dir, "simulated", name)


def node_credentials(pki, root_dir, names):
    """
    C{[(cert PEM, key PEM)]} for the nodes C{names}: those stored under
    their directories while valid and issued by the cluster's client CA,
    else new ones, stored. Blocking (files, key generation): call it off
    the reactor thread.
    """
    issuer = pki.client_signer[0] if pki.client_signer is not None else None
    pairs = []
    for name in names:
        cert_path, key_path, _ = credential_paths(node_directory(root_dir, name))
        user = NODE_USER_PREFIX + name
        pair = load_pair(cert_path, key_path, user, issuer)
        if pair is None:
            pair = store_pair(cert_path, key_path,
                              pki.issue_client_certificate(user, [NODES_GROUP]))
        pairs.append(pair)
    return pairs


def serving_pair(pki, root_dir, base_name, address):
    """
    The C{(cert PEM, key PEM)} every simulated node serves with: stored under
    C{<root_dir>/simulated} while valid, else issued from the cluster CA for
    C{address} and the loopback names. The API server reaches a node by its
    address and verifies that name, so the nodes' own names are not listed
    (with thousands of nodes they would make every handshake send a large
    certificate). Blocking, as L{node_credentials}.
    """
    cert_path, key_path = serving_paths(os.path.join(root_dir, "simulated"))
    common_name = f"{base_name}-sim"
    pair = load_pair(cert_path, key_path, common_name)
    if pair is None:
        pair = store_pair(cert_path, key_path, pki.issue_serving_certificate(
            [common_name, address, "localhost", "127.0.0.1"]))
    return pair


def _healthy():
    """A simulated node has no pressure of any kind."""
    return {}


class PlaneIdentities:
    """The nodes' credentials beside the API server C{plane}: issued from its CA."""

    def __init__(self, reactor, plane, settings):
        self._reactor = reactor
        self._plane = plane
        self._settings = settings

    def ready(self):
        return self._plane.ready

    @property
    def url(self):
        return self._plane.url

    @property
    def server_ca_pem(self):
        return self._plane.pki.server_ca_pem

    @property
    def client_ca_pems(self):
        return list(self._plane.pki.client_ca_pems)

    def _in_thread(self, function, *args):
        return deferToThreadPool(self._reactor, self._reactor.getThreadPool(), function, *args)

    async def node_pairs(self, names):
        return await self._in_thread(node_credentials, self._plane.pki,
                                     self._settings.root_dir, names)

    async def serving_pair(self, first_api):
        settings = self._settings
        return await self._in_thread(serving_pair, self._plane.pki, settings.root_dir,
                                     settings.base_name, settings.address)


class OrchconfigIdentities:
    """
    The nodes' credentials in a process of their own: asked for with
    CertificateSigningRequests made with the credentials of C{orchconfig}
    (for the client certificates) and as the first node (for the shared
    serving certificate), stored under the root directory and reused.
    """

    log = Logger()

    def __init__(self, reactor, orchconfig, settings, requests_at_once=REQUESTS_AT_ONCE):
        self._reactor = reactor
        self._config = orchconfig
        self._settings = settings
        self._at_once = requests_at_once
        self._ca = None
        if orchconfig.ca_pem:
            try:
                self._ca = x509.load_pem_x509_certificates(orchconfig.ca_pem)[0]
            except ValueError:
                self._ca = None

    @classmethod
    def from_file(cls, reactor, path, settings):
        return cls(reactor, load_orchconfig(path), settings)

    def ready(self):
        return succeed(None)

    @property
    def url(self):
        return self._config.server

    @property
    def server_ca_pem(self):
        return self._config.ca_pem

    @property
    def client_ca_pems(self):
        return [self._config.ca_pem] if self._config.ca_pem else []

    def _stored(self, name):
        cert_path, key_path, _ = credential_paths(node_directory(self._settings.root_dir, name))
        return cert_path, key_path, load_pair(cert_path, key_path, NODE_USER_PREFIX + name)

    def _scan(self, names):
        """C{({name: stored pair}, [names without a usable one])}; blocking (files)."""
        pairs, missing = {}, []
        for name in names:
            _, _, pair = self._stored(name)
            if pair is not None and self._ca is not None:
                if not issued_by(x509.load_pem_x509_certificate(pair[0]), self._ca):
                    pair = None
            if pair is None:
                missing.append(name)
            else:
                pairs[name] = pair
        return pairs, missing

    def _in_thread(self, function, *args):
        return deferToThreadPool(self._reactor, self._reactor.getThreadPool(), function, *args)

    async def node_pairs(self, names):
        pairs, missing = await self._in_thread(self._scan, names)
        if missing:
            self.log.info("Asking for the client certificates of {count} simulated nodes",
                          count=len(missing))
            config = self._config
            api = APIClient(self._reactor, config.server, config.ca_pem, config.client_cert_pem,
                            config.client_key_pem, config.token)
            gate = DeferredSemaphore(self._at_once)

            async def ask(name):
                pair = await request_certificate(self._reactor, api, name, interval=0.2)
                cert_path, key_path, _ = credential_paths(
                    node_directory(self._settings.root_dir, name))
                pairs[name] = await self._in_thread(store_pair, cert_path, key_path, pair)
            try:
                results = await DeferredList(
                    [gate.run(lambda name=name: Deferred.fromCoroutine(ask(name)))
                     for name in missing], consumeErrors=True)
            finally:
                await api.close()
            for ok, result in results:
                if not ok:
                    result.raiseException()
        return [pairs[name] for name in names]

    async def serving_pair(self, first_api):
        settings = self._settings
        directory = os.path.join(settings.root_dir, "simulated")
        cert_path, key_path = serving_paths(directory)
        first = node_names(settings.base_name, 1)[0]
        names = serving_names(first, settings.address)
        pair = load_pair(cert_path, key_path, NODE_USER_PREFIX + first)
        if pair is not None and usable(pair[0], names, self.client_ca_pems):
            return pair
        pair = await request_serving_certificate(self._reactor, first_api, first, names,
                                                 self.log)
        return store_pair(cert_path, key_path, pair)


def _no_access_log(request):
    """A simulated node's endpoint writes no access log lines."""


class SimulatedNodes(StartingService):
    """
    The simulated nodes of L{SimulatedNodeSettings}.

    @param settings: a L{orchd.orchlet.settings.SimulatedNodeSettings}.
    @param plane: the in-process L{orchd.app.service.ControlPlane} (its
        C{ready}, C{url} and C{pki}), or None when C{settings.orchconfig}
        names the API server and the credentials to ask for identities with.
    @ivar agents: C{{name: NodeAgent}} once started.
    @ivar stats: the L{RenewalStats} of every node's Lease renewals.
    @ivar ready: fires with the agents once every one runs (registered or still trying).
    """

    log = Logger()
    what = "The simulated nodes"

    def __init__(self, settings, reactor, plane=None, identities=None):
        super().__init__()
        self.settings = settings
        self.reactor = reactor
        self.plane = plane
        if identities is None:
            identities = (PlaneIdentities(reactor, plane, settings) if plane is not None else
                          OrchconfigIdentities.from_file(reactor, settings.orchconfig, settings))
        self.identities = identities
        self.agents = {}
        self.workers = {}
        self.runtimes = []
        self.clients = []
        self.watch = None
        self.stats = RenewalStats()
        self._report = LoopingCall(self._summary)
        self._report.clock = reactor
        self.ready = Deferred()

    async def _start(self):
        settings, reactor, identities = self.settings, self.reactor, self.identities
        await self._wait(identities.ready())
        names = node_names(settings.base_name, settings.count)
        work = Deferred.fromCoroutine(identities.node_pairs(names))
        await self._wait(work)
        pairs = await work
        if not self.running:
            return
        for cert_pem, key_pem in pairs:
            self.clients.append(APIClient(reactor, identities.url, identities.server_ca_pem,
                                          cert_pem, key_pem, kept=KEPT_PER_NODE))
        work = Deferred.fromCoroutine(identities.serving_pair(self.clients[0]))
        await self._wait(work)
        serving_cert, serving_key = await work
        if not self.running:
            return
        # One TLS context for every endpoint: they serve the same certificate.
        tls = server_tls_options(serving_cert, serving_key, identities.client_ca_pems)
        gate = DeferredSemaphore(REGISTRATIONS_AT_ONCE)
        capacity = dict(settings.capacity)
        count = len(names)
        for index, (name, api) in enumerate(zip(names, self.clients)):
            runtime = SimulatedRuntime(reactor, host_ip=settings.address,
                                       network=pod_network(index))
            directory = node_directory(settings.root_dir, name)
            endpoint = self._serve(name, directory, runtime, api, tls)
            phase = heartbeat_phase(index, count)
            agent = NodeAgent(reactor, api, runtime, name, settings.address, directory,
                              lambda endpoint=endpoint: getattr(endpoint, "port", None) or 0,
                              probe=_healthy, capacity=capacity,
                              labels={SIMULATED_LABEL: "true"}, watch_pods=False,
                              stagger=lambda phase=phase: delay_to_phase(reactor.seconds(),
                                                                         phase),
                              registration_gate=gate,
                              report_phase=heartbeat_phase(index, count, REPORT_STATUS_INTERVAL))
            agent.lease.observe = self.stats.observe
            self.runtimes.append(runtime)
            self.agents[name] = agent
            self.workers[name] = agent.pods
            agent.setServiceParent(self)
        self.watch = PodWatch(reactor, self.clients[0], "spec.nodeName!=", self.workers)
        self.watch.start()
        self._report.start(REPORT_INTERVAL, now=False)
        self.log.info("Running {count} simulated nodes: {first} to {last}",
                      count=len(names), first=names[0], last=names[-1])
        self.ready.callback(list(self.agents.values()))

    def _summary(self):
        count, p50, p99, most = self.stats.take()
        if not count:
            return
        self.log.info("Simulated nodes: {count} Lease renewals in the last {secs:.0f} s, "
                      "latency p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {most:.1f} ms; "
                      "{registered} of {nodes} nodes registered",
                      count=count, secs=REPORT_INTERVAL, p50=p50 * 1000, p99=p99 * 1000,
                      most=most * 1000, nodes=len(self.agents),
                      registered=sum(1 for agent in self.agents.values()
                                     if agent.node is not None))

    def _serve(self, name, directory, runtime, api, tls):
        """Node C{name}'s endpoint, listening; None if it cannot listen (out of files)."""
        endpoint = OrchletEndpoint(
            self.reactor, attr.evolve(self.settings.endpoint, node_name=name,
                                      root_dir=directory, port=0),
            runtime, name, None, None, None, api=api, tls=tls)
        # Thousands of endpoints scraped every 15 s: an access line each
        # would be most of what the process does (the API server logs them).
        endpoint.site.log = _no_access_log
        try:
            endpoint.setServiceParent(self)
        except CannotListenError as e:
            endpoint.disownServiceParent()
            self.log.warn("Simulated node {node} serves no endpoint: {error}", node=name,
                          error=e)
            return None
        return endpoint

    def stopService(self):
        return Deferred.fromCoroutine(self._stop())

    async def _stop(self):
        self._cancel_waiting()
        if self._report.running:
            self._report.stop()
            self._summary()         # the renewals since the last summary
        if self.watch is not None:
            await self.watch.stop()
        await MultiService.stopService(self)
        self._cancel_start()
        for runtime in self.runtimes:
            runtime.close()
        await DeferredList([api.close() for api in self.clients], consumeErrors=True)
