"""
nodes/proxy and pods/log through the whole server, with a fake orchlet.

The fake is a twisted.web resource reached in memory
(L{treq.testing.RequestTraversalAgent}); the agent records every URL.
"""

from treq.testing import RequestTraversalAgent
from twisted.internet.defer import Deferred, fail
from twisted.internet.error import ConnectionDone, ConnectionRefusedError
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.http_headers import Headers
from twisted.web.resource import Resource
from zope.interface import implementer
from twisted.web.iweb import UNKNOWN_LENGTH, IAgent, IResponse

from orchd.registry.nodeproxy import node_proxy_connector
from orchd.server.proxy import StreamForwarder
from orchd.server.site import APISite
from tests.support import ADMIN, ALICE, APIHarness


class FakeOrchlet(Resource):
    isLeaf = True

    def __init__(self):
        super().__init__()
        self.seen = []

    def render(self, request):
        self.seen.append((request.method, request.uri, request.getHeader(b"authorization")))
        path = request.path.decode()
        if path == "/stats/summary":
            request.setHeader(b"content-type", b"application/json")
            return b'{"node":{"nodeName":"n1"},"pods":[]}'
        if path.startswith("/containerLogs/default/p/"):
            request.setHeader(b"content-type", b"text/plain")
            return b"line 1\nline 2\n"
        request.setResponseCode(404)
        request.setHeader(b"content-type", b"text/plain")
        return b"no such thing here"


@implementer(IAgent)
class RecordingAgent:
    def __init__(self, resource, name):
        self.agent = RequestTraversalAgent(resource)
        self.name = name
        self.urls = []

    def request(self, method, uri, headers=None, bodyProducer=None):
        self.urls.append(uri)
        return self.agent.request(method, uri, headers, bodyProducer)


@implementer(IAgent)
class RefusingAgent:
    def request(self, method, uri, headers=None, bodyProducer=None):
        return fail(ConnectionRefusedError("connection refused"))


def node(name="n1", addresses=None, port=10250):
    if addresses is None:
        addresses = [{"type": "Hostname", "address": "host-a"},
                     {"type": "InternalIP", "address": "10.0.0.1"}]
    status = {"addresses": addresses}
    if port:
        status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": port}}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": status}


def add_node(api, obj):
    """Create a node, then set its status (a create drops it)."""
    code, body, _ = api.call("POST", "/api/v1/nodes", obj)
    assert code == 201, body
    name = obj["metadata"]["name"]
    code, body, _ = api.call("PATCH", f"/api/v1/nodes/{name}/status", {"status": obj["status"]},
                             content_type=b"application/merge-patch+json")
    assert code == 200, body


