"""The protobuf engine: the definition subset, special encodings, the envelope."""

import os

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.api.proto import specials
from orchd.api.proto.convert import Converter
from orchd.api.proto.envelope import MAGIC, ProtobufCodec
from orchd.api.proto.parser import ProtoSyntaxError, parse
from orchd.api.proto.schema import DEFS, Schema

SAMPLE = '''
syntax = "proto2";
package orch.api.core.v1;
import "orch/meta/v1.proto";
import "orch/util/intstr.proto";
import "orch/resource.proto";
import "orch/runtime.proto";

message Widget {
  optional orch.meta.v1.ObjectMeta metadata = 1;
  optional WidgetSpec spec = 2;
}

message WidgetList {
  optional orch.meta.v1.ListMeta metadata = 1;
  repeated Widget items = 2;
}

message WidgetSpec {
  optional int32 replicas = 1; // keep
  optional int32 weight = 2;
  optional string mode = 3;
  repeated string tags = 4;
  map<string, bytes> blobs = 5;
  optional orch.util.intstr.IntOrString port = 6;
  map<string, orch.resource.Quantity> limits = 7;
  optional orch.meta.v1.Duration period = 8;
  optional orch.meta.v1.MicroTime at = 9;
  optional orch.runtime.RawExtension data = 10;
  optional string ref = 11 [json_name = "$ref"];
  repeated Part parts = 12;
  optional bool enabled = 13;
}

message Part {
  optional string name = 1;
}
'''


def sample_schema(test):
    """The shipped meta definitions plus the sample above, in a temporary root."""
    root = test.mktemp()
    for directory, _, files in os.walk(DEFS):
        relative = os.path.relpath(directory, DEFS)
        if relative.startswith(os.path.join("orch", "api")):
            continue
        os.makedirs(os.path.join(root, relative), exist_ok=True)
        for name in files:
            with open(os.path.join(directory, name)) as src, \
                    open(os.path.join(root, relative, name), "w") as dst:
                dst.write(src.read())
    os.makedirs(os.path.join(root, "orch", "api", "core"))
    with open(os.path.join(root, "orch", "api", "core", "v1.proto"), "w") as f:
        f.write(SAMPLE)
    return Schema(root)


class ParserTests(SynchronousTestCase):
    def test_keep_and_json_names(self):
        """Trailing // keep and json_name options are recorded per message."""
        parsed = parse("x.proto", SAMPLE)
        self.assertEqual(parsed.keep["orch.api.core.v1.WidgetSpec"], {"replicas"})
        self.assertEqual(parsed.json_names["orch.api.core.v1.WidgetSpec"], {"ref": "$ref"})
        names = [m.name for m in parsed.proto.message_type]
        self.assertEqual(names, ["Widget", "WidgetList", "WidgetSpec", "Part"])

    def test_outside_the_subset(self):
        """Anything outside the subset is refused with the file and line."""
        for text in ('syntax = "proto3";', "enum E { A = 0; }",
                     'syntax = "proto2";\nmessage M {\n  required string a = 1;\n}',
                     'syntax = "proto2";\nmessage M {\n  optional string a = 1;\n'):
            self.assertRaises(ProtoSyntaxError, parse, "bad.proto", text)

    def test_unknown_reference(self):
        """A field naming an undefined message fails at linking."""
        root = self.mktemp()
        os.makedirs(root)
        with open(os.path.join(root, "a.proto"), "w") as f:
            f.write('syntax = "proto2";\npackage p;\nmessage M {\n  optional Missing m = 1;\n}\n')
        self.assertRaises(ProtoSyntaxError, Schema, root)


