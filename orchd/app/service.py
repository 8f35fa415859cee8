# -*- test-case-name: tests.integration.test_server -*-
"""
The service tree of C{twistd orchd}: the composition root.

L{ControlPlane} wires the store, the registry, authentication,
authorization, health, the API server's TLS listener and the controllers.
Start-up problems a user can fix (a busy port, a locked store, unreadable
credentials) stop the process with one line naming them.
"""

import os
import sys

from twisted.application.service import MultiService
from twisted.internet.defer import Deferred, DeferredList
from twisted.internet.error import CannotListenError
from twisted.internet.task import deferLater
from twisted.logger import Logger

from orchd.api.errors import StatusError
from orchd.api.kinds import RBAC
from orchd.app.audit import AuditConfigError, build_auditor
from orchd.app.clusterinfo import ensure_cluster_info
from orchd.app.storageclass import ensure_default_storage_class
from orchd.app.components import Components
from orchd.app.config import ConfigError
from orchd.app.datadir import DataDirError, restrict_umask, secure_data_dir
from orchd.app.encryptionconfig import EncryptionConfigError, load_encryption_config
from orchd.app.fdlimit import raise_open_file_limit
from orchd.app.metricsscraper import MetricsScraper, OrchletClient
from orchd.app.orchletclient import ensure_orchlet_client
from orchd.app.orchletsettings import orchlet_settings, simulated_node_settings
from orchd.app.pki import PKI, PKIError
from orchd.orchlet.bootstrap import credential_paths
from orchd.auth.authn.bearer import BearerAuthenticator, TokenAuthenticators
from orchd.auth.authn.bootstrap import BootstrapTokenAuthenticator
from orchd.auth.authn.serviceaccount import ServiceAccountTokenAuthenticator
from orchd.auth.serviceaccount.issuer import TokenIssuer
from orchd.auth.authn.union import UnionAuthenticator
from orchd.auth.authn.x509 import X509Authenticator
from orchd.admission.certificates import (
    CertificateApproval, CertificateSigning, CertificateSubjectRestriction,
)
from orchd.admission.defaultingressclass import DefaultIngressClass
from orchd.admission.defaultstorageclass import DefaultStorageClass
from orchd.admission.webhook.plugin import webhook_admission
from orchd.admission.storageprotection import StorageObjectInUseProtection
from orchd.admission.defaulttolerationseconds import DefaultTolerationSeconds
from orchd.admission.noderestriction import NodeRestriction
from orchd.admission.podsecurity.admission import PodSecurity
from orchd.admission.rbacescalation import RBACEscalation
from orchd.admission.serviceaccount import ServiceAccountAdmission
from orchd.auth.authz.factory import Authorization
from orchd.app.bootstrappolicy import reconcile_bootstrap_policy
from orchd.admission.namespacelifecycle import SYSTEM_NAMESPACES
from orchd.client.orchconfig import OrchConfigError, server_url
from orchd.controllers.elected import ElectedControllers
from orchd.controllers.manager import (
    ControllerEnvironment, UnknownControllerError, build_controllers, selected_controllers,
)
from orchd.orchlet.service import OrchletService
from orchd.orchlet.simnodes import SimulatedNodes
from orchd.registry.binding import binding_resources
from orchd.registry.eviction import eviction_connector
from orchd.registry.catalog import Catalog
from orchd.registry.componentstatus import component_status_provider
from orchd.registry.customresources import custom_resource_kinds
from orchd.registry.kinds.builtin import builtin_registry
from orchd.registry.nodeproxy import node_proxy_connector
from orchd.registry.podlog import pod_log_connector
from orchd.registry.resourcemetrics import MetricsCache, resource_metrics_providers
from orchd.registry.scale import scale_connectors
from orchd.registry.reviews import review_providers
from orchd.registry.servicealloc import ServiceAllocators
from orchd.registry.tokenrequest import token_request_connector
from orchd.server.discovery import DiscoveryRoutes
from orchd.server.filters.limits import InflightLimiter
from orchd.server.health import Health, HealthCheck, LogCheck
from orchd.server.healthsite import listen_health
from orchd.server.settings import ServerSettings
from orchd.server.offload import Offload
from orchd.server.proxy import StreamForwarder, orchlet_agent, plain_agent
from orchd.server.requestlimits import LISTEN_BACKLOG
from orchd.server.requestmetrics import APIServerMetrics, resource_label
from orchd.server.site import APIServer, APISite
from orchd.tls.server import server_tls_options
from orchd.storage.cachedreads import CachedReads
from orchd.storage.compactor import Compactor
from orchd.storage.encrypting import TransformingStore
from orchd.storage.etcd import EtcdStore
from orchd.storage.leveldb import LevelDBStore
from orchd.storage.timed import TimedStore
from orchd.tls.listen import listen_tls

