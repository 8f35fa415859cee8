"""Shared test fixtures: an API server over a memory store, driven in memory."""

import orjson
from treq.testing import StubTreq
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from zope.interface import implementer

from orchd.admission.rbacescalation import RBACEscalation
from orchd.api.features import FeatureGates
from orchd.auth.authz.always import AlwaysAllow, PrivilegedGroups
from orchd.auth.authz.rbac import RBACAuthorizer
from orchd.auth.authn.bearer import TokenAuthenticators
from orchd.auth.authn.serviceaccount import ServiceAccountTokenAuthenticator
from orchd.auth.authz.union import UnionAuthorizer
from orchd.auth.interfaces import IAuthenticator
from orchd.auth.rbac.index import PolicyIndex
from orchd.auth.serviceaccount.issuer import TokenIssuer
from orchd.auth.user import ANONYMOUS_USER, AUTHENTICATED, MASTERS, UserInfo
from orchd.registry.binding import binding_resources
from orchd.registry.customresources import custom_resource_kinds
from orchd.registry.catalog import Catalog
from orchd.registry.eviction import eviction_connector
from orchd.registry.kinds.builtin import builtin_registry
from orchd.registry.nodeproxy import node_proxy_connector
from orchd.registry.podlog import pod_log_connector
from orchd.registry.reviews import review_providers
from orchd.registry.scale import scale_connectors
from orchd.registry.servicealloc import ServiceAllocators
from orchd.registry.tokenrequest import token_request_connector
from orchd.server.audit.memory import MemorySink
from orchd.server.audit.policy import Policy
from orchd.server.discovery import DiscoveryRoutes
from orchd.server.filters.audit import Auditor
from orchd.server.health import Health
from orchd.server.settings import ServerSettings
from orchd.server.requestmetrics import APIServerMetrics
from orchd.server.site import APIServer
from orchd.storage.memory import MemoryStore

ADMIN = UserInfo("orch-admin", (MASTERS, AUTHENTICATED))
SA_ISSUER = "https://orch.default.svc.cluster.local"
ALICE = UserInfo("alice", ("devs", AUTHENTICATED))


@implementer(IAuthenticator)
class FixedUser:
    """Authenticates every request as one user (tests only); None means anonymous."""

    def __init__(self, user):
        self.user = user

    async def authenticate(self, request):
        return self.user or ANONYMOUS_USER