class ConvertTests(SynchronousTestCase):
    def setUp(self):
        self.schema = sample_schema(self)
        self.codec = ProtobufCodec(self.schema)

    def round_trip(self, obj):
        return self.codec.decode(self.codec.encode(obj))

    def widget(self, **spec):
        return {"apiVersion": "v1", "kind": "Widget",
                "metadata": {"name": "w", "creationTimestamp": "2024-05-01T10:00:00Z"},
                "spec": spec}

    def test_special_encodings(self):
        """Times, durations, int-or-string, quantities, raw JSON and bytes round-trip."""
        obj = self.widget(
            replicas=0, tags=["a", "b"], blobs={"k": "AAEC"}, port="http",
            limits={"cpu": "500m", "memory": "1Gi"}, period="1h2m3.5s",
            at="2024-05-01T10:00:00.123456Z", data={"nested": [1, {"x": None}]},
            parts=[{"name": "p"}], enabled=True)
        obj["spec"]["$ref"] = "#/definitions/x"
        self.assertEqual(self.round_trip(obj), obj)
        self.assertEqual(self.round_trip(self.widget(port=8080))["spec"]["port"], 8080)

    def test_zero_values_dropped_unless_kept(self):
        """Zero scalars and empty lists leave the JSON; kept fields stay."""
        back = self.round_trip(self.widget(replicas=0, weight=0, mode="", tags=[], enabled=False))
        self.assertEqual(back["spec"], {"replicas": 0})

    def test_unknown_fields_dropped(self):
        """Fields the message does not have are not carried."""
        back = self.round_trip(self.widget(nosuch=1, mode="m"))
        self.assertEqual(back["spec"], {"mode": "m"})

    def test_quantity_numbers(self):
        """A quantity written as a JSON number becomes its string."""
        back = self.round_trip(self.widget(limits={"cpu": 2, "x": 0.5}))
        self.assertEqual(back["spec"]["limits"], {"cpu": "2", "x": "0.5"})

    def test_time_zones(self):
        """Times with offsets are normalised to UTC."""
        back = self.round_trip(dict(self.widget(), metadata={
            "name": "w", "creationTimestamp": "2024-05-01T12:00:00+02:00"}))
        self.assertEqual(back["metadata"]["creationTimestamp"], "2024-05-01T10:00:00Z")

    def test_wrong_types_are_400(self):
        """Values of the wrong JSON type are a 400, not a crash."""
        for spec in ({"replicas": "two"}, {"tags": "a"}, {"blobs": {"k": "!!"}},
                     {"period": "soon"}, {"port": 1.5}):
            error = self.assertRaises(StatusError, self.codec.encode, self.widget(**spec))
            self.assertEqual(error.code, 400, spec)

    def test_durations(self):
        """Go duration strings are written back as Go prints them."""
        for text in ("0s", "250ms", "1.5s", "1m0s", "2h3m4s", "-1m30s"):
            back = self.round_trip(self.widget(period=text))
            self.assertEqual(back["spec"]["period"], text)

    def test_list(self):
        """A list message carries its items without their apiVersion and kind."""
        obj = {"apiVersion": "v1", "kind": "WidgetList", "metadata": {"resourceVersion": "7"},
               "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}
        self.assertEqual(self.round_trip(obj), obj)


class EnvelopeTests(SynchronousTestCase):
    def setUp(self):
        self.codec = ProtobufCodec(sample_schema(self))

    def test_envelope(self):
        """Bodies start with the magic and name their apiVersion and kind."""
        data = self.codec.encode({"apiVersion": "v1", "kind": "Widget", "metadata": {}})
        self.assertTrue(data.startswith(MAGIC))
        self.assertIn(b"Widget", data)

    def test_bad_bodies_are_400(self):
        """Missing magic, garbage and unknown kinds are 400."""
        unknown = self.codec.encode({"apiVersion": "v1", "kind": "Widget"}).replace(
            b"Widget", b"Gadget")
        for data in (b"{}", MAGIC + b"\xff\xff\xff", unknown):
            error = self.assertRaises(StatusError, self.codec.decode, data)
            self.assertEqual(error.code, 400)

    def test_strings_not_utf8_are_400(self):
        """String fields, map keys and the envelope's kind that are not UTF-8 are 400, not 500."""
        from orchd.api.proto.envelope import codec
        body = codec().encode({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "n", "labels": {"a": "v"},
                                            "finalizers": ["f"]},
                               "data": {"k": "w"}})
        for old, new in ((b"\x02v1", b"\x02\xff1"), (b"\x01k", b"\x01\xff"),
                         (b"\x01a", b"\x01\xff"), (b"\x01n", b"\x01\xff"),
                         (b"\x01v", b"\x01\xff"), (b"\x01w", b"\x01\xff"),
                         (b"\x01f", b"\x01\xff")):
            self.assertIn(old, body)
            error = self.assertRaises(StatusError, codec().decode, body.replace(old, new, 1))
            self.assertEqual(error.code, 400, old)

    def test_status_from_meta(self):
        """Status is known under any version."""
        status = {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
                  "message": "m", "reason": "NotFound", "details": {"name": "x"}, "code": 404}
        self.assertEqual(self.codec.decode(self.codec.encode(status)), status)


class WatchFrameTests(SynchronousTestCase):
    def test_frame(self):
        """A watch frame is a 4-byte length, then a WatchEvent with the enveloped object."""
        schema = sample_schema(self)
        codec = ProtobufCodec(schema)
        frame = codec.watch_frame("ADDED", {"apiVersion": "v1", "kind": "Widget",
                                            "metadata": {"name": "w"}})
        length = int.from_bytes(frame[:4], "big")
        self.assertEqual(length, len(frame) - 4)
        event = schema.message_class("orch.meta.v1.WatchEvent").FromString(frame[4:])
        self.assertEqual(event.type, "ADDED")
        self.assertEqual(codec.decode(event.object.raw)["metadata"], {"name": "w"})


class DurationTextTests(SynchronousTestCase):
    def test_go_formatting(self):
        """Durations print as Go's time.Duration does."""
        for nanos, text in ((0, "0s"), (1, "1ns"), (1500, "1.5\u00b5s"), (2_000_000, "2ms"),
                            (61_000_000_000, "1m1s"), (3_600_000_000_000, "1h0m0s")):
            self.assertEqual(specials.duration_text(nanos), text)
        self.assertIsInstance(Converter, type)


class InlineTests(SynchronousTestCase):
    def test_inline_fields_sit_in_the_enclosing_object(self):
        """An inline message's fields read and write at the enclosing level."""
        root = self.mktemp()
        os.makedirs(os.path.join(root, "orch"))
        with open(os.path.join(root, "orch", "a.proto"), "w") as f:
            f.write('syntax = "proto2";\npackage orch.api.core.v1;\n'
                    'message Volume {\n  optional string name = 1;\n'
                    '  optional Source source = 2; // inline\n}\n'
                    'message Source {\n  optional Path hostPath = 1;\n'
                    '  optional string medium = 2;\n}\n'
                    'message Path {\n  optional string path = 1;\n}\n')
        schema = Schema(root)
        converter = Converter(schema)
        cls = schema.message_class("orch.api.core.v1.Volume")
        obj = {"name": "v", "hostPath": {"path": "/x"}, "medium": "Memory"}
        message = converter.to_message(obj, cls)
        self.assertEqual(message.source.hostPath.path, "/x")
        self.assertEqual(converter.to_dict(message), obj)