PROGRAM = "twistd orchd"
#: Seconds between attempts to complete the bootstrap policy.
POLICY_RETRY = 1.0


def fail(message):
    """
    Stop start-up with one line on stderr and a non-zero exit status.

    The line goes to the process's real stderr: once twistd has started
    logging, C{sys.stderr} feeds the log instead.
    """
    stream = sys.__stderr__ or sys.stderr
    stream.write(f"{PROGRAM}: error: {message}\n")
    stream.flush()
    return SystemExit(2)


def make_service(config, reactor=None):
    """The top service for C{config} (a L{orchd.app.config.Config})."""
    if reactor is None:
        from twisted.internet import reactor
    # Before anything is created: whatever orchd writes is owner-only.
    restrict_umask()
    # Before any listener: each sizes its pending-connection bound from it.
    raise_open_file_limit()
    top = MultiService()
    plane = None
    settings = None
    if not config.no_orchlet:
        try:
            settings = orchlet_settings(config)
        except ConfigError as e:
            raise fail(str(e)) from None
    if config.orchlet_only:
        joined = os.path.exists(credential_paths(config.root_dir)[2])
        if config.orchconfig is None and config.bootstrap_token is None and not joined:
            raise fail("--orchlet-only needs --orchconfig, or --bootstrap-token with --server "
                       "(or the credentials of an earlier join under --root-dir)")
    else:
        plane = ControlPlane(config, reactor)
        plane.setServiceParent(top)
    simulated = simulated_node_settings(config)
    # A simulated cluster of its own (--orchlet-only --simulated-nodes) runs
    # no node agent of the process's own: its orchconfig is not a node's.
    if settings is not None and not (config.orchlet_only and simulated is not None):
        # Second child: it starts after, and stops before, the API server.
        OrchletService(settings, reactor, plane).setServiceParent(top)
    if simulated is not None:
        try:
            SimulatedNodes(simulated, reactor, plane).setServiceParent(top)
        except OrchConfigError as e:
            raise fail(str(e)) from None
    return top


