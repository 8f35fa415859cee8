"""Response formats: Tables for kubectl, both group spellings, includeObject, watch tables."""

from twisted.trial.unittest import SynchronousTestCase

from tests.server.test_watch import Stream
from tests.support import APIHarness

CM = "/api/v1/namespaces/default/configmaps"
KUBECTL_ACCEPT = (b"application/json;as=Table;v=v1;g=meta.k8s.io,"
                  b"application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")


class TableTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.api.call("POST", CM, {"metadata": {"name": "a"}, "data": {"x": "1", "y": "2"}})

    def test_kubectl_list_gets_table(self):
        """kubectl's Accept header gets a Table with the kind's columns."""
        code, table, headers = self.api.call("GET", CM, headers={b"accept": KUBECTL_ACCEPT})
        self.assertEqual(code, 200)
        self.assertEqual((table["kind"], table["apiVersion"]), ("Table", "meta.k8s.io/v1"))
        self.assertEqual(headers.getRawHeaders(b"content-type"),
                         [b"application/json;as=Table;v=v1;g=meta.k8s.io"])
        self.assertEqual([c["name"] for c in table["columnDefinitions"]],
                         ["Name", "Data", "Age"])
        (row,) = table["rows"]
        self.assertEqual(row["cells"][:2], ["a", 2])
        self.assertEqual(row["object"]["kind"], "PartialObjectMetadata")
        self.assertEqual(row["object"]["metadata"]["name"], "a")
        self.assertTrue(table["metadata"]["resourceVersion"])

    def test_renamed_group_and_single_object(self):
        """g=meta.orch.io is accepted too, and a GET of one object is a one-row Table."""
        accept = b"application/json;as=Table;v=v1;g=meta.orch.io"
        _, table, _ = self.api.call("GET", CM + "/a", headers={b"accept": accept})
        self.assertEqual(table["kind"], "Table")
        self.assertEqual(len(table["rows"]), 1)

    def test_include_object(self):
        """includeObject chooses what each row carries; a bad value is 400."""
        _, table, _ = self.api.call("GET", CM + "?includeObject=Object",
                                    headers={b"accept": KUBECTL_ACCEPT})
        self.assertEqual(table["rows"][0]["object"]["data"], {"x": "1", "y": "2"})
        _, table, _ = self.api.call("GET", CM + "?includeObject=None",
                                    headers={b"accept": KUBECTL_ACCEPT})
        self.assertIsNone(table["rows"][0]["object"])
        code, _, _ = self.api.call("GET", CM + "?includeObject=All",
                                   headers={b"accept": KUBECTL_ACCEPT})
        self.assertEqual(code, 400)

    def test_errors_stay_status(self):
        """Errors are Status objects even when a Table was asked for."""
        code, status, _ = self.api.call("GET", CM + "/zz", headers={b"accept": KUBECTL_ACCEPT})
        self.assertEqual((code, status["kind"]), (404, "Status"))

    def test_unknown_conversion_falls_back(self):
        """A conversion the server does not do is passed over; alone it is 406."""
        accept = b"application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
        self.assertEqual(self.api.call("GET", CM, headers={b"accept": accept})[0], 406)
        _, body, _ = self.api.call("GET", CM, headers={b"accept": accept + b",application/json"})
        self.assertEqual(body["kind"], "ConfigMapList")

    def test_watch_table_events(self):
        """A watch asking for Tables gets one-row Tables as event objects."""
        stream = Stream(self.api, CM + "?watch=true", headers={b"accept": KUBECTL_ACCEPT})
        self.api.call("POST", CM, {"metadata": {"name": "b"}})
        events = stream.events()
        self.assertEqual([e["type"] for e in events], ["ADDED", "ADDED"])
        self.assertEqual(events[1]["object"]["kind"], "Table")
        self.assertEqual(events[1]["object"]["rows"][0]["cells"][0], "b")
