"""
Every frame of a watch stream is in the negotiated format: changes,
bookmarks (initial-events-end, periodic, timeout) and the 410 ERROR, in
JSON, protobuf (decoded with our definitions and with protoc's) and Tables.
"""

from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from orchd.registry.kinds.builtin import KINDS
from orchd.server.negotiation import Format
from orchd.server.watchframes import (
    INITIAL_EVENTS_END, JSONFrames, ProtobufFrames, TableFrames, error_status,
)
from orchd.storage import watchcache
from orchd.storage.interfaces import CompactedError, IWatchEncoder, StoreUnavailableError
from tests.server.test_watch import Stream
from tests.support import APIHarness
from tests.watchsupport import (
    PROTOBUF_WATCH, ProtocDecoder, json_events, own_protobuf_events, summary,
)

CM = "/api/v1/namespaces/default/configmaps"
STREAMING_LIST = ("?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
                  "&resourceVersionMatch=NotOlderThan&resourceVersion=")
TABLE_ACCEPT = b"application/json;as=Table;v=v1;g=meta.k8s.io"


def info_of(group, resource):
    return next(i for i in KINDS if (i.group, i.resource) == (group, resource))


CONFIGMAPS = info_of("", "configmaps")
ROLES = info_of("rbac.authorization.orch.io", "roles")


class EncoderTests(SynchronousTestCase):
    """The encoders on their own."""

    def encoders(self):
        table = Format(TABLE_ACCEPT, "application/json", "v1", "Metadata")
        return [JSONFrames(CONFIGMAPS), ProtobufFrames(CONFIGMAPS),
                TableFrames(CONFIGMAPS, table, APIHarness().clock)]

    def test_every_format_is_an_encoder(self):
        """JSON, protobuf and Table frames provide IWatchEncoder, each with its own key."""
        encoders = self.encoders()
        for encoder in encoders:
            self.assertTrue(verifyObject(IWatchEncoder, encoder))
        self.assertEqual(len({encoder.key for encoder in encoders}), 3)

    def test_json_bookmark_and_error(self):
        """A JSON bookmark carries the kind and revision; a compacted start is 410 Expired."""
        frames = JSONFrames(CONFIGMAPS)
        data = frames.bookmark(7, initial_events_end=True) + frames.error(CompactedError(2, 5))
        self.assertEqual(json_events(data), [
            ("BOOKMARK", {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {
                "resourceVersion": "7", "annotations": {INITIAL_EVENTS_END: "true"}}}),
            ("ERROR", {"kind": "Status", "apiVersion": "v1", "metadata": {},
                       "status": "Failure", "message": "too old resource version: 2 (5)",
                       "reason": "Expired", "code": 410})])

    def test_protobuf_bookmark_and_error(self):
        """Protobuf bookmarks and errors are length-prefixed WatchEvents, read by protoc's classes."""
        frames = ProtobufFrames(CONFIGMAPS)
        data = frames.bookmark(7, initial_events_end=True) + frames.error(CompactedError(2, 5))
        expected = [
            ("BOOKMARK", {"kind": "ConfigMap", "apiVersion": "v1", "name": "",
                          "resourceVersion": "7", "annotations": {INITIAL_EVENTS_END: "true"}}),
            ("ERROR", {"kind": "Status", "apiVersion": "v1", "code": 410, "reason": "Expired",
                       "message": "too old resource version: 2 (5)"})]
        self.assertEqual(ProtocDecoder().events(data), expected)
        self.assertEqual([(t, summary(obj)) for t, obj in own_protobuf_events(data)], expected)

    def test_table_bookmark_and_error(self):
        """A Table bookmark is a one-row Table of the bookmark; an ERROR's Status stays a Status."""
        frames = self.encoders()[2]
        (bookmark_type, table), (error_type, status) = json_events(
            frames.bookmark(7, initial_events_end=True) + frames.error(CompactedError(2, 5)))
        self.assertEqual((bookmark_type, table["kind"], table["apiVersion"]),
                         ("BOOKMARK", "Table", "meta.k8s.io/v1"))
        self.assertEqual(table["metadata"], {"resourceVersion": "7"})
        (row,) = table["rows"]
        self.assertEqual(row["object"]["metadata"], {
            "resourceVersion": "7", "annotations": {INITIAL_EVENTS_END: "true"}})
        self.assertEqual((error_type, status["kind"], status["code"]), ("ERROR", "Status", 410))

    def test_spelled_bookmark(self):
        """A client that named the upstream group gets bookmarks in its spelling, apart."""
        plain = JSONFrames(ROLES)
        spelled = JSONFrames(ROLES, "rbac.authorization.k8s.io/v1")
        self.assertNotEqual(plain.key, spelled.key)
        ((_, obj),) = json_events(spelled.bookmark(3))
        self.assertEqual((obj["kind"], obj["apiVersion"]),
                         ("Role", "rbac.authorization.k8s.io/v1"))
        ((_, obj),) = json_events(plain.bookmark(3))
        self.assertEqual(obj["apiVersion"], "rbac.authorization.orch.io/v1")

    def test_other_errors_are_internal(self):
        """An ERROR for anything but a compacted start is a 500 Status, not a 410."""
        status = error_status(StoreUnavailableError("closed"))
        self.assertEqual((status["code"], status["reason"]), (500, "InternalError"))