class ControlPlane(MultiService):
    """
    The API server with its store and controllers.

    Files and threads are opened in L{privilegedStartService}, after twistd
    may have forked into the background, never in the constructor.

    @ivar port: the listening port, once started (its C{getHost().port} is
        the real port when C{--secure-port=0}).
    """

    log = Logger()

    def __init__(self, config, reactor):
        super().__init__()
        self.config = config
        self.reactor = reactor
        try:
            corrected = secure_data_dir(config.data_dir)
            self.encryption = self._encryption_config()
            self.kinds = builtin_registry(config.runtime_config)
            self.controller_names = selected_controllers(config.controllers)
            self.pki = PKI.ensure(config)
            ensure_orchlet_client(config, self.pki)
        except (PKIError, OrchConfigError, UnknownControllerError, DataDirError,
                ValueError) as e:
            raise fail(e) from None
        if corrected:
            examples = ", ".join(f"{path} ({mode:04o})" for path, mode in corrected[:3])
            self.log.warn("Made {count} paths in {data_dir} owner-only that other users could "
                          "read, e.g. {examples}", count=len(corrected),
                          data_dir=config.data_dir, examples=examples)
        self.health = Health(reactor, config.livez_grace_period)
        #: The API server's metrics (None with --enable-metrics=false).
        self.metrics = APIServerMetrics() if config.enable_metrics else None
        self.store = None
        self.catalog = None
        #: The scheduler and the controller manager: their health and status.
        self.components = Components(reactor, metrics=config.enable_metrics)
        self.port = None
        #: The scheduler's and the controller manager's health listeners, when on.
        self.scheduler_port = None
        self.controller_manager_port = None
        self.url = None
        self.ready = Deferred()
        self._log_check = LogCheck(reactor, reactor)

    def privilegedStartService(self):
        config, reactor = self.config, self.reactor
        self.store = self._open_store()
        # Informers made before the catalog follow its watch caches too.
        caches = {}
        reads = CachedReads(caches, self.store)
        try:
            self.authorization = Authorization(config, reads, reactor)
        except ValueError as e:
            self.store.close()
            raise fail(e) from None
        self.authorization.setServiceParent(self)
        authorizer = self.authorization.authorizer
        try:
            self.auditor, self.audit_backends = build_auditor(config, reactor)
            # Not children: they stop last, once no request can audit any more.
            for backend in self.audit_backends:
                backend.startService()
        except AuditConfigError as e:
            self.store.close()
            raise fail(e) from None
        except OSError as e:
            self.store.close()
            raise fail(f"--audit-log-path: cannot open {e.filename}: {e.strerror}") from None
        #: Bearer-token authenticators, in order; TokenReview asks the same ones.
        self.tokens = TokenAuthenticators([], config.audiences)
        issuer = TokenIssuer(self.pki.sa_private_key_pem, self.pki.sa_algorithm,
                             config.service_account_issuer, reactor)
        bindings, binding_connectors = binding_resources()
        statuses = component_status_provider(self.components.statuses(self.store), reactor)
        #: NodeMetrics and PodMetrics, as the scraper last read them from the nodes.
        self.resource_metrics = MetricsCache()
        metrics_kinds = resource_metrics_providers(self.resource_metrics, lambda: self.catalog,
                                                   reactor)
        # Last in the chain: mutating webhooks after the built-in mutating
        # plugins, validating webhooks after every other validation.
        webhooks = webhook_admission(reads, reactor, self.kinds, config.upstream_group_names)
        webhooks.setServiceParent(self)     # its informers are ready before /readyz
        self.catalog = Catalog(
            self.kinds, self.store, reactor,
            virtual={**review_providers(authorizer, reactor, self.tokens), **bindings,
                     **statuses, **metrics_kinds},
            plugins=(RBACEscalation(self.authorization.policy, authorizer),
                     ServiceAccountAdmission(self.store), NodeRestriction(),
                     DefaultTolerationSeconds(config.pod_eviction_timeout),
                     DefaultIngressClass(reads), DefaultStorageClass(reads),
                     StorageObjectInUseProtection(),
                     CertificateApproval(authorizer), CertificateSigning(authorizer),
                     CertificateSubjectRestriction(), PodSecurity(self.store), webhooks),
            connectors={**token_request_connector(issuer, config.audiences),
                        **node_proxy_connector(), **pod_log_connector(),
                        **binding_connectors, **scale_connectors(), **eviction_connector()},
            allocators=ServiceAllocators(self.store, config.service_cluster_ip_range),
            caches=caches)
        self.health.add(HealthCheck("log", self._log_check.check))
        self.health.add(HealthCheck("etcd", self.store.check))
        self._caches_hook = self.health.post_start_hook("start-watch-caches")
        self._namespaces_hook = self.health.post_start_hook("start-system-namespaces-controller")
        self._controllers_hook = self.health.post_start_hook("start-orch-controllers")
        self._policy_hook = self.health.post_start_hook("rbac/bootstrap-roles")
        if config.enable_bootstrap_token_auth:
            bootstrap_tokens = BootstrapTokenAuthenticator(reads, reactor)
            bootstrap_tokens.setServiceParent(self)     # its informer is ready before /readyz
            self.tokens.add(bootstrap_tokens)
        self.tokens.add(ServiceAccountTokenAuthenticator(
            self.catalog, self.pki.sa_public_keys_pem, config.service_account_issuer,
            config.audiences, reactor))
        metrics = self.metrics
        x509 = X509Authenticator(
            reactor, observe_lifetime=metrics.observe_certificate_lifetime if metrics else None)
        authenticator = UnionAuthenticator(
            [x509, BearerAuthenticator(self.tokens)],
            anonymous=config.anonymous_auth)
        offload = Offload(reactor)
        offload.setServiceParent(self)
        resource = APIServer(
            self.catalog, authenticator, authorizer, self.health,
            DiscoveryRoutes(self.catalog, offload, config.upstream_group_names),
            InflightLimiter(config.max_requests_inflight, config.max_mutating_requests_inflight),
            ServerSettings(config.min_request_timeout, config.feature_gates, offload,
                           config.upstream_group_names),
            streams=self._stream_forwarder(), metrics=metrics,
            auditor=self.auditor,
        )
        self.site = APISite(resource, reactor=reactor)
        Compactor(self.store, reactor, config.etcd_compaction_interval).setServiceParent(self)
        if metrics is not None:
            metrics.folding(reactor).setServiceParent(self)
        env = ControllerEnvironment(self.catalog, reactor, self.pki, config, authorizer)
        names = self.controller_names
        # The scheduler runs with the controllers, in the holder of their Lease.
        self.controllers = ElectedControllers.from_config(
            self.components.builder(self.catalog, lambda: build_controllers(names, env)),
            self.catalog, reactor, config)
        self.components.follow(self.controllers)
        self.controllers.setServiceParent(self)
        self._metrics_scraper().setServiceParent(self)
        options = server_tls_options(self.pki.serving_cert_pem, self.pki.serving_key_pem,
                                     self.pki.client_ca_pems)
        try:
            self.port = listen_tls(reactor, config.secure_port, self.site, options,
                                   backlog=LISTEN_BACKLOG, interface=config.bind_address)
            self.scheduler_port = self._listen_health(
                config.scheduler_port, options, self.components.scheduler_health,
                self.components.scheduler_registry)
            self.controller_manager_port = self._listen_health(
                config.controller_manager_port, options,
                self.components.controller_manager_health,
                self.components.controller_manager_registry)
        except CannotListenError as e:
            for port in (self.port, self.scheduler_port):
                if port is not None:
                    port.stopListening()
            self.store.close()
            raise fail(f"cannot listen on {e.interface or config.bind_address}:{e.port}: "
                       f"{e.socketError}") from None
        super().privilegedStartService()

    def _listen_health(self, port, options, health, registry):
        """A component's health (and metrics) listener on C{port} (none for 0)."""
        if not port:
            return None
        return listen_health(self.reactor, port, self.config.bind_address, options, health,
                             registry)

    def _stream_forwarder(self):
        """C{nodes/proxy} and C{pods/log}, reaching orchlets as the API server's orchlet user."""
        pki = self.pki
        return StreamForwarder(
            orchlet_agent(self.reactor, pki.ca_pem, pki.orchlet_client_cert_pem,
                          pki.orchlet_client_key_pem),
            plain_agent(self.reactor, pki.ca_pem))

    def _metrics_scraper(self):
        """The nodes' resource metrics, read with the credentials C{nodes/proxy} uses."""
        pki = self.pki
        # One kept connection per node (a scrape every 15 s), closed at stop.
        client = OrchletClient.from_pems(self.reactor, pki.ca_pem, pki.orchlet_client_cert_pem,
                                         pki.orchlet_client_key_pem)
        return MetricsScraper.for_catalog(self.reactor, self.catalog, client,
                                          self.resource_metrics)

    def _storage_types(self):
        """C{(key prefix, resource label)} of the served kinds, for the storage latency."""
        if self.catalog is None:
            return ()
        return [(info.key_prefix(), resource_label(info))
                for info in self.catalog.served_kinds if info.stored]

    def _encryption_config(self):
        """The checked C{--encryption-provider-config}, or None; logs what it encrypts."""
        path = self.config.encryption_provider_config
        if path is None:
            return None
        try:
            encryption = load_encryption_config(path)
        except EncryptionConfigError as e:
            raise fail(f"--encryption-provider-config: {e}") from None
        for line in encryption.describe():
            self.log.info("Encryption at rest: {rule}", rule=line)
        for line in encryption.warnings:
            self.log.warn("--encryption-provider-config: {warning}", warning=line)
        return encryption

    def _open_store(self):
        store = self._open_backend()
        metrics = self.metrics
        if metrics is not None:
            if isinstance(store, LevelDBStore):
                store.batch_sizes = metrics.batch_sizes.labels()
            store = TimedStore(store, metrics.storage_latency, self._storage_types)
        if self.encryption is None:
            return store
        return TransformingStore(store, self.encryption.transformer_for)

    def _open_backend(self):
        config = self.config
        if config.storage_backend == "etcd":
            try:
                return EtcdStore(config.etcd_servers, self.reactor, prefix=config.etcd_prefix,
                                 ca=config.etcd_cafile, cert=config.etcd_certfile,
                                 key=config.etcd_keyfile)
            except Exception as e:
                raise fail(f"cannot use etcd at {', '.join(config.etcd_servers)}: {e}") from None
        path = os.path.join(self.config.data_dir, "store")
        # Again: twistd applies its --umask between make_service and here,
        # and LevelDB creates its files with the process umask.
        restrict_umask()
        try:
            return LevelDBStore(path, reactor=self.reactor)
        except Exception as e:
            raise fail(f"cannot open the store in {path}: {e}") from None

    def startService(self):
        if self.port is None:
            # Runners other than twistd (e.g. "twist") skip the privileged step.
            self.privilegedStartService()
        super().startService()
        port = self.port.getHost().port
        self.url = server_url(self.config.bind_address, port)
        try:
            self.pki.write_admin_orchconfig(port, self.config.bind_address)
        except (OSError, PKIError, OrchConfigError) as e:
            self.log.error("Cannot write the admin orchconfig: {error}", error=e)
        self.log.info("API server listening on {url}", url=self.url)
        self._log_check.start()
        d = Deferred.fromCoroutine(self._bootstrap())
        d.addErrback(lambda f: self.log.failure("Start-up steps failed", f))
        d.chainDeferred(self.ready)

    async def _bootstrap(self):
        """The watch caches, the system namespaces, then the controllers' first sync."""
        await self.catalog.start_caches()
        custom_resources = custom_resource_kinds(self.catalog)
        if custom_resources is not None:
            # Every established CustomResourceDefinition is served before /readyz.
            await custom_resources.start()
        self._caches_hook.finish()
        namespaces = self.catalog.resource("", "namespaces")
        ctx = self.catalog.system_context()
        for name in SYSTEM_NAMESPACES:
            try:
                await namespaces.create(ctx, {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": name}})
                self.log.info("Created namespace {name}", name=name)
            except StatusError as e:
                if e.code != 409:
                    raise
        self._namespaces_hook.finish()
        # The Lease lives in orch-system, which now exists. The controllers'
        # C{started} fires once this process leads with them synced, or
        # follows a leader it has seen holding a valid Lease.
        self.controllers.campaign()
        try:
            await ensure_cluster_info(self.catalog, self.url, self.pki.server_ca_pem)
        except StatusError as e:
            self.log.error("Cannot write cluster-info: {error}", error=e)
        try:
            await ensure_default_storage_class(self.catalog)
        except StatusError as e:
            self.log.error("Cannot write the default StorageClass: {error}", error=e)
        policy = Deferred.fromCoroutine(self._ensure_policy())
        started = [c.started for c in self if getattr(c, "started", None) is not None]
        await DeferredList(started, consumeErrors=True)
        self._controllers_hook.finish()
        await policy

    async def _ensure_policy(self):
        """
        Create or repair the bootstrap RBAC policy; until it is complete,
        /readyz reports the C{rbac/bootstrap-roles} hook as not done.
        """
        if self.catalog.resource(RBAC, "clusterroles") is None:
            self._policy_hook.finish()      # the RBAC group is switched off
            return
        while not self.health.shutting_down:
            report = await reconcile_bootstrap_policy(self.catalog)
            if report.ok:
                self._policy_hook.finish()
                return
            await deferLater(self.reactor, POLICY_RETRY, lambda: None)

    async def _stop(self):
        self.health.shutting_down = True
        self.components.shutting_down()
        delay = self.config.shutdown_delay_duration
        if delay > 0:
            self.log.info("Shutting down in {delay}s; /readyz now fails", delay=delay)
            await deferLater(self.reactor, delay, lambda: None)
        self._log_check.stop()
        for port in (self.port, self.scheduler_port, self.controller_manager_port):
            if port is not None:
                await port.stopListening()
        await super().stopService()
        if self.catalog is not None:
            custom_resources = custom_resource_kinds(self.catalog)
            if custom_resources is not None:
                custom_resources.stop()
            self.catalog.stop_caches()
        if self.store is not None:
            await self.store.close()
        for backend in reversed(getattr(self, "audit_backends", ())):
            await backend.stopService()

    def stopService(self):
        return Deferred.fromCoroutine(self._stop())
