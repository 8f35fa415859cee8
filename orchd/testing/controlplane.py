# -*- test-case-name: tests.testing.test_controlplane -*-
"""
L{ControlPlane}: a real orchd API server inside a test process.

It is the app's control plane (L{orchd.testing.plane.TestPlane}) on an
in-memory store, a TLS listener on a free port, the process's shared key
material (L{orchd.testing.keys}), no node agent and, unless asked, no
controllers. Two ways to run it:

 - blocking, from any thread but the reactor's: C{with ControlPlane() as cp}
   or C{cp.start()}/C{cp.stop()}; the global reactor then runs in a daemon
   thread (L{orchd.testing.reactorthread}) shared by every control plane;
   methods that talk to the server block and return their result;
 - under trial, C{cp = await orchd.testing.start(self)} on the test's
   reactor; the same methods then return Deferreds to await.

Controller names are those of C{--controllers}: C{"namespace"} (deletes a
namespace's contents) and C{"garbagecollector"} (owner references) are the
ones most tests want; C{("*",)} runs the default set.
"""

import base64
import os
import random
import shutil
import string
import tempfile

from twisted.application.service import MultiService
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import Clock, deferLater

from orchd.api.errors import StatusError
from orchd.app.config import load_config
from orchd.app.orchletsettings import simulated_node_settings
from orchd.client.orchconfig import ADMIN_USER
from orchd.testing import keys, reactorthread
from orchd.testing.clock import ClockedReactor
from orchd.testing.faults import Faults
from orchd.testing.plane import TestPlane
from orchd.testing.requests import requests_of

_SUFFIX = string.ascii_lowercase + string.digits
#: Seconds between two reads of L{ControlPlane.wait_for}.
POLL = 0.01


def _flag_text(value):
    """A mapping as C{k=v,...} (flags' syntax); text as given."""
    if isinstance(value, dict):
        return ",".join(f"{key}={str(item).lower() if isinstance(item, bool) else item}"
                        for key, item in value.items())
    return value


def _group_resource(kind_or_path):
    """C{"deployments.apps"}, C{"apps/deployments"} or C{"pods"} as C{(group, resource)}."""
    if "/" in kind_or_path:
        group, _, resource = kind_or_path.rpartition("/")
        return group, resource
    resource, _, group = kind_or_path.partition(".")
    return group, resource


def _condition_true(condition_type):
    def check(obj):
        for condition in (obj.get("status") or {}).get("conditions") or ():
            if condition.get("type") == condition_type:
                return condition.get("status") == "True"
        return False
    return check


