# -*- test-case-name: tests.integration.test_client_tls -*-
"""
An HTTPS client for the API server an orchconfig names.

The trust policy itself (L{orchd.tls.client.ClientTLSPolicy}) knows no
orchconfig; this module reads the file and builds the policy, the agent and
the bearer token header from it.
"""

from treq.client import HTTPClient
from twisted.web.client import Agent, HTTPConnectionPool
from twisted.web.http_headers import Headers
from twisted.web.iweb import IAgent
from zope.interface import implementer

from orchd.client.orchconfig import load_orchconfig
from orchd.tls.client import ClientTLSPolicy


@implementer(IAgent)
class _BearerAgent:
    """Adds C{Authorization: Bearer <token>} to every request, as kubeconfig's C{token} asks."""

    def __init__(self, agent, token):
        self._agent = agent
        self._value = b"Bearer " + token.encode("ascii")

    def request(self, method, uri, headers=None, bodyProducer=None):
        headers = headers.copy() if headers is not None else Headers()
        if not headers.hasHeader(b"authorization"):
            headers.setRawHeaders(b"authorization", [self._value])
        return self._agent.request(method, uri, headers, bodyProducer)


def policy_from_orchconfig(orchconfig):
    """The L{ClientTLSPolicy} an L{OrchConfig} describes."""
    return ClientTLSPolicy(orchconfig.ca_pem, orchconfig.client_cert_pem, orchconfig.client_key_pem,
                           verify=not orchconfig.insecure_skip_tls_verify,
                           server_name=orchconfig.tls_server_name)


def client_from_orchconfig(path, reactor, pool=None):
    """
    A treq client for the API server named in the orchconfig at C{path}.

    Requests carry the file's client certificate and, if it has one, its
    bearer token. Connections are kept alive in C{pool} (a new persistent
    pool if None; close it with C{closeCachedConnections} when done).

    @return: C{(treq.client.HTTPClient, server_url)}.
    @raise orchd.client.orchconfig.OrchConfigError: for an unusable file.
    """
    orchconfig = load_orchconfig(path)
    if pool is None:
        pool = HTTPConnectionPool(reactor, persistent=True)
    agent = Agent(reactor, contextFactory=policy_from_orchconfig(orchconfig), pool=pool)
    if orchconfig.token:
        agent = _BearerAgent(agent, orchconfig.token)
    return HTTPClient(agent), orchconfig.server.rstrip("/")
