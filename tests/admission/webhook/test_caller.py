"""Where the HTTPS caller sends a review: a url, or a Service through its Endpoints."""

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.admission.webhook.caller import WebhookCaller, _BoundedBody
from orchd.admission.webhook.review import CallError

SERVICE = {"spec": {"ports": [{"name": "metrics", "port": 80},
                              {"name": "https", "port": 443, "targetPort": 8443}]}}
ENDPOINTS = {"subsets": [{"addresses": [{"ip": "10.0.0.5"}],
                          "ports": [{"name": "metrics", "port": 9090},
                                    {"name": "https", "port": 8443}]},
                         {"notReadyAddresses": [{"ip": "10.0.0.6"}],
                          "ports": [{"name": "https", "port": 8443}]}]}


def caller(objects):
    async def lookup(group, resource, namespace, name):
        return objects.get((resource, namespace, name))

    async def list_objects(group, resource, namespace):
        return [obj for (kind, where, _), obj in objects.items()
                if (kind, where) == (resource, namespace)]
    return WebhookCaller(Clock(), lookup, list_objects=list_objects)


def resolve(objects, service):
    d = Deferred.fromCoroutine(caller(objects)._service_url(service))
    results = []
    d.addBoth(results.append)
    return results[0]


class ServiceURLTests(SynchronousTestCase):
    def test_ready_endpoint(self):
        """The service port's endpoint port on a ready address, verified as <svc>.<ns>.svc."""
        found = resolve({("services", "ns", "hook"): SERVICE,
                         ("endpoints", "ns", "hook"): ENDPOINTS},
                        {"namespace": "ns", "name": "hook", "path": "/validate", "port": 443})
        self.assertEqual(found, ("https://10.0.0.5:8443/validate", "hook.ns.svc"))

    def test_endpoint_slices(self):
        """Without Endpoints the Service's slices are read: ready (or unset) endpoints only."""
        piece = {"metadata": {"labels": {"orch.io/service-name": "hook"}},
                 "ports": [{"name": "https", "port": 9443}],
                 "endpoints": [{"addresses": ["10.0.0.7"], "conditions": {"ready": False}},
                               {"addresses": ["10.0.0.8"]}]}
        other = dict(piece, metadata={"labels": {"orch.io/service-name": "other"}})
        found = resolve({("services", "ns", "hook"): SERVICE,
                         ("endpointslices", "ns", "hook-abc"): piece,
                         ("endpointslices", "ns", "other-abc"): other},
                        {"namespace": "ns", "name": "hook", "port": 443})
        self.assertEqual(found, ("https://10.0.0.8:9443/", "hook.ns.svc"))

    def test_failures(self):
        """A missing Service, a port it lacks or no ready endpoint is a call error."""
        for objects, port, message in (
                ({}, 443, 'service "ns/hook" not found'),
                ({("services", "ns", "hook"): SERVICE}, 8080, 'service "ns/hook" has no port 8080'),
                ({("services", "ns", "hook"): SERVICE}, 443,
                 'no endpoints available for service "hook"')):
            failure = resolve(objects, {"namespace": "ns", "name": "hook", "port": port})
            self.assertIsInstance(failure.value, CallError)
            self.assertIn(message, str(failure.value))


class FakeTransport:
    stopped = False

    def stopProducing(self):
        self.stopped = True


class BoundedBodyTests(SynchronousTestCase):
    def test_too_large(self):
        """An answer beyond the limit fails the call and stops reading."""
        done = Deferred()
        body = _BoundedBody(done, 10)
        body.transport = FakeTransport()
        body.dataReceived(b"x" * 6)
        body.dataReceived(b"x" * 6)
        self.assertTrue(body.transport.stopped)
        self.assertIsInstance(self.failureResultOf(done).value, CallError)