class ControlPlane:
    """
    A real control plane for tests; see the module docstring.

    @param crds: files or folders of CustomResourceDefinition YAML installed at start.
    @param controllers: None for none, or C{--controllers} names (C{("*",)} for all).
    @param feature_gates: C{{name: bool}} or C{--feature-gates} text.
    @param runtime_config: C{{group/version: bool}} or C{--runtime-config} text.
    @param upstream_group_names: serve the C{*.k8s.io} spelling too (kopf needs it).
    @param simulated_nodes: how many simulated nodes to run (0: no node at all).
    @param clock: True to run timers with a delay (controllers, token expiry,
        grace periods) on a L{Clock} that L{advance} moves.
    @param audit: record the requests served (L{requests}).
    """

    def __init__(self, crds=(), controllers=None, feature_gates=None, runtime_config=None,
                 upstream_group_names=True, simulated_nodes=0, clock=None, audit=True):
        self.crds = tuple(crds)
        self.options = {
            "controllers": ",".join(controllers) if controllers else "",
            "feature-gates": _flag_text(feature_gates) if feature_gates else None,
            "runtime-config": _flag_text(runtime_config) if runtime_config else None,
            "upstream-group-names": "true" if upstream_group_names else "false",
            "simulated-nodes": str(simulated_nodes),
        }
        self.clock = Clock() if clock else None
        self.audit = audit
        self.data_dir = None
        self.plane = None
        self.url = None
        self.ca_path = None
        self.kubeconfig = None
        self._top = None
        self._faults = None
        self._reactor = None
        self._threaded = False

    # Starting and stopping.

    def start(self):
        """Start in the global reactor thread and wait until it serves; returns self."""
        self._threaded = True
        reactorthread.call(lambda: ensureDeferred(self._start()))
        return self

    def stop(self):
        """Stop and remove its files (blocking); stopping twice does nothing."""
        if self._top is None:
            return
        reactorthread.call(lambda: ensureDeferred(self._stop()))

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()
        return False

    async def _start(self, reactor=None):
        if reactor is None:
            from twisted.internet import reactor
        self._reactor = reactor
        self.data_dir = tempfile.mkdtemp(prefix="orchd-test-")
        keys.seed(self.data_dir)
        flags = dict(self.options, **{
            "data-dir": self.data_dir, "secure-port": "0", "no-orchlet": "true",
            "orchlet-port": "0", "scheduler-port": "0", "controller-manager-port": "0",
            "leader-elect": "false", "enable-metrics": "false"})
        config = load_config(flags)
        plane_reactor = reactor
        if self.clock is not None:
            self.clock.rightNow = reactor.seconds()
            plane_reactor = ClockedReactor(reactor, self.clock)
        self._top = MultiService()
        self.plane = TestPlane(config, plane_reactor, audit=self.audit)
        self.plane.setServiceParent(self._top)
        simulated = simulated_node_settings(config)
        if simulated is not None:
            # Imported only when asked: the node agent's modules are a tenth of a second.
            from orchd.orchlet.simnodes import SimulatedNodes
            SimulatedNodes(simulated, plane_reactor, self.plane).setServiceParent(self._top)
        self._top.privilegedStartService()
        self._top.startService()
        try:
            await self.plane.ready
        except BaseException:
            await self._stop()
            raise
        self.url = self.plane.url
        self.ca_path = os.path.join(self.data_dir, "pki", "ca.crt")
        self.kubeconfig = self.plane.pki.admin_orchconfig_path
        self._admin = self._write_client(ADMIN_USER, ["system:masters"])
        if self.crds:
            await self._install_crds(self.crds)
        return self

    async def _stop(self):
        top, self._top = self._top, None
        if top is None:
            return
        await top.stopService()
        self.plane.drop_connections()
        # Aborted connections are gone after the reactor's next turn.
        await deferLater(self._reactor, 0, lambda: None)
        await deferLater(self._reactor, 0, lambda: None)
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def _run(self, function, *args):
        """
        Run C{function} (a coroutine function) on the reactor: blocking and
        returning its result from another thread, a Deferred on the reactor's.
        """
        if self._top is None:
            raise RuntimeError("the control plane is not running")
        if not self._threaded or reactorthread.on_reactor_thread():
            return Deferred.fromCoroutine(function(*args))
        return reactorthread.call(lambda: Deferred.fromCoroutine(function(*args)))

    # Credentials.

    def _write_client(self, user, groups):
        """Issue a client certificate for C{user} and write it; C{(cert path, key path)}."""
        cert_pem, key_pem = self.plane.pki.issue_client_certificate(user, list(groups))
        directory = tempfile.mkdtemp(prefix="user-", dir=self.data_dir)
        paths = os.path.join(directory, "tls.crt"), os.path.join(directory, "tls.key")
        for path, data in zip(paths, (cert_pem, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        return paths

    def client_configuration(self, user=None):
        """A C{kubernetes.client.Configuration} for the admin (or C{user}'s cert paths)."""
        import kubernetes
        cert, key = user or self._admin
        configuration = kubernetes.client.Configuration()
        configuration.host = self.url
        configuration.ssl_ca_cert = self.ca_path
        configuration.cert_file = cert
        configuration.key_file = key
        return configuration

    def api_client(self):
        """An official-client C{ApiClient} authenticated as the admin (C{system:masters})."""
        import kubernetes
        return kubernetes.client.ApiClient(self.client_configuration())

    def add_user(self, name, groups=()):
        """An C{ApiClient} authenticated as user C{name} in C{groups} (a client certificate)."""
        import kubernetes
        return kubernetes.client.ApiClient(
            self.client_configuration(self._write_client(name, groups)))

    def kopf_login(self):
        """C{kopf.ConnectionInfo} for C{@kopf.on.login}: the admin's credentials."""
        import kopf
        with open(self.ca_path, "rb") as f:
            ca = f.read()
        cert, key = self._admin
        with open(cert, "rb") as f:
            cert_pem = f.read()
        with open(key, "rb") as f:
            key_pem = f.read()
        return kopf.ConnectionInfo(server=self.url, ca_data=ca, certificate_data=cert_pem,
                                   private_key_data=key_pem, default_namespace="default")

    def webhook_certificate(self, host="127.0.0.1"):
        """C{(cert path, key path, CA path)} a local webhook server at C{host} can serve with."""
        cert_pem, key_pem = self.plane.pki.issue_serving_certificate([host])
        directory = tempfile.mkdtemp(prefix="webhook-", dir=self.data_dir)
        paths = os.path.join(directory, "tls.crt"), os.path.join(directory, "tls.key")
        for path, data in zip(paths, (cert_pem, key_pem)):
            with open(path, "wb") as f:
                f.write(data)
        return paths[0], paths[1], self.ca_path

    # Objects.

    def _context(self, namespace=""):
        return self.plane.catalog.system_context(namespace)

    def create_namespace(self, prefix="test-"):
        """Create a namespace named C{prefix} and five random characters; its name."""
        return self._run(self._create_namespace, prefix)

    async def _create_namespace(self, prefix):
        namespaces = self.plane.catalog.resource("", "namespaces")
        while True:
            name = prefix + "".join(random.choices(_SUFFIX, k=5))
            try:
                await namespaces.create(self._context(), {
                    "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
                return name
            except StatusError as e:
                if e.code != 409:
                    raise

    def delete_namespace(self, name):
        """
        Delete a namespace; its contents go only with the C{namespace} controller
        (without it the namespace stays C{Terminating}). A missing one is ignored.
        """
        return self._run(self._delete_namespace, name)

    async def _delete_namespace(self, name):
        try:
            await self.plane.catalog.resource("", "namespaces").delete(self._context(), name)
        except StatusError as e:
            if e.code != 404:
                raise

    def install_crds(self, paths):
        """
        Create the CustomResourceDefinitions of YAML files or folders C{paths};
        returns once each is Established and served.

        @raise FileNotFoundError: for a path that does not exist (before anything is created).
        """
        return self._run(self._install_crds, paths)

    async def _install_crds(self, paths):
        from orchd.testing.manifests import load_manifests
        definitions = [doc for doc in load_manifests(paths)
                       if doc.get("kind") == "CustomResourceDefinition"]
        resource = self.plane.catalog.resource("apiextensions.orch.io", "customresourcedefinitions")
        ctx = self._context()
        for definition in definitions:
            definition = dict(definition, apiVersion="apiextensions.orch.io/v1")
            await resource.create(ctx, definition)
        for definition in definitions:
            spec = definition["spec"]
            await self._wait_for(("apiextensions.orch.io", "customresourcedefinitions"),
                                 definition["metadata"]["name"], _condition_true("Established"),
                                 None, 10)
            for version in spec.get("versions") or ():
                if not version.get("served", True):
                    continue
                await self._poll(lambda v=version: self.plane.catalog.lookup(
                    spec["group"], v["name"], spec["names"]["plural"]) is not None, 10,
                    f"{definition['metadata']['name']} {version['name']} to be served")
        return [definition["metadata"]["name"] for definition in definitions]

    def install_webhooks(self, configurations, url):
        """
        Create Mutating/ValidatingWebhookConfigurations (dicts, or YAML paths)
        with every webhook's client pointed at C{url} (plus the path its
        service named), trusting this control plane's CA; their names.
        """
        return self._run(self._install_webhooks, configurations, url)

    async def _install_webhooks(self, configurations, url):
        from orchd.testing.manifests import load_manifests
        documents = [c for c in configurations if isinstance(c, dict)]
        paths = [c for c in configurations if not isinstance(c, dict)]
        documents += load_manifests(paths)
        with open(self.ca_path, "rb") as f:
            bundle = base64.b64encode(f.read()).decode("ascii")
        names = []
        for document in documents:
            kind = document.get("kind")
            resource = {"MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
                        "ValidatingWebhookConfiguration": "validatingwebhookconfigurations"}.get(
                            kind)
            if resource is None:
                raise ValueError(f"not a webhook configuration: kind {kind!r}")
            document = dict(document, apiVersion="admissionregistration.orch.io/v1")
            webhooks = []
            for webhook in document.get("webhooks") or ():
                service = (webhook.get("clientConfig") or {}).get("service") or {}
                path = service.get("path") or ""
                webhooks.append(dict(webhook, clientConfig={
                    "url": url.rstrip("/") + path if path else url, "caBundle": bundle}))
            document["webhooks"] = webhooks
            provider = self.plane.catalog.resource("admissionregistration.orch.io", resource)
            created = await provider.create(self._context(), document)
            names.append(created["metadata"]["name"])
        return names

    # Waiting and time.

    def wait_for(self, kind_or_path, name, condition, namespace=None, timeout=10):
        """
        Wait until object C{name} satisfies C{condition}: a callable given
        the object, or a condition type that must be C{"True"}; the object.

        @param kind_or_path: C{"pods"}, C{"deployments.apps"} or C{"apps/deployments"}.
        @raise TimeoutError: after C{timeout} seconds (of the real clock).
        """
        check = _condition_true(condition) if isinstance(condition, str) else condition
        return self._run(self._wait_for, _group_resource(kind_or_path), name, check,
                         namespace, timeout)

    async def _wait_for(self, group_resource, name, check, namespace, timeout):
        provider = self.plane.catalog.resource(*group_resource)
        if provider is None:
            raise ValueError(f"{'/'.join(group_resource)} is not served")
        ctx = self._context(namespace or "")
        seen = []

        async def test():
            try:
                obj = await provider.get(ctx, name)
            except StatusError as e:
                if e.code == 404:
                    return False
                raise
            seen[:] = [obj]
            return bool(check(obj))
        await self._poll(test, timeout, f"{'/'.join(group_resource)} {name}")
        return seen[0]

    async def _poll(self, test, timeout, what):
        reactor = self._reactor
        deadline = reactor.seconds() + timeout
        while True:
            result = test()
            if isinstance(result, Deferred) or hasattr(result, "__await__"):
                result = await result
            if result:
                return
            if reactor.seconds() >= deadline:
                raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
            await deferLater(reactor, POLL, lambda: None)

    def advance(self, seconds):
        """Move the test clock (C{clock=True}) by C{seconds}: due timers fire."""
        if self.clock is None:
            raise RuntimeError("advance needs ControlPlane(clock=True)")
        return self._run(self._advance, seconds)

    async def _advance(self, seconds):
        self.clock.advance(seconds)
        # Work the timers scheduled without delay runs on the real reactor.
        await deferLater(self._reactor, 0, lambda: None)

    # Requests and faults.

    @property
    def requests(self):
        """The finished requests, in order (L{orchd.testing.requests.Request})."""
        if self.plane is None or self.plane.sink is None:
            return []
        return requests_of(list(self.plane.sink.events))

    def clear_requests(self):
        """Forget the requests recorded so far."""
        if self.plane is not None and self.plane.sink is not None:
            self.plane.sink.events.clear()

    def fail_next(self, verb, resource, code, times=1, subresource="", namespace=None,
                  name=None):
        """
        The next C{times} requests matching C{verb} and C{resource} (and
        optionally subresource, namespace, name) answer C{code} with a Status.
        """
        if self._faults is None:
            self._faults = Faults(self.plane.server)
        add = self._faults.add
        args = (verb, resource, code, times, subresource, namespace, name)
        if not self._threaded or reactorthread.on_reactor_thread():
            add(*args)
        else:
            reactorthread.call(add, *args)


async def start(testcase, **options):
    """
    Start a L{ControlPlane} on the running (trial) reactor; its stop is
    registered with C{testcase.addCleanup}. Returns the started control plane.
    """
    from twisted.internet import reactor
    cp = ControlPlane(**options)
    testcase.addCleanup(lambda: ensureDeferred(cp._stop()))
    await cp._start(reactor)
    return cp
