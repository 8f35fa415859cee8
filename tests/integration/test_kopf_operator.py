"""
A real kopf operator (L{tests.integration.widget_operator}) against a running
orchd with C{--upstream-group-names}: it finds its resource through
discovery, writes status through the status subresource, posts Events, and
releases its finalizer when a Widget is deleted. Skipped without kopf.
"""

import threading
import time

import yaml
from twisted.internet import reactor
from twisted.trial.unittest import SkipTest, TestCase
from twisted.web.client import HTTPConnectionPool

from orchd.client.connect import client_from_orchconfig
from orchd.testing import start
from tests.integration.support import call, sleep

try:
    import kopf
except ImportError:     # kopf is in the test extra
    kopf = None
else:
    from tests.integration.widget_operator import (
        GROUP, PLURAL, VERSION, WIDGET_CRD, operator_settings, widget_operator,
    )

FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"

#: kopf's cluster-wide peering resource, as its documentation installs it (peering.yaml).
PEERING_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "clusterkopfpeerings.kopf.dev"},
    "spec": {
        "scope": "Cluster",
        "group": "kopf.dev",
        "names": {"kind": "ClusterKopfPeering", "plural": "clusterkopfpeerings",
                  "singular": "clusterkopfpeering"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}},
        }],
    },
}


