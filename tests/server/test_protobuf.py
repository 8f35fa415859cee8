"""Protobuf over HTTP: bodies in, answers out, lists and watches, negotiation."""

import struct

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.proto.envelope import codec
from orchd.api.proto.schema import schema
from tests.server.test_watch import Stream
from tests.support import APIHarness

PROTOBUF = b"application/vnd.kubernetes.protobuf"
CM = "/api/v1/namespaces/default/configmaps"


def configmap(name, **data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": data or {"k": "v"}}


class ProtobufTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.codec = codec()

    def call(self, method, path, body=None, accept=PROTOBUF):
        data = self.codec.encode(body) if body is not None else None
        return self.api.call(method, path, data, headers={b"accept": accept},
                             content_type=PROTOBUF)

    def test_create_and_get(self):
        """A protobuf body creates; a protobuf Accept gets protobuf back."""
        code, raw, headers = self.call("POST", CM, configmap("a", x="1"))
        self.assertEqual(code, 201)
        self.assertEqual(headers.getRawHeaders(b"content-type"), [PROTOBUF])
        created = self.codec.decode(raw)
        self.assertEqual(created["data"], {"x": "1"})
        self.assertTrue(created["metadata"]["uid"])
        code, raw, _ = self.call("GET", CM + "/a")
        self.assertEqual(self.codec.decode(raw), created)

    def test_list(self):
        """Lists come back as the list message."""
        self.call("POST", CM, configmap("a"))
        self.call("POST", CM, configmap("b"))
        _, raw, _ = self.call("GET", CM)
        listed = self.codec.decode(raw)
        self.assertEqual(listed["kind"], "ConfigMapList")
        self.assertEqual([i["metadata"]["name"] for i in listed["items"]], ["a", "b"])

    def test_json_accept_still_json(self):
        """kubectl's typed Accept (protobuf, then JSON) gets protobuf; JSON alone gets JSON."""
        self.call("POST", CM, configmap("a"))
        _, _, headers = self.call("GET", CM + "/a", accept=PROTOBUF + b", application/json")
        self.assertEqual(headers.getRawHeaders(b"content-type"), [PROTOBUF])
        _, body, _ = self.api.call("GET", CM + "/a", headers={b"accept": b"application/json"})
        self.assertEqual(body["metadata"]["name"], "a")

    def test_errors_are_json_status(self):
        """Errors are Status objects the client decodes."""
        code, status, _ = self.call("GET", CM + "/zz")
        self.assertEqual((code, status["reason"]), (404, "NotFound"))

    def test_bad_protobuf_body_is_400(self):
        """A body that is not an enveloped object is 400."""
        code, status, _ = self.api.call("POST", CM, b"\x00\x01garbage",
                                        content_type=PROTOBUF)
        self.assertEqual(code, 400)

    def test_unsupported_content_type_is_415(self):
        """A media type the server does not read is 415 and lists protobuf."""
        code, status, _ = self.api.call("POST", CM, b"x", content_type=b"application/cbor")
        self.assertEqual(code, 415)
        self.assertIn("application/vnd.kubernetes.protobuf", status["message"])

    def test_watch_frames(self):
        """A protobuf watch streams length-prefixed WatchEvents."""
        stream = Stream(self.api, CM + "?watch=true",
                        headers={b"accept": PROTOBUF + b";stream=watch"})
        self.assertEqual(stream.response.headers.getRawHeaders(b"content-type"),
                         [PROTOBUF + b";stream=watch"])
        self.call("POST", CM, configmap("w"))
        stream.pump()
        data = b"".join(stream.chunks)
        event_class = schema().message_class("orch.meta.v1.WatchEvent")
        events = []
        while data:
            (length,) = struct.unpack(">I", data[:4])
            event = event_class.FromString(data[4:4 + length])
            events.append((event.type, self.codec.decode(event.object.raw)["metadata"]["name"]))
            data = data[4 + length:]
        self.assertEqual(events, [("ADDED", "w")])

    def test_every_kind_has_a_message(self):
        """Every served kind and its list has a protobuf message."""
        for info in self.api.catalog.served_kinds:
            self.assertIsNotNone(schema().kind_message(info.api_version, info.kind), info)
            if "list" in info.verbs:
                self.assertIsNotNone(schema().kind_message(info.api_version, info.list_kind),
                                     info)

