"""ComponentStatus: the control plane's components and their health, read through the API."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.registry.componentstatus import Component, component_status_provider
from tests.support import APIHarness

CS = "/api/v1/componentstatuses"
WARNING = [b'299 - "v1 ComponentStatus is deprecated in v1.19+"']
TABLE = b"application/json;as=Table;v=v1;g=meta.k8s.io"


class ComponentStatusTests(SynchronousTestCase):
    def setUp(self):
        self.health = {"scheduler": (True, "ok", ""), "controller-manager": (True, "ok", ""),
                       "etcd-0": (True, '{"health":"true","reason":""}', "")}
        components = [Component(name, self.probe(name)) for name in self.health]
        self.api = APIHarness(virtual=component_status_provider(components, Clock()))

    def probe(self, name):
        async def probe():
            answer = self.health[name]
            if isinstance(answer, Exception):
                raise answer
            return answer
        return probe

    def test_list(self):
        """A list names each component, Healthy True with its message, sorted by name."""
        code, body, headers = self.api.call("GET", CS)
        self.assertEqual(code, 200)
        self.assertEqual((body["kind"], body["apiVersion"]), ("ComponentStatusList", "v1"))
        self.assertEqual([item["metadata"]["name"] for item in body["items"]],
                         ["controller-manager", "etcd-0", "scheduler"])
        self.assertEqual(body["items"][2], {
            "kind": "ComponentStatus", "apiVersion": "v1",
            "metadata": {"name": "scheduler", "creationTimestamp": None},
            "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]})
        self.assertEqual(headers.getRawHeaders(b"warning"), WARNING)

    def test_get(self):
        """One component reads by name; an unknown name is 404."""
        code, body, headers = self.api.call("GET", CS + "/etcd-0")
        self.assertEqual((code, body["conditions"][0]["message"]),
                         (200, '{"health":"true","reason":""}'))
        self.assertEqual(headers.getRawHeaders(b"warning"), WARNING)
        code, body, _ = self.api.call("GET", CS + "/nothing")
        self.assertEqual((code, body["message"]), (404, 'componentstatuses "nothing" not found'))

    def test_unhealthy(self):
        """A failing component is Healthy False with its error; a probe that raises too."""
        self.health["scheduler"] = (False, "", "leaderElection: lease lost")
        self.health["etcd-0"] = RuntimeError("connection refused")
        _, body, _ = self.api.call("GET", CS)
        conditions = {i["metadata"]["name"]: i["conditions"][0] for i in body["items"]}
        self.assertEqual(conditions["scheduler"], {"type": "Healthy", "status": "False",
                                                   "error": "leaderElection: lease lost"})
        self.assertEqual(conditions["etcd-0"], {"type": "Healthy", "status": "False",
                                                "error": "connection refused"})

    def test_selectors(self):
        """A field selector on metadata.name picks components; other fields are refused."""
        _, body, _ = self.api.call("GET", CS + "?fieldSelector=metadata.name%3Dscheduler")
        self.assertEqual([i["metadata"]["name"] for i in body["items"]], ["scheduler"])
        _, body, _ = self.api.call("GET", CS + "?labelSelector=tier%3Dcontrol")
        self.assertEqual(body["items"], [])
        code, _, _ = self.api.call("GET", CS + "?fieldSelector=metadata.namespace%3Dx")
        self.assertEqual(code, 400)

    def test_read_only(self):
        """Components cannot be created, changed or watched."""
        self.assertEqual(self.api.call("POST", CS, {"metadata": {"name": "x"}})[0], 405)
        self.assertEqual(self.api.call("DELETE", CS + "/scheduler")[0], 405)
        self.assertEqual(self.api.call("GET", CS + "?watch=true")[0], 405)

    def test_table(self):
        """kubectl get componentstatuses shows Name, Status, Message and Error."""
        self.health["etcd-0"] = (False, "", "connection refused")
        _, body, _ = self.api.call("GET", CS, headers={b"accept": TABLE})
        self.assertEqual([c["name"] for c in body["columnDefinitions"]],
                         ["Name", "Status", "Message", "Error"])
        self.assertEqual([row["cells"] for row in body["rows"]], [
            ["controller-manager", "Healthy", "ok", ""],
            ["etcd-0", "Unhealthy", "", "connection refused"],
            ["scheduler", "Healthy", "ok", ""]])

    def test_discovery(self):
        """/api/v1 lists componentstatuses, cluster-scoped, get and list, short name cs."""
        resources = {r["name"]: r for r in self.api.call("GET", "/api/v1")[1]["resources"]}
        entry = resources["componentstatuses"]
        self.assertEqual((entry["kind"], entry["namespaced"], entry["verbs"], entry["shortNames"]),
                         ("ComponentStatus", False, ["get", "list"], ["cs"]))