class KopfOperatorTests(TestCase):
    """kopf runs an operator on orchd: status, finalizer, events, namespaces, peering."""

    timeout = 120

    async def setUp(self):
        if kopf is None:
            raise SkipTest("kopf is not installed")
        # orchd.testing's control plane, upstream group names on by default.
        self.cp = await start(self)
        pool = HTTPConnectionPool(reactor, persistent=True)
        self.addCleanup(pool.closeCachedConnections)
        client, _ = client_from_orchconfig(self.cp.kubeconfig, reactor, pool)
        self.call = lambda *args, **kwargs: call(client, self.cp.url, *args, **kwargs)
        self.seen = []

    async def wait_for(self, what, check, timeout=30):
        """Poll C{check()} (a coroutine function) until it returns a true value."""
        deadline = time.monotonic() + timeout
        while True:
            result = await check()
            if result:
                return result
            if time.monotonic() > deadline:
                self.fail(f"timed out waiting for {what}")
            await sleep(0.1)

    async def install_crd(self, definition=None):
        """Install the Widget CRD (or C{definition}) as its YAML file; returns once it is served."""
        path = self.mktemp() + ".yaml"
        with open(path, "w") as f:
            yaml.safe_dump(definition or WIDGET_CRD, f)
        await self.cp.install_crds([path])

    async def start_operator(self, **scope):
        """
        Run the operator in a thread of its own, as C{kopf run --standalone -A}
        does, or with the C{kopf.run} arguments in C{scope} instead.
        """
        stop, ready = threading.Event(), threading.Event()
        errors = []
        scope = {"standalone": True, "clusterwide": True, **scope}

        def run():
            try:
                kopf.run(registry=widget_operator(self.cp.kubeconfig, self.seen),
                         settings=operator_settings(), stop_flag=stop, ready_flag=ready, **scope)
            except BaseException as error:   # reported by the test, not lost in the thread
                errors.append(error)

        thread = threading.Thread(target=run, name="kopf", daemon=True)
        thread.start()

        async def stopped():
            stop.set()
            while thread.is_alive():
                await sleep(0.1)
            self.assertEqual(errors, [])
        # Registered after the server's stop, so it runs first: kopf's last
        # requests still find the server.
        self.addCleanup(stopped)

        async def is_ready():
            self.assertEqual(errors, [])
            return ready.is_set()
        await self.wait_for("kopf to start", is_ready)

    async def touch_crd(self, count):
        """Change a label of the Widget CRD: a MODIFIED event for kopf's CRD watch."""
        code, body = await self.call(
            "PATCH", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{PLURAL}.{GROUP}",
            {"metadata": {"labels": {"touched": str(count)}}},
            headers={b"content-type": [b"application/merge-patch+json"]})
        self.assertEqual(code, 200, body)
        return code

    def widget_path(self, name=""):
        path = f"/apis/{GROUP}/{VERSION}/namespaces/default/{PLURAL}"
        return f"{path}/{name}" if name else path

    async def widget(self, name):
        code, body = await self.call("GET", self.widget_path(name))
        return body if code == 200 else None

    async def test_operator_lifecycle(self):
        """
        kopf finds a CRD installed after it started, writes status on create and
        resize, posts an Event, and its finalizer holds a delete until handled.

        kopf learns of new CRDs by watching C{apiextensions.k8s.io} by that
        name: without C{--upstream-group-names} it never sees the Widgets.
        """
        await self.start_operator()
        await self.install_crd()
        await self.widget_lifecycle()

    async def test_namespace_pattern(self):
        """With a namespace glob, kopf watches Namespaces and serves the Widgets of those matching."""
        await self.install_crd()
        await self.start_operator(clusterwide=False, namespaces=["def*"])
        await self.widget_lifecycle()

    async def test_peering(self):
        """Without --standalone, kopf keeps its presence in its ClusterKopfPeering's status."""
        await self.install_crd(PEERING_CRD)
        await self.install_crd()
        peering = "/apis/kopf.dev/v1/clusterkopfpeerings/default"
        code, body = await self.call("POST", peering.rsplit("/", 1)[0], {
            "apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering",
            "metadata": {"name": "default"}})
        self.assertEqual(code, 201, body)
        await self.start_operator(standalone=False, peering_name="default")

        async def present():
            code, body = await self.call("GET", peering)
            self.assertEqual(code, 200, body)
            return body.get("status")
        [peer] = (await self.wait_for("kopf in the peering", present)).values()
        self.assertEqual(peer["lifetime"], 60)
        await self.widget_lifecycle()

    async def widget_lifecycle(self):
        """Create, resize and delete a Widget, and see the operator's work after each step."""
        code, body = await self.call("POST", self.widget_path(), {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Widget",
            "metadata": {"name": "w1"}, "spec": {"size": 3}})
        self.assertEqual(code, 201, body)

        touched = []

        async def handled():
            widget = await self.widget("w1")
            if widget.get("status", {}).get("phase") == "Ready":
                return widget
            # kopf skips the CRDs its CRD watch lists when it starts (it has
            # just read discovery): a CRD created between the two is noticed
            # at its next change, so change it (once a second) until kopf acts.
            if len(touched) < time.monotonic() - started:
                touched.append(await self.touch_crd(len(touched)))
            return None
        started = time.monotonic()
        widget = await self.wait_for("status written by the create handler", handled)
        self.assertEqual(widget["status"]["observedSize"], 3)
        self.assertIn(FINALIZER, widget["metadata"]["finalizers"])
        self.assertEqual(widget["metadata"]["generation"], 1)

        async def posted():
            code, events = await self.call("GET", "/api/v1/namespaces/default/events")
            self.assertEqual(code, 200, events)
            return [e for e in events["items"] if e["involvedObject"].get("name") == "w1"]
        events = await self.wait_for("kopf's Event on the Widget", posted)
        self.assertEqual((events[0]["involvedObject"]["kind"], events[0]["reason"],
                          events[0]["involvedObject"]["uid"]),
                         ("Widget", "Ready", widget["metadata"]["uid"]))

        code, body = await self.call(
            "PATCH", self.widget_path("w1"), {"spec": {"size": 5}},
            headers={b"content-type": [b"application/merge-patch+json"]})
        self.assertEqual(code, 200, body)

        async def resized():
            widget = await self.widget("w1")
            return widget["status"].get("observedSize") == 5
        await self.wait_for("status written by the resize handler", resized)

        code, body = await self.call("DELETE", self.widget_path("w1"))
        self.assertIn(code, (200, 202), body)

        async def gone():
            return await self.widget("w1") is None
        await self.wait_for("the Widget to go once the finalizer is removed", gone)
        self.assertEqual(self.seen, [("create", "w1"), ("resize", "w1"), ("delete", "w1")])