def pod(name="p", containers=("c1",), node_name="n1"):
    spec = {"containers": [{"name": c, "image": "img"} for c in containers]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


class ProxyTests(SynchronousTestCase):
    def setUp(self):
        self.orchlet = FakeOrchlet()
        self.agent = RecordingAgent(self.orchlet, "orchlet")
        self.plain = RecordingAgent(self.orchlet, "plain")
        self.api = APIHarness(streams=StreamForwarder(self.agent, self.plain))
        add_node(self.api, node())

    def test_stats_summary(self):
        """The orchlet's answer comes back as it was: code, content type and body."""
        code, body, headers = self.api.call(
            "GET", "/api/v1/nodes/n1/proxy/stats/summary", headers={b"authorization": [b"x"]})
        self.assertEqual((code, body), (200, {"node": {"nodeName": "n1"}, "pods": []}))
        self.assertEqual(self.agent.urls, [b"https://10.0.0.1:10250/stats/summary"])
        # The caller's credentials stay with the API server.
        self.assertEqual(self.orchlet.seen[0][2], None)

    def test_query_and_trailing_slash(self):
        self.api.call("GET", "/api/v1/nodes/n1/proxy/pods/?a=1&b=x%20y")
        self.assertEqual(self.agent.urls, [b"https://10.0.0.1:10250/pods/?a=1&b=x%20y"])

    def test_root(self):
        self.api.call("GET", "/api/v1/nodes/n1/proxy")
        self.assertEqual(self.agent.urls, [b"https://10.0.0.1:10250/"])

    def test_backend_error_passes_through(self):
        code, body, headers = self.api.call("GET", "/api/v1/nodes/n1/proxy/nothing")
        self.assertEqual((code, body), (404, "no such thing here"))

    def test_name_port_forms(self):
        """C{n1:10250} and C{https:n1:10250} are the orchlet; another port is plain."""
        self.api.call("GET", "/api/v1/nodes/n1:10250/proxy/healthz")
        self.api.call("GET", "/api/v1/nodes/https:n1:10250/proxy/healthz")
        self.assertEqual(self.agent.urls, [b"https://10.0.0.1:10250/healthz"] * 2)
        self.api.call("GET", "/api/v1/nodes/n1:8080/proxy/x")
        self.api.call("GET", "/api/v1/nodes/https:n1:8443/proxy/x")
        self.assertEqual(self.plain.urls, [b"http://10.0.0.1:8080/x", b"https://10.0.0.1:8443/x"])

    def test_invalid_name(self):
        code, body, _ = self.api.call("GET", "/api/v1/nodes/a:b:c:d/proxy/x")
        self.assertEqual((code, body["reason"]), (400, "BadRequest"))

    def test_port_in_other_digits(self):
        """A port in digits other than ASCII's (here Arabic-Indic 12) is a 400, not a 500."""
        code, body, _ = self.api.call("GET", "/api/v1/nodes/n1:%D9%A1%D9%A2/proxy/x")
        self.assertEqual((code, body["reason"]), (400, "BadRequest"))
        self.assertEqual(self.agent.urls + self.plain.urls, [])

    def test_address_not_ascii(self):
        """A node address that is no host name is unreachable (503), not a 500."""
        add_node(self.api, node("n2", addresses=[{"type": "InternalIP", "address": "n\u00e9"}]))
        code, body, _ = self.api.call("GET", "/api/v1/nodes/n2/proxy/healthz")
        self.assertEqual((code, body["reason"]), (503, "ServiceUnavailable"))
        self.assertEqual(body["message"], "error trying to reach service: invalid host 'n\u00e9'")

    def test_not_served_without_forwarder(self):
        """A server built without a stream forwarder does not serve nodes/proxy."""
        api = APIHarness(connectors=node_proxy_connector())
        add_node(api, node())
        code, body, _ = api.call("GET", "/api/v1/nodes/n1/proxy/healthz")
        self.assertEqual((code, body["reason"]), (404, "NotFound"))

    def test_unknown_node(self):
        code, body, _ = self.api.call("GET", "/api/v1/nodes/nx/proxy/stats/summary")
        self.assertEqual((code, body["message"]), (404, 'nodes "nx" not found'))
        self.assertEqual(self.agent.urls, [])

    def test_node_without_port(self):
        add_node(self.api, node("n2", port=0))
        code, body, _ = self.api.call("GET", "/api/v1/nodes/n2/proxy/stats/summary")
        self.assertEqual(code, 400)
        self.assertIn("kubeletEndpoint", body["message"])

    def test_unreachable(self):
        """A backend that cannot be reached is 503, worded as upstream."""
        api = APIHarness(streams=StreamForwarder(RefusingAgent()))
        add_node(api, node())
        code, body, _ = api.call("GET", "/api/v1/nodes/n1/proxy/stats/summary")
        self.assertEqual((code, body["reason"]), (503, "ServiceUnavailable"))
        self.assertTrue(body["message"].startswith("error trying to reach service: "),
                        body["message"])

    def test_post_forwarded(self):
        code, _, _ = self.api.call("POST", "/api/v1/nodes/n1/proxy/stats/summary", {"a": 1})
        self.assertEqual(code, 200)
        self.assertEqual(self.orchlet.seen[-1][0], b"POST")

    def test_forbidden_without_nodes_proxy(self):
        """RBAC decides on resource nodes, subresource proxy."""
        api = APIHarness(rbac=True, streams=StreamForwarder(self.agent))
        add_node(api, node())
        api.as_user(ALICE)
        code, body, _ = api.call("GET", "/api/v1/nodes/n1/proxy/stats/summary")
        self.assertEqual(code, 403)
        self.assertIn('cannot get resource "nodes/proxy"', body["message"])
        api.as_user(ADMIN)
        api.call("POST", "/apis/rbac.authorization.orch.io/v1/clusterroles", {
            "metadata": {"name": "proxy"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["nodes/proxy"]}]})
        api.call("POST", "/apis/rbac.authorization.orch.io/v1/clusterrolebindings", {
            "metadata": {"name": "proxy"},
            "roleRef": {"apiGroup": "rbac.authorization.orch.io", "kind": "ClusterRole",
                        "name": "proxy"},
            "subjects": [{"kind": "User", "name": "alice",
                          "apiGroup": "rbac.authorization.orch.io"}]})
        api.as_user(ALICE)
        code, _, _ = api.call("GET", "/api/v1/nodes/n1/proxy/stats/summary")
        self.assertEqual(code, 200)


