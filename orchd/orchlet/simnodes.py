# -*- test-case-name: tests.orchlet.test_simnodes,tests.integration.test_simulated_nodes -*-
"""
Several simulated nodes in one process, for scheduling, cordons and taints
on one machine (C{--simulated-nodes N}).

Node C{i} is named C{<node name>-sim-<i>} and is a node like any other to
the API server: it registers its own Node (labelled
C{orchlet.orch.io/simulated=true}, with the configured capacity), renews
its own Lease and reports its status, and runs the pods bound to it in its
own L{SimulatedRuntime} (pod IPs from its own C{/24}, L{pod_network}). Each
acts with its own client certificate (C{system:node:<name>} in
C{system:nodes}), issued from the cluster CA at start and kept under
C{<root-dir>/simulated/<name>}, so the Node authorizer and NodeRestriction
judge it as a node: a TLS client identity belongs to a connection, so each
node has its own connection pool.

What is shared is the pod watch: a node may list and watch all pods (the
static C{system:node} rules; only writes are narrowed to its own pods), so
one list and one watch of every bound pod (C{spec.nodeName!=}), made with
the first simulated node's identity, feeds every node's worker, instead
of one watch per node. Nothing polls: the workers act on changes, the pods'
timers are the runtime's, and the heartbeats of the nodes are spread over
the renewal interval. Registrations run a few at a time, so that many
nodes do not open all their connections at once.

Each node serves its own HTTPS endpoint (L{OrchletEndpoint}) on a free
port of the local node's address, reported in its C{daemonEndpoints}, with
the local node's authentication and authorization, so C{kubectl logs},
C{exec}-free C{nodes/proxy} reads and metrics work for their pods as for
the local node's. The endpoints share one serving certificate, naming the
address and every simulated node.
"""

import ipaddress
import os

import attr

from twisted.application.service import MultiService
from twisted.internet.defer import Deferred, DeferredSemaphore
from twisted.internet.error import CannotListenError
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger

from orchd.auth.authz.node import NODE_USER_PREFIX, NODES_GROUP
from orchd.orchlet.agent import NodeAgent
from orchd.orchlet.apiclient import APIClient
from orchd.orchlet.bootstrap import credential_paths
from orchd.orchlet.heartbeat import RENEW_INTERVAL
from orchd.orchlet.podwatch import PodWatch
from orchd.orchlet.server import OrchletEndpoint
from orchd.orchlet.service import load_pair, store_pair
from orchd.orchlet.servingcert import serving_paths
from orchd.orchlet.simulated import SimulatedRuntime
from orchd.orchlet.startup import StartingService

#: The label every simulated Node carries.
SIMULATED_LABEL = "orchlet.orch.io/simulated"
#: Node i takes its pod IPs from 10.(89 + i // 256).(i % 256).0/24.
_FIRST_NETWORK = int(ipaddress.ip_address("10.89.0.0"))
#: Registrations under way at once.
REGISTRATIONS_AT_ONCE = 8


def node_names(base_name, count):
    """The names of C{count} simulated nodes beside node C{base_name}."""
    return [f"{base_name}-sim-{index}" for index in range(count)]


def pod_network(index):
    """The C{/24} the pods of simulated node C{index} get their IPs from."""
    return ipaddress.ip_network((_FIRST_NETWORK + index * 256, 24))


def heartbeat_offset(index):
    """
    When node C{index} first renews its Lease after registering: every
    hundred nodes spread over the renewal interval, 0.1 s apart, so that
    heartbeats do not all come at once and a few nodes start at once.
    """
    return (index % 100) * RENEW_INTERVAL / 100


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