class APIHarness:
    """
    A whole API server over a L{MemoryStore}, reached through StubTreq.

    Every Deferred fires synchronously, so tests read results at once.
    """

    def __init__(self, user=ADMIN, authorizers=None, runtime_config="", store=None,
                 system_namespaces=True, feature_gates="", rbac=False, plugins=(),
                 service_account_key=None, connectors=None, service_cluster_ip_range=None,
                 streams=None, virtual=None, metrics=True, audit_policy=None,
                 upstream_group_names=False):
        """
        @param service_account_key: C{(private_key_pem, algorithm)} to serve
            TokenRequests and accept service-account tokens (C{self.issuer},
            C{self.tokens}), with issuer and audience L{SA_ISSUER}.
        @param connectors: more Catalog C{connectors}.
        @param virtual: more Catalog C{virtual} providers (e.g. ComponentStatus).
        @param service_cluster_ip_range: the Service CIDR (default 10.96.0.0/12).
        @param streams: the L{orchd.server.proxy.StreamForwarder} to serve
            C{nodes/proxy} and C{pods/log} with; not served if None.
        @param metrics: count requests into C{self.metrics} (an
            L{APIServerMetrics} timed by C{self.clock}) and serve C{/metrics}.
        @param audit_policy: an audit policy document; the events it asks for
            are kept in C{self.audit.events}.
        @param upstream_group_names: as C{--upstream-group-names}.
        """
        self.clock = Clock()
        self.clock.advance(1_700_000_000)
        self.store = store or MemoryStore()
        if rbac:
            # Policy from the store, decided by RBAC, with escalation checks.
            self.policy = PolicyIndex(self.store)
            self.policy.start()
            authorizers = [PrivilegedGroups(), RBACAuthorizer(self.policy)]
        elif authorizers is None:
            authorizers = [PrivilegedGroups(), AlwaysAllow()]
        self.authorizer = UnionAuthorizer(authorizers)
        if rbac:
            plugins = (RBACEscalation(self.policy, self.authorizer),) + tuple(plugins)
        self.tokens = TokenAuthenticators([], (SA_ISSUER,))
        self.issuer = None
        bindings, binding_connectors = binding_resources()
        connectors = {**binding_connectors, **scale_connectors(), **eviction_connector(),
                      **(connectors or {})}
        if streams is not None:
            connectors.update(node_proxy_connector())
            connectors.update(pod_log_connector())
        if service_account_key is not None:
            self.issuer = TokenIssuer(*service_account_key, SA_ISSUER, self.clock)
            connectors.update(token_request_connector(self.issuer, (SA_ISSUER,)))
        self.catalog = Catalog(builtin_registry(runtime_config), self.store, self.clock,
                               virtual={**review_providers(self.authorizer, self.clock,
                                                           self.tokens), **bindings,
                                        **(virtual or {})},
                               plugins=plugins, connectors=connectors,
                               allocators=ServiceAllocators(
                                   self.store, service_cluster_ip_range or "10.96.0.0/12"))
        if self.issuer is not None:
            self.tokens.add(ServiceAccountTokenAuthenticator(
                self.catalog, [self.issuer.public_key_pem], SA_ISSUER, (SA_ISSUER,), self.clock))
        Deferred.fromCoroutine(self.catalog.start_caches())
        #: What follows the CustomResourceDefinitions (None when they are not served).
        self.custom_resources = custom_resource_kinds(self.catalog)
        if self.custom_resources is not None:
            Deferred.fromCoroutine(self.custom_resources.start())
        self.health = Health(self.clock)
        self.authenticator = FixedUser(user)
        self.metrics = APIServerMetrics(timer=self.clock.seconds) if metrics else None
        self.audit = MemorySink()
        auditor = Auditor(Policy.from_document(audit_policy) if audit_policy else None,
                          [self.audit], self.clock.seconds)
        self.resource = APIServer(
            self.catalog, self.authenticator, self.authorizer, self.health,
            DiscoveryRoutes(self.catalog, upstream_group_names=upstream_group_names),
            settings=ServerSettings(features=FeatureGates.parse(feature_gates),
                                    upstream_group_names=upstream_group_names),
            streams=streams, metrics=self.metrics, auditor=auditor)
        self.treq = StubTreq(self.resource)
        if system_namespaces:
            for name in ("default", "orch-system", "orch-public", "orch-node-lease"):
                self.call("POST", "/api/v1/namespaces", {"metadata": {"name": name}})

    def run(self, coroutine):
        """The result of a coroutine that completes at once (memory store, no waits)."""
        return _result(Deferred.fromCoroutine(coroutine))

    def as_user(self, user):
        self.authenticator.user = user
        return self

    def call(self, method, path, body=None, headers=None, content_type=b"application/json"):
        """
        Make one request; returns C{(code, decoded JSON or text, response headers)}.
        """
        all_headers = dict(headers or {})
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else orjson.dumps(body)
            all_headers.setdefault(b"content-type", content_type)
        response = _result(self.treq.request(method, "https://orchd" + path, data=data,
                                             headers=all_headers))
        raw = _result(self.treq.content(response))
        ctype = response.headers.getRawHeaders(b"content-type", [b""])[0]
        if ctype.startswith(b"application/json"):
            payload = orjson.loads(raw) if raw else None
        elif ctype.startswith(b"text/") or not ctype:
            payload = raw.decode("utf-8")
        else:
            payload = raw
        self.treq.flush()
        return response.code, payload, response.headers


def _result(d):
    results = []
    d.addBoth(results.append)
    if not results:
        raise AssertionError(f"Deferred {d!r} has not fired")
    if hasattr(results[0], "raiseException"):
        results[0].raiseException()
    return results[0]