class PodLogTests(SynchronousTestCase):
    def setUp(self):
        self.orchlet = FakeOrchlet()
        self.agent = RecordingAgent(self.orchlet, "orchlet")
        self.api = APIHarness(streams=StreamForwarder(self.agent))
        add_node(self.api, node())

    def create(self, obj):
        code, body, _ = self.api.call("POST", "/api/v1/namespaces/default/pods", obj)
        self.assertEqual(code, 201, body)

    def test_only_container(self):
        self.create(pod())
        code, body, headers = self.api.call(
            "GET", "/api/v1/namespaces/default/pods/p/log?tailLines=5&follow=true&x=1")
        self.assertEqual((code, body), (200, "line 1\nline 2\n"))
        self.assertEqual(headers.getRawHeaders(b"content-type"), [b"text/plain"])
        self.assertEqual(self.agent.urls,
                         [b"https://10.0.0.1:10250/containerLogs/default/p/c1"
                          b"?follow=true&tailLines=5"])

    def test_named_container(self):
        self.create(pod(containers=("a", "b")))
        code, _, _ = self.api.call("GET", "/api/v1/namespaces/default/pods/p/log?container=b"
                                   "&timestamps=true&limitBytes=10&previous=false")
        self.assertEqual(code, 200)
        self.assertEqual(self.agent.urls,
                         [b"https://10.0.0.1:10250/containerLogs/default/p/b"
                          b"?timestamps=true&limitBytes=10"])

    def test_log_flags_follow_upstream(self):
        """follow, previous and timestamps are true unless 0 or false, a bare name too."""
        self.create(pod())
        for query, passed in (("follow&previous=0&timestamps=FALSE", b"?follow=true"),
                              ("follow=yes&timestamps&previous=False",
                               b"?follow=true&timestamps=true"),
                              ("previous=True&follow=false", b"?previous=true")):
            del self.agent.urls[:]
            code, _, _ = self.api.call("GET", "/api/v1/namespaces/default/pods/p/log?" + query)
            self.assertEqual(code, 200, query)
            self.assertEqual(self.agent.urls,
                             [b"https://10.0.0.1:10250/containerLogs/default/p/c1" + passed])

    def test_several_containers(self):
        self.create(pod(containers=("a", "b")))
        code, body, _ = self.api.call("GET", "/api/v1/namespaces/default/pods/p/log")
        self.assertEqual((code, body["reason"]), (400, "BadRequest"))
        self.assertEqual(body["message"],
                         "a container name must be specified for pod p, choose one of: [a b]")

    def test_unknown_container(self):
        self.create(pod())
        code, body, _ = self.api.call("GET", "/api/v1/namespaces/default/pods/p/log?container=z")
        self.assertEqual((code, body["message"]), (400, "container z is not valid for pod p"))

    def test_not_bound(self):
        self.create(pod(node_name=None))
        code, body, _ = self.api.call("GET", "/api/v1/namespaces/default/pods/p/log")
        self.assertEqual((code, body["message"]), (400, "pod p does not have a host assigned"))

    def test_unknown_pod(self):
        code, body, _ = self.api.call("GET", "/api/v1/namespaces/default/pods/nope/log")
        self.assertEqual((code, body["message"]), (404, 'pods "nope" not found'))

    def test_bad_option(self):
        self.create(pod())
        code, body, _ = self.api.call("GET", "/api/v1/namespaces/default/pods/p/log?tailLines=-1")
        self.assertEqual(code, 400)
        code, body, _ = self.api.call("GET", "/api/v1/namespaces/default/pods/p/log?limitBytes=x")
        self.assertEqual(code, 400)
        self.assertEqual(self.agent.urls, [])

    def test_hostile_option_values_are_400(self):
        """Numbers past int64 and bytes that are not UTF-8 are 400s naming the option."""
        self.create(pod())
        for query, message in [
            ("tailLines=99999999999999999999",
             '"tailLines": "99999999999999999999" is out of range for a 64-bit integer'),
            ("limitBytes=1e9", '"limitBytes": "1e9" is not an integer'),
            ("sinceSeconds=%ff", '"sinceSeconds": not valid UTF-8'),
            ("container=%ff%fe", '"container": not valid UTF-8'),
            ("sinceTime=a%00", '"sinceTime": must not contain a NUL character'),
        ]:
            code, body, _ = self.api.call("GET", "/api/v1/namespaces/default/pods/p/log?" + query)
            self.assertEqual((code, body["message"]),
                             (400, "invalid value for query parameter " + message), query)
        self.assertEqual(self.agent.urls, [])

    def test_orchlet_error_is_status(self):
        """A non-2xx reply to a log request is a Status carrying the orchlet's text."""
        self.create(pod(name="q"))
        code, body, _ = self.api.call("GET", "/api/v1/namespaces/default/pods/q/log")
        self.assertEqual((code, body["reason"], body["message"]),
                         (404, "NotFound", "no such thing here"))

    def test_only_get(self):
        self.create(pod())
        code, body, _ = self.api.call("POST", "/api/v1/namespaces/default/pods/p/log", {})
        self.assertEqual(code, 405)


