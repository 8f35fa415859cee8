"""The audit log, Audit-ID, the request log and --log-format=json on real TLS servers."""

import os
import signal

import orjson
from treq.client import HTTPClient
from twisted.internet import reactor
from twisted.logger import globalLogPublisher
from twisted.trial.unittest import TestCase
from twisted.web.client import Agent, HTTPConnectionPool

from orchd.client.connect import client_from_orchconfig
from orchd.client.orchconfig import load_orchconfig
from orchd.tls.client import ClientTLSPolicy
from tests.integration import test_cli
from tests.integration.support import RunningControlPlane, sleep

CM = "/api/v1/namespaces/default/configmaps"
SECRETS = "/api/v1/namespaces/default/secrets"
POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: ["/readyz*", "/healthz*", "/livez*"]
- level: None
  users: ["system:apiserver"]
- level: Metadata
  resources: [{group: "", resources: ["secrets"]}]
- level: RequestResponse
  resources: [{group: "", resources: ["configmaps"]}]
- level: Metadata
"""
#: A bearer token and a Secret value that must never reach a log.
TOKEN = "abcdef.0123456789abcdef"
SECRET_VALUE = "hunter2-the-secret-value"


def write(test, text):
    path = os.path.abspath(test.mktemp())
    with open(path, "w") as f:
        f.write(text)
    return path


def read_events(path):
    with open(path, "rb") as f:
        return [orjson.loads(line) for line in f.read().splitlines()]


class AuditLogTests(TestCase):
    timeout = 120

    async def test_audit_file(self):
        """Create, get, watch and a denied request each leave their events in the audit file."""
        log_path = os.path.join(os.path.abspath(self.mktemp()), "audit.log")
        server = RunningControlPlane(self, audit_policy_file=write(self, POLICY),
                                     audit_log_path=log_path)
        await server.start()
        logged = []
        globalLogPublisher.addObserver(logged.append)
        self.addCleanup(globalLogPublisher.removeObserver, logged.append)

        response = await server.client.post(server.url + CM, json={
            "metadata": {"name": "c"}, "data": {"k": "v"}})
        await response.content()
        self.assertEqual(response.code, 201)
        created_id = response.headers.getRawHeaders(b"audit-id")[0].decode()
        response = await server.client.get(server.url + CM + "/c")
        await response.content()
        get_id = response.headers.getRawHeaders(b"audit-id")[0].decode()
        response = await server.client.get(server.url + CM + "?watch=true&timeoutSeconds=1")
        await response.content()
        watch_id = response.headers.getRawHeaders(b"audit-id")[0].decode()

        pool = HTTPConnectionPool(reactor, persistent=False)
        ca = load_orchconfig(server.plane.pki.admin_orchconfig_path).ca_pem
        anonymous = HTTPClient(Agent(reactor, contextFactory=ClientTLSPolicy(ca), pool=pool))
        response = await anonymous.get(server.url + SECRETS)
        await response.content()
        self.assertEqual(response.code, 403)
        denied_id = response.headers.getRawHeaders(b"audit-id")[0].decode()
        response = await anonymous.get(server.url + CM, headers={
            "Authorization": [f"Bearer {TOKEN}"]})
        await response.content()
        self.assertEqual(response.code, 401)
        self.assertTrue(response.headers.getRawHeaders(b"audit-id"))
        await server.stop()

        events = {(e["auditID"], e["stage"]): e for e in read_events(log_path)}
        create = events[created_id, "ResponseComplete"]
        self.assertEqual((create["verb"], create["level"], create["user"]["username"]),
                         ("create", "RequestResponse", "orch-admin"))
        self.assertEqual(create["requestObject"]["data"], {"k": "v"})
        self.assertEqual(create["responseObject"]["metadata"]["name"], "c")
        self.assertEqual(create["responseStatus"]["code"], 201)
        self.assertEqual(create["sourceIPs"], ["127.0.0.1"])
        get = events[get_id, "ResponseComplete"]
        self.assertEqual(get["objectRef"]["name"], "c")
        self.assertIn((watch_id, "ResponseStarted"), events)
        self.assertEqual(events[watch_id, "ResponseComplete"]["verb"], "watch")
        denied = events[denied_id, "ResponseComplete"]
        self.assertEqual(denied["annotations"]["authorization.k8s.io/decision"], "forbid")
        self.assertEqual(denied["user"]["username"], "system:anonymous")
        self.assertEqual(denied["responseStatus"]["code"], 403)
        self.assertFalse([e for e in events.values() if e["stage"] == "RequestReceived"])

        lines = {e["audit_id"]: e for e in logged if e.get("log_namespace") == "orchd.requests"}
        self.assertEqual((lines[created_id]["verb"], lines[created_id]["status"],
                          lines[created_id]["user"]), ("create", 201, "orch-admin"))
        self.assertEqual(lines[watch_id]["verb"], "watch")
        self.assertEqual(lines[denied_id]["status"], 403)


class JSONProcess(test_cli.Twistd):
    """A twistd child whose log is JSON: the listener's URL is a field of a line."""

    def outReceived(self, data):
        self.output += data
        if self.listening.called:
            return
        for line in self.output.splitlines():
            if line.startswith(b"{") and b"API server listening" in line:
                self.listening.callback(orjson.loads(line)["url"])
                return


class JSONLogTests(TestCase):
    timeout = 120

    async def test_json_log_without_secrets(self):
        """--log-format=json writes only JSON lines, with request lines, and no token or secret."""
        data_dir = os.path.abspath(self.mktemp())
        audit = os.path.join(data_dir, "audit.log")
        self.patch(test_cli, "Twistd", JSONProcess)
        child = test_cli.spawn("--data-dir", data_dir, "--secure-port", "0", "--orchlet-port",
                               "0", "--no-orchlet", "--log-format=json",
                               f"--audit-policy-file={write(self, POLICY)}",
                               f"--audit-log-path={audit}")
        self.addCleanup(lambda: None if child.ended.called
                        else os.kill(child.transport.pid, signal.SIGKILL))
        url = await child.listening
        pool = HTTPConnectionPool(reactor)
        self.addCleanup(pool.closeCachedConnections)
        client, _ = client_from_orchconfig(os.path.join(data_dir, "admin.orchconfig"), reactor,
                                           pool)
        for _ in range(100):
            response = await client.get(url + "/readyz")
            await response.content()
            if response.code == 200:
                break
            await sleep(0.1)
        response = await client.post(url + SECRETS, json={
            "metadata": {"name": "s"}, "stringData": {"password": SECRET_VALUE}})
        await response.content()
        self.assertEqual(response.code, 201)
        response = await client.get(url + SECRETS + "/s",
                                    headers={"Authorization": [f"Bearer {TOKEN}"]})
        await response.content()
        await pool.closeCachedConnections()
        os.kill(child.transport.pid, signal.SIGTERM)
        await child.ended

        records = [orjson.loads(line) for line in child.output.splitlines() if line.strip()]
        self.assertTrue(all(isinstance(r, dict) and "message" in r for r in records))
        requests = [r for r in records if r["namespace"] == "orchd.requests"]
        self.assertIn(("create", SECRETS, 201),
                      [(r["verb"], r["uri"], r["status"]) for r in requests])
        with open(audit, "rb") as f:
            audit_text = f.read()
        self.assertIn(b'"resource":"secrets"', audit_text)
        for text in (child.output + child.errors, audit_text):
            self.assertNotIn(TOKEN.encode(), text)
            self.assertNotIn(SECRET_VALUE.encode(), text)
            self.assertNotIn(b"aHVudGVyMi10aGUtc2VjcmV0LXZhbHVl", text)   # base64 of it
