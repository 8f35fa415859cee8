"""
Reading watch streams as a client does: JSON lines, or length-prefixed
protobuf decoded twice, with the project's own definitions and codec, and
independently with message classes protoc compiles from the same .proto
files (no code of ours between the bytes and the fields).
"""

import os
import struct
import subprocess
import sys
import tempfile

import orjson
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from orchd.api.proto.envelope import MAGIC, codec
from orchd.api.proto.schema import DEFS, schema

PROTOBUF = b"application/vnd.kubernetes.protobuf"
PROTOBUF_WATCH = PROTOBUF + b";stream=watch"
_PROTO_FILES = ("orch/runtime.proto", "orch/meta/v1.proto", "orch/api/core/v1.proto")
#: The messages the independent decoder knows, by (apiVersion, kind).
_MESSAGES = {("v1", "ConfigMap"): "orch.api.core.v1.ConfigMap",
             ("v1", "Status"): "orch.meta.v1.Status"}


def json_events(data):
    """The C{(type, object)} of every line of a JSON watch stream."""
    events = [orjson.loads(line) for line in data.split(b"\n") if line.strip()]
    return [(event["type"], event["object"]) for event in events]


def protobuf_frames(data):
    """
    The payloads of a length-prefixed stream.

    @raise AssertionError: the bytes do not split into whole frames (a JSON
        line among them reads as a huge length).
    """
    frames = []
    while data:
        if len(data) < 4:
            raise AssertionError(f"{len(data)} bytes left after the last frame")
        (length,) = struct.unpack(">I", data[:4])
        if length > len(data) - 4:
            raise AssertionError(f"frame of {length} bytes, {len(data) - 4} left: {data[:40]!r}")
        frames.append(data[4:4 + length])
        data = data[4 + length:]
    return frames


def own_protobuf_events(data):
    """C{(type, object)} of each frame, with the project's definitions and codec."""
    event_class = schema().message_class("orch.meta.v1.WatchEvent")
    events = []
    for frame in protobuf_frames(data):
        event = event_class.FromString(frame)
        events.append((event.type, codec().decode(event.object.raw)))
    return events


class ProtocDecoder:
    """Decodes protobuf watch frames with classes built from protoc's compilation."""

    _classes = None

    def __init__(self):
        if ProtocDecoder._classes is None:
            ProtocDecoder._classes = _compile()
        self._classes = ProtocDecoder._classes

    def events(self, data):
        """
        C{(type, summary)} of each frame: the summary holds C{kind},
        C{apiVersion}, and C{name}, C{resourceVersion} and C{annotations}
        for objects, or C{code}, C{reason} and C{message} for a Status.
        """
        return [self.event(frame) for frame in protobuf_frames(data)]

    def event(self, frame):
        event = self._classes["orch.meta.v1.WatchEvent"].FromString(frame)
        raw = event.object.raw
        if not raw.startswith(MAGIC):
            raise AssertionError(f"the object of a {event.type} lacks the magic: {raw[:8]!r}")
        unknown = self._classes["orch.runtime.Unknown"].FromString(raw[len(MAGIC):])
        api_version, kind = unknown.typeMeta.apiVersion, unknown.typeMeta.kind
        message = self._classes[_MESSAGES[(api_version, kind)]].FromString(unknown.raw)
        summary = {"kind": kind, "apiVersion": api_version}
        if kind == "Status":
            summary.update(code=message.code, reason=message.reason, message=message.message)
        else:
            summary.update(name=message.metadata.name,
                           resourceVersion=message.metadata.resourceVersion,
                           annotations=dict(message.metadata.annotations))
        return event.type, summary


def summary(obj):
    """What L{ProtocDecoder} reads of an object decoded another way."""
    out = {"kind": obj["kind"], "apiVersion": obj["apiVersion"]}
    if obj["kind"] == "Status":
        out.update(code=obj["code"], reason=obj["reason"], message=obj["message"])
    else:
        meta = obj["metadata"]
        out.update(name=meta.get("name", ""), resourceVersion=meta["resourceVersion"],
                   annotations=meta.get("annotations") or {})
    return out


def _compile():
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "defs.pb")
        process = subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", f"-I{DEFS}", "--include_imports",
             f"--descriptor_set_out={out}", *_PROTO_FILES], capture_output=True)
        if process.returncode != 0:
            raise AssertionError(process.stderr.decode())
        with open(out, "rb") as f:
            files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for proto in files.file:
        pool.Add(proto)
    names = ("orch.meta.v1.WatchEvent", "orch.runtime.Unknown", *_MESSAGES.values())
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
            for name in names}