class FramingContract:
    """One watch stream's frames in one format; subclasses set the Accept and the decoding."""

    accept = None
    media = None

    def decode(self, data):
        """@return: C{(type, summary)} of every frame of C{data}."""
        raise NotImplementedError

    def setUp(self):
        self.api = APIHarness()
        self.create("a")

    def create(self, name):
        code, obj, _ = self.api.call("POST", CM, {"metadata": {"name": name}})
        self.assertEqual(code, 201)
        return obj["metadata"]["resourceVersion"]

    def stream(self, query, api=None):
        return Stream(api or self.api, CM + query, headers={b"accept": self.accept})

    def frames(self, stream):
        stream.pump()
        return self.decode(b"".join(stream.chunks))

    def test_content_type(self):
        """The stream's content type is the format's."""
        stream = self.stream("?watch=true")
        self.assertEqual(stream.response.headers.getRawHeaders(b"content-type"), [self.media])

    def test_initial_events_end(self):
        """A streaming list's initial events end with the annotated bookmark, in the format."""
        _, listed, _ = self.api.call("GET", CM)
        stream = self.stream(STREAMING_LIST)
        self.create("b")
        frames = self.frames(stream)
        self.assertEqual([(t, s["name"]) for t, s in frames],
                         [("ADDED", "a"), ("BOOKMARK", ""), ("ADDED", "b")])
        bookmark = frames[1][1]
        self.assertEqual(bookmark, {
            "kind": "ConfigMap", "apiVersion": "v1", "name": "",
            "resourceVersion": listed["metadata"]["resourceVersion"],
            "annotations": {INITIAL_EVENTS_END: "true"}})

    def test_periodic_bookmark(self):
        """The periodic bookmark is a frame of the format at the latest revision."""
        stream = self.stream("?watch=true&allowWatchBookmarks=true")
        version = self.create("b")
        stream.pump(watchcache.BOOKMARK_INTERVAL + 1)
        frames = self.frames(stream)
        self.assertEqual([t for t, _ in frames], ["ADDED", "ADDED", "BOOKMARK"])
        self.assertEqual(frames[-1][1], {"kind": "ConfigMap", "apiVersion": "v1", "name": "",
                                         "resourceVersion": version, "annotations": {}})
        self.assertFalse(stream.ended)

    def test_timeout_bookmark(self):
        """timeoutSeconds ends the stream with a last bookmark in the format."""
        stream = self.stream("?watch=true&allowWatchBookmarks=true&timeoutSeconds=5")
        version = self.create("b")
        stream.pump(6)
        self.assertTrue(stream.ended)
        frames = self.frames(stream)
        self.assertEqual([(t, s["name"]) for t, s in frames],
                         [("ADDED", "a"), ("ADDED", "b"), ("BOOKMARK", "")])
        self.assertEqual(frames[-1][1]["resourceVersion"], version)

    def test_expired_is_error_frame(self):
        """A start older than the kept history is one 410 ERROR frame of the format, then the end."""
        self.patch(watchcache, "HISTORY", 3)
        api = APIHarness()
        for i in range(6):
            api.call("POST", CM, {"metadata": {"name": f"x{i}"}})
        stream = self.stream("?watch=true&resourceVersion=2", api)
        frames = self.frames(stream)
        self.assertTrue(stream.ended)
        self.assertEqual([t for t, _ in frames], ["ERROR"])
        status = frames[0][1]
        self.assertEqual((status["kind"], status["code"], status["reason"]),
                         ("Status", 410, "Expired"))
        self.assertTrue(status["message"].startswith("too old resource version: 2 ("))