def serving_pair(pki, root_dir, base_name, address, names):
    """
    The C{(cert PEM, key PEM)} every simulated node serves with: stored under
    C{<root_dir>/simulated} while valid, else issued from the cluster CA for
    C{address}, the loopback names and C{names}. Blocking, as L{node_credentials}.
    """
    cert_path, key_path = serving_paths(os.path.join(root_dir, "simulated"))
    common_name = f"{base_name}-sim"
    pair = load_pair(cert_path, key_path, common_name)
    if pair is None:
        pair = store_pair(cert_path, key_path, pki.issue_serving_certificate(
            [common_name, address, "localhost", "127.0.0.1", *names]))
    return pair


def _healthy():
    """A simulated node has no pressure of any kind."""
    return {}


class SimulatedNodes(StartingService):
    """
    The simulated nodes of L{SimulatedNodeSettings}, beside the API server C{plane}.

    @param settings: a L{orchd.orchlet.settings.SimulatedNodeSettings}.
    @param plane: the in-process L{orchd.app.service.ControlPlane} (its
        C{ready}, C{url} and C{pki}).
    @ivar agents: C{{name: NodeAgent}} once started.
    @ivar ready: fires with the agents once every one runs (registered or still trying).
    """

    log = Logger()
    what = "The simulated nodes"

    def __init__(self, settings, reactor, plane):
        super().__init__()
        self.settings = settings
        self.reactor = reactor
        self.plane = plane
        self.agents = {}
        self.workers = {}
        self.runtimes = []
        self.clients = []
        self.watch = None
        self.ready = Deferred()

    async def _start(self):
        settings, reactor = self.settings, self.reactor
        await self._wait(self.plane.ready)
        names = node_names(settings.base_name, settings.count)
        work = deferToThreadPool(reactor, reactor.getThreadPool(), node_credentials,
                                 self.plane.pki, settings.root_dir, names)
        await self._wait(work)
        pairs = await work
        work = deferToThreadPool(reactor, reactor.getThreadPool(), serving_pair,
                                 self.plane.pki, settings.root_dir, settings.base_name,
                                 settings.address, names)
        await self._wait(work)
        serving_cert, serving_key = await work
        if not self.running:
            return
        gate = DeferredSemaphore(REGISTRATIONS_AT_ONCE)
        capacity = dict(settings.capacity)
        for index, (name, (cert_pem, key_pem)) in enumerate(zip(names, pairs)):
            api = APIClient(reactor, self.plane.url, self.plane.pki.server_ca_pem, cert_pem,
                            key_pem)
            runtime = SimulatedRuntime(reactor, host_ip=settings.address,
                                       network=pod_network(index))
            directory = node_directory(settings.root_dir, name)
            endpoint = self._serve(name, directory, runtime, api, serving_cert, serving_key)
            agent = NodeAgent(reactor, api, runtime, name, settings.address, directory,
                              lambda endpoint=endpoint: getattr(endpoint, "port", None) or 0,
                              probe=_healthy, capacity=capacity,
                              labels={SIMULATED_LABEL: "true"}, watch_pods=False,
                              stagger=heartbeat_offset(index),
                              registration_gate=gate)
            self.clients.append(api)
            self.runtimes.append(runtime)
            self.agents[name] = agent
            self.workers[name] = agent.pods
            agent.setServiceParent(self)
        self.watch = PodWatch(reactor, self.clients[0], "spec.nodeName!=", self.workers)
        self.watch.start()
        self.log.info("Running {count} simulated nodes: {first} to {last}",
                      count=len(names), first=names[0], last=names[-1])
        self.ready.callback(list(self.agents.values()))

    def _serve(self, name, directory, runtime, api, cert_pem, key_pem):
        """Node C{name}'s endpoint, listening; None if it cannot listen (out of files)."""
        endpoint = OrchletEndpoint(
            self.reactor, attr.evolve(self.settings.endpoint, node_name=name,
                                      root_dir=directory, port=0),
            runtime, name, cert_pem, key_pem, self.plane.pki.client_ca_pems, api=api)
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
        if self.watch is not None:
            await self.watch.stop()
        await MultiService.stopService(self)
        self._cancel_start()
        for runtime in self.runtimes:
            runtime.close()
        for api in self.clients:
            await api.close()
