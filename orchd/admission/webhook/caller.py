# -*- test-case-name: tests.admission.webhook.test_caller,tests.integration.test_admission_webhooks -*-
"""
POSTing a review to a webhook over HTTPS, without blocking the reactor.

A webhook names a C{url} or a Service; a Service is reached through its
Endpoints, or its EndpointSlices when it has no Endpoints with a ready
address (a ready address and the port of the service port asked for),
with the server certificate checked for C{<service>.<namespace>.svc}.
The server is verified against the webhook's C{caBundle} (the system
roots when it has none). Each distinct trust (bundle and server name) has
its own agent and pool of kept-alive connections, made once: a pooled
connection verified against one webhook's bundle is never handed to
another's. The answer is read up to L{MAX_RESPONSE_BYTES} (a hostile
webhook cannot make the server buffer without end) and the whole call is
bounded by the webhook's C{timeoutSeconds}.
"""

from twisted.internet.defer import CancelledError, Deferred, TimeoutError, gatherResults
from twisted.internet.endpoints import HostnameEndpoint, wrapClientTLS
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure
from twisted.web.client import Agent, HTTPConnectionPool, ResponseDone
from twisted.web.http import PotentialDataLoss
from twisted.web.http_headers import Headers
from twisted.web.iweb import IAgentEndpointFactory
from zope.interface import Interface, implementer

from orchd.admission.webhook.review import CallError
from orchd.api.kinds import DISCOVERY
from orchd.client.body import BytesProducer
from orchd.tls.client import ClientTLSPolicy

#: The label naming the Service of an EndpointSlice.
SERVICE_NAME_LABEL = "orch.io/service-name"
#: The largest answer read from a webhook (upstream's request body limit).
MAX_RESPONSE_BYTES = 3 * 1024 * 1024
#: Trusts (bundle, server name) whose agents are kept.
MAX_AGENTS = 64
#: Connections kept alive per webhook host (validating webhooks are called in parallel).
PERSISTENT_PER_HOST = 32
_HEADERS = Headers({b"content-type": [b"application/json"], b"accept": [b"application/json"]})


class IWebhookCaller(Interface):
    """Sends a review to a webhook."""

    def call(webhook, body):
        """
        @param webhook: the L{orchd.admission.webhook.matching.Webhook}.
        @param body: the encoded review.
        @return: (awaitable) the answer's body.
        @raise CallError: the call failed; the text is upstream's reason.
        """


class _BoundedBody(Protocol):
    """Collects an answer of at most L{MAX_RESPONSE_BYTES}."""

    def __init__(self, done, limit):
        self.done = done
        self.limit = limit
        self.chunks = []
        self.size = 0

    def dataReceived(self, data):
        if self.done.called:
            return
        self.size += len(data)
        if self.size > self.limit:
            self.done.errback(CallError(
                f"the webhook's answer is larger than {self.limit} bytes"))
            self.transport.stopProducing()
            return
        self.chunks.append(data)

    def connectionLost(self, reason):
        if self.done.called:
            return
        if reason.check(ResponseDone, PotentialDataLoss):
            self.done.callback(b"".join(self.chunks))
        else:
            self.done.errback(CallError(f"reading the answer: {reason.getErrorMessage()}"))


def describe_error(error):
    """A one-line reason, the nested TLS or socket reason included."""
    reasons = getattr(error, "reasons", None)
    if reasons:
        return "; ".join(reason.getErrorMessage() for reason in reasons)
    return str(error) or type(error).__name__


def endpoints_targets(endpoints, port_name):
    """C{(ip, port)} of the ready addresses of an Endpoints object, on the named port."""
    targets = []
    for subset in (endpoints or {}).get("subsets") or ():
        target = None
        for entry in subset.get("ports") or ():
            if (entry.get("name") or "") == port_name:
                target = entry.get("port")
        if target is None:
            continue
        targets += [(address.get("ip"), target) for address in subset.get("addresses") or ()
                    if address.get("ip")]
    return targets


def slice_targets(slices, service, port_name):
    """
    C{(ip, port)} of the ready endpoints of a Service's EndpointSlices
    (those labelled with its name), on the named port. An endpoint whose
    C{ready} condition is unset counts as ready, as upstream reads it.
    """
    targets = []
    for piece in slices:
        labels = (piece.get("metadata") or {}).get("labels") or {}
        if labels.get(SERVICE_NAME_LABEL) != service:
            continue
        target = None
        for entry in piece.get("ports") or ():
            if (entry.get("name") or "") == port_name:
                target = entry.get("port")
        if target is None:
            continue
        for endpoint in piece.get("endpoints") or ():
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            targets += [(address, target) for address in endpoint.get("addresses") or ()]
    return targets


@implementer(IStreamClientEndpoint)
class _NoDelay:
    """
    A TCP endpoint whose connections send at once (TCP_NODELAY): the
    client writes a request's headers and body apart, and with Nagle's
    rule the body would wait for the webhook's delayed ACK (some 40 ms).
    """

    def __init__(self, endpoint):
        self._endpoint = endpoint

    def connect(self, factory):
        return self._endpoint.connect(factory).addCallback(_no_delay)