class JSONFramingTests(FramingContract, SynchronousTestCase):
    accept = b"application/json"
    media = b"application/json"

    def decode(self, data):
        return [(t, summary(obj)) for t, obj in json_events(data)]


class ProtobufFramingTests(FramingContract, SynchronousTestCase):
    accept = PROTOBUF_WATCH
    media = PROTOBUF_WATCH

    def decode(self, data):
        independent = ProtocDecoder().events(data)
        ours = [(t, summary(obj)) for t, obj in own_protobuf_events(data)]
        self.assertEqual(ours, independent)
        return independent


class TableFramingTests(SynchronousTestCase):
    """kubectl's Table watch: bookmarks are Tables, an ERROR a Status, as upstream."""

    def setUp(self):
        self.api = APIHarness()
        self.api.call("POST", CM, {"metadata": {"name": "a"}})

    def test_initial_events_end_and_timeout_bookmarks(self):
        """The streaming list's and the timeout's bookmarks are one-row Tables of the bookmark."""
        stream = Stream(self.api, CM + STREAMING_LIST + "&timeoutSeconds=5",
                        headers={b"accept": TABLE_ACCEPT})
        stream.pump(6)
        self.assertTrue(stream.ended)
        events = stream.events()
        self.assertEqual([(e["type"], e["object"]["kind"]) for e in events],
                         [("ADDED", "Table"), ("BOOKMARK", "Table"), ("BOOKMARK", "Table")])
        first, last = (e["object"]["rows"][0]["object"]["metadata"] for e in events[1:])
        self.assertEqual(first["annotations"], {INITIAL_EVENTS_END: "true"})
        self.assertNotIn("annotations", last)
        self.assertEqual(events[1]["object"]["metadata"]["resourceVersion"],
                         first["resourceVersion"])

    def test_expired_is_status(self):
        """The 410 ERROR of a Table watch is a Status, not a Table."""
        self.patch(watchcache, "HISTORY", 3)
        api = APIHarness()
        for i in range(6):
            api.call("POST", CM, {"metadata": {"name": f"x{i}"}})
        stream = Stream(api, CM + "?watch=true&resourceVersion=2",
                        headers={b"accept": TABLE_ACCEPT})
        (event,) = stream.events()
        self.assertEqual((event["type"], event["object"]["kind"], event["object"]["code"]),
                         ("ERROR", "Status", 410))


class SpelledWatchTests(SynchronousTestCase):
    def test_bookmark_in_the_clients_spelling(self):
        """A watch under the upstream group name gets bookmarks in that spelling too."""
        api = APIHarness()
        path = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles"
        stream = Stream(api, path + "?watch=true&allowWatchBookmarks=true&timeoutSeconds=5")
        stream.pump(6)
        (event,) = stream.events()
        self.assertEqual((event["type"], event["object"]["apiVersion"]),
                         ("BOOKMARK", "rbac.authorization.k8s.io/v1"))