@implementer(IAgent)
class PendingAgent:
    """An agent whose answers the test gives: every request waits on a Deferred."""

    def __init__(self):
        self.requests = []

    def request(self, method, uri, headers=None, bodyProducer=None):
        d = Deferred(lambda d: self.requests[-1].append("cancelled"))
        self.requests.append([method, uri, d])
        return d


@implementer(IResponse)
class StreamedResponse:
    """A 200 whose body the test writes through C{self.body} (a protocol) as it likes."""

    version = (b"HTTP", 1, 1)
    code = 200
    phrase = b"OK"
    length = UNKNOWN_LENGTH
    request = previousResponse = None

    def __init__(self):
        self.headers = Headers({b"content-type": [b"application/octet-stream"]})
        self.backend = StringTransport()    # the orchlet's connection; records pauses
        self.body = None

    def deliverBody(self, protocol):
        self.body = protocol
        protocol.makeConnection(self.backend)

    def setPreviousResponse(self, response):
        pass


class StreamingTests(SynchronousTestCase):
    """A followed log over a real APISite connection: paced by the client, stopped with it."""

    def setUp(self):
        self.agent = PendingAgent()
        self.api = APIHarness(streams=StreamForwarder(self.agent))
        add_node(self.api, node())
        code, body, _ = self.api.call("POST", "/api/v1/namespaces/default/pods", pod())
        self.assertEqual(code, 201, body)
        self.transport = StringTransport()
        self.channel = APISite(self.api.resource, reactor=MemoryReactorClock()).buildProtocol(None)
        self.channel.makeConnection(self.transport)
        self.channel.dataReceived(b"GET /api/v1/namespaces/default/pods/p/log?follow=true "
                                  b"HTTP/1.1\r\nHost: orchd\r\n\r\n")
        (self.pending,) = self.agent.requests

    def answer(self):
        response = StreamedResponse()
        self.pending[2].callback(response)
        return response

    def test_lines_arrive_as_written(self):
        """Each chunk the orchlet sends reaches the client at once, as text/plain."""
        self.assertEqual(self.pending[:2], [b"GET", b"https://10.0.0.1:10250/containerLogs/"
                                                    b"default/p/c1?follow=true"])
        response = self.answer()
        response.body.dataReceived(b"first line\n")
        self.assertIn(b"content-type: text/plain", self.transport.value().lower())
        self.assertTrue(self.transport.value().endswith(b"first line\n\r\n"))
        response.body.dataReceived(b"second line\n")
        self.assertTrue(self.transport.value().endswith(b"second line\n\r\n"))

    def test_slow_client_pauses_orchlet(self):
        """A client whose buffer is full pauses the orchlet's connection, and resumes it."""
        response = self.answer()
        self.channel.pauseProducing()
        self.assertEqual(response.backend.producerState, "paused")
        self.channel.resumeProducing()
        self.assertEqual(response.backend.producerState, "producing")

    def test_client_leaving_closes_orchlet(self):
        """A client that leaves mid-stream stops the orchlet's connection."""
        response = self.answer()
        response.body.dataReceived(b"first line\n")
        self.channel.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(response.backend.producerState, "stopped")

    def test_client_leaving_cancels_request(self):
        """A client that leaves before the orchlet answers cancels the request to it."""
        self.channel.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(self.pending[3:], ["cancelled"])