def _no_delay(protocol):
    protocol.transport.setTcpNoDelay(True)
    return protocol


@implementer(IAgentEndpointFactory)
class _Endpoints:
    """
    HTTPS endpoints verified by one trust policy, without Nagle's delay.

    The agent asks for an endpoint on every request, pooled connection or
    not; each host's is made once (building one parses the name anew).
    """

    def __init__(self, reactor, policy):
        self._reactor = reactor
        self._policy = policy
        self._endpoints = {}

    def endpointForURI(self, uri):
        key = (uri.host, uri.port)
        endpoint = self._endpoints.get(key)
        if endpoint is None:
            if len(self._endpoints) >= MAX_AGENTS:
                self._endpoints.clear()
            creator = self._policy.creatorForNetloc(uri.host, uri.port)
            endpoint = self._endpoints[key] = wrapClientTLS(
                creator, _NoDelay(HostnameEndpoint(self._reactor, uri.host, uri.port)))
        return endpoint


@implementer(IWebhookCaller)
class WebhookCaller:
    """
    @param reactor: an C{IReactorTime} and C{IReactorTCP}.
    @param lookup: async C{(group, resource, namespace, name) -> object or None}
        reading Services and Endpoints (from the watch caches: the plugin's
        L{orchd.admission.webhook.plugin.read_object} over them).
    @param list_objects: async C{(group, resource, namespace) -> [object]}
        listing EndpointSlices, for a Service without an Endpoints object
        (or without a ready address in it); None to read Endpoints only.
    """

    def __init__(self, reactor, lookup, max_response_bytes=MAX_RESPONSE_BYTES,
                 list_objects=None):
        self._reactor = reactor
        self._lookup = lookup
        self._list = list_objects
        self._limit = max_response_bytes
        self._agents = {}
        self._next = 0

    def _agent(self, ca_pem, server_name):
        key = (ca_pem, server_name)
        agent = self._agents.get(key)
        if agent is None:
            if len(self._agents) >= MAX_AGENTS:
                self.close()
            pool = HTTPConnectionPool(self._reactor, persistent=True)
            pool.maxPersistentPerHost = PERSISTENT_PER_HOST
            policy = ClientTLSPolicy(ca_pem=ca_pem, server_name=server_name)
            agent = self._agents[key] = (
                Agent.usingEndpointFactory(self._reactor, _Endpoints(self._reactor, policy),
                                           pool=pool), pool)
        return agent[0]

    async def call(self, webhook, body):
        if webhook.url is not None:
            url, server_name = webhook.url, None
        else:
            url, server_name = await self._service_url(webhook.service)
        agent = self._agent(webhook.ca_pem, server_name)
        deadline = CallError(f'failed to call webhook: Post "{url}": context deadline exceeded')
        exchange = Deferred.fromCoroutine(self._exchange(agent, url, body))
        try:
            return await exchange.addTimeout(
                webhook.timeout, self._reactor,
                onTimeoutCancel=lambda result, timeout: Failure(deadline))
        except (TimeoutError, CancelledError):
            raise deadline from None
        except CallError:
            raise
        except Exception as error:
            raise CallError(f'failed to call webhook: Post "{url}": {describe_error(error)}') \
                from None

    async def _exchange(self, agent, url, body):
        response = await agent.request(b"POST", url.encode("ascii"), _HEADERS.copy(),
                                       BytesProducer(body))
        done = Deferred()
        response.deliverBody(_BoundedBody(done, self._limit))
        content = await done
        if not 200 <= response.code < 300:
            raise CallError(f"failed to call webhook: the server answered HTTP {response.code}")
        return content

    async def _service_url(self, service):
        """
        The URL of a ready endpoint of a webhook's Service, and the server
        name its certificate must carry.
        """
        namespace, name = service.get("namespace", ""), service.get("name", "")
        port = service.get("port") or 443
        path = service.get("path") or "/"
        svc = await self._lookup("", "services", namespace, name)
        if svc is None:
            raise CallError(f'failed to call webhook: service "{namespace}/{name}" not found')
        port_name = None
        for entry in (svc.get("spec") or {}).get("ports") or ():
            if entry.get("port") == port:
                port_name = entry.get("name") or ""
                break
        else:
            raise CallError(f'failed to call webhook: service "{namespace}/{name}" has no '
                            f'port {port}')
        endpoints = await self._lookup("", "endpoints", namespace, name)
        targets = endpoints_targets(endpoints, port_name)
        if not targets and self._list is not None:
            slices = await self._list(DISCOVERY, "endpointslices", namespace)
            targets = slice_targets(slices, name, port_name)
        if not targets:
            raise CallError(f'failed to call webhook: no endpoints available for service "{name}"')
        self._next = (self._next + 1) % len(targets)
        ip, target = targets[self._next]
        host = f"[{ip}]" if ":" in ip else ip
        return f"https://{host}:{target}{path}", f"{name}.{namespace}.svc"

    def close(self):
        """Drop every kept connection (on shutdown). @return: a Deferred."""
        agents, self._agents = self._agents, {}
        return gatherResults([pool.closeCachedConnections() for _, pool in agents.values()])

