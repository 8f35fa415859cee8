"""Response formats: Accept parsing, Tables for kubectl, both group spellings, includeObject,
watch tables, aggregated discovery."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api import codecs, tables
from orchd.api.errors import StatusError
from orchd.server import negotiation
from orchd.server.negotiation import choose, negotiate, parse_accept, wants_aggregated
from tests.server.test_watch import Stream
from tests.support import APIHarness

CM = "/api/v1/namespaces/default/configmaps"
KUBECTL_ACCEPT = (b"application/json;as=Table;v=v1;g=meta.k8s.io,"
                  b"application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")

#: What client-go (kubectl 1.32) sends to /api and /apis.
DISCOVERY_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)


class AcceptTests(SynchronousTestCase):
    def test_order_by_quality_then_position(self):
        """Ranges are ordered by q, then by their place in the header."""
        ranges = parse_accept(b"text/plain;q=0.5, application/yaml, application/json")
        self.assertEqual([r.full for r in ranges],
                         ["application/yaml", "application/json", "text/plain"])

    def test_quoted_parameters(self):
        """Commas and semicolons inside quotes do not split."""
        (first, second) = parse_accept('a/b;x="1,2;3", c/d')
        self.assertEqual((first.params, second.full), ({"x": "1,2;3"}, "c/d"))

    def test_negotiate(self):
        """Wildcards pick the first offer; q=0 excludes; nothing acceptable is 406."""
        self.assertEqual(negotiate(b"*/*"), codecs.JSON)
        self.assertEqual(negotiate(b"application/yaml;q=0.9, application/json;q=0"),
                         codecs.YAML)
        error = self.assertRaises(StatusError, negotiate, b"text/html")
        self.assertEqual(error.code, 406)

    def test_parse_accept(self):
        """Media ranges are split outside quotes, with q parsed apart from the parameters."""
        ranges = parse_accept('text/plain;x="a,b;c";q=0.2, application/json')
        self.assertEqual([(r.full, r.params, r.quality) for r in ranges], [
            ("application/json", {}, 1.0),
            ("text/plain", {"x": "a,b;c"}, 0.2),
        ])
        self.assertEqual(parse_accept("a/b;q=zz")[0].quality, 0.0)
        self.assertEqual(parse_accept(b"a/b")[0].full, "a/b")

    def test_kubectl_accept(self):
        """The first range kubectl sends is a v1 Table."""
        ranges = parse_accept("application/json;as=Table;v=v1;g=meta.k8s.io,"
                              "application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
                              "application/json")
        self.assertEqual([tables.wants_table(r.params) for r in ranges], ["v1", "v1beta1", None])


class Asking:
    """A request as C{choose} reads it: its Accept header and query."""

    def __init__(self, accept, args=None):
        self.accept = accept
        self.args = args or {}

    def getHeader(self, name):
        return self.accept if name == b"accept" else None


class ChooseTests(SynchronousTestCase):
    def setUp(self):
        self.patch(negotiation, "_CHOSEN", {})

    def test_kept_per_header(self):
        """A header's format is chosen once and kept, apart for each set of offers."""
        first = choose(Asking(b"application/yaml, application/json"))
        self.assertEqual(first.codec, codecs.YAML)
        self.assertIs(choose(Asking(b"application/yaml, application/json")), first)
        json_only = choose(Asking(b"application/yaml, application/json"), allow_yaml=False)
        self.assertEqual(json_only.codec, codecs.JSON)
        self.assertEqual(len(negotiation._CHOSEN), 2)

    def test_tables_and_refusals_not_kept(self):
        """A Table reads the query, a 406 is no format: neither is kept."""
        table = choose(Asking(KUBECTL_ACCEPT, {b"includeObject": [b"Object"]}))
        self.assertEqual(table.include_object, "Object")
        self.assertEqual(choose(Asking(KUBECTL_ACCEPT)).include_object, "Metadata")
        self.assertRaises(StatusError, choose, Asking(b"text/html"))
        self.assertEqual(negotiation._CHOSEN, {})

    def test_bounded(self):
        """Headers made up per request fill the table once; long ones never enter it."""
        self.patch(negotiation, "_MAX_CHOSEN", 3)
        for n in range(5):
            self.assertEqual(choose(Asking(b"application/json;charset=u%d" % n)).codec, codecs.JSON)
        self.assertEqual(len(negotiation._CHOSEN), 3)
        negotiation._CHOSEN.clear()
        choose(Asking(b"application/json;charset=" + b"u" * 300))
        self.assertEqual(negotiation._CHOSEN, {})


class AggregatedDiscoveryTests(SynchronousTestCase):
    def test_kubectl(self):
        """kubectl's header selects aggregated discovery."""
        self.assertTrue(wants_aggregated(DISCOVERY_ACCEPT))

    def test_profile_first(self):
        """Newer clients' C{profile=nopeer} parameter is ignored."""
        self.assertTrue(wants_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer,"
            + DISCOVERY_ACCEPT))

    def test_parameter_order_and_spacing(self):
        """Parameters may come in any order, with spaces, quotes and any case of names."""
        self.assertTrue(wants_aggregated(
            'Application/JSON ; AS="APIGroupDiscoveryList" ; v=v2 ;g=apidiscovery.k8s.io'))

    def test_v2beta1_only(self):
        """A client accepting only v2beta1 gets the legacy document."""
        self.assertFalse(wants_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"))

    def test_plain(self):
        """Plain JSON, wildcards, a missing header and other conversions get the legacy document."""
        for header in ("application/json", "*/*", "", None, "application/json, */*",
                       "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"):
            self.assertFalse(wants_aggregated(header), header)

    def test_incomplete(self):
        """All of g, v and as must match."""
        self.assertFalse(wants_aggregated("application/json;g=apidiscovery.k8s.io;v=v2"))
        self.assertFalse(wants_aggregated(
            "application/json;g=apidiscovery.orch.io;v=v2;as=APIGroupDiscoveryList"))

    def test_other_media_type(self):
        """Only JSON is served: a protobuf request for the aggregated kind is not answered with it."""
        self.assertFalse(wants_aggregated(
            "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"))
        self.assertTrue(wants_aggregated("*/*;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"))

    def test_quality(self):
        """q=0 refuses the aggregated form, and a strictly preferred plain JSON wins."""
        aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        self.assertFalse(wants_aggregated(aggregated + ";q=0"))
        self.assertFalse(wants_aggregated(f"{aggregated};q=0.5, application/json"))
        self.assertTrue(wants_aggregated(f"application/json;q=0.5, {aggregated}"))
        self.assertTrue(wants_aggregated(f"application/json, {aggregated}"))


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
