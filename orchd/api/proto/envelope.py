# -*- test-case-name: tests.api.test_proto -*-
"""
The wire form of protobuf bodies: a 4-byte magic, then a C{runtime.Unknown}.

[COMPAT] Clients send and expect exactly the magic C{k8s\\x00} and the media
type C{application/vnd.kubernetes.protobuf}; both keep their upstream
spelling because unmodified clients write and match them literally. The
envelope names the object's apiVersion and kind, so a body is decoded
without knowing the URL it came to.
"""

import struct
from collections import OrderedDict

from orchd.api.errors import StatusError
from orchd.api.proto.convert import Converter
from orchd.api.proto.schema import schema

#: [COMPAT] the protobuf media type and the magic prefix of every body.
MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
WATCH_MEDIA_TYPE = MEDIA_TYPE + ";stream=watch"
MAGIC = b"k8s\x00"


class ProtobufCodec:
    """Encodes objects to enveloped protobuf and back, for every kind with a message."""

    #: Encoded bodies kept for reads of the same object version.
    CACHE_SIZE = 4096

    def __init__(self, schema):
        self._schema = schema
        self._convert = Converter(schema)
        self._unknown = schema.message_class("orch.runtime.Unknown")
        self._event = schema.message_class("orch.meta.v1.WatchEvent")
        self._cache = OrderedDict()

    def supports(self, api_version, kind):
        """True when C{kind} of C{api_version} has a message (else answer JSON)."""
        return self._schema.kind_message(api_version, kind) is not None

    def encode_stored(self, obj):
        """
        L{encode} for an object as stored: reads of the same version of the
        same object (uid and resourceVersion) reuse the bytes, as upstream
        caches serialized objects. Never for answers that are not stored
        state, such as dry runs.
        """
        meta = obj.get("metadata") or {}
        key = (obj.get("apiVersion"), obj.get("kind"), meta.get("uid"),
               meta.get("resourceVersion"))
        if not key[2] or not key[3]:
            return self.encode(obj)
        cache = self._cache
        data = cache.get(key)
        if data is None:
            data = cache[key] = self.encode(obj)
            if len(cache) > self.CACHE_SIZE:
                cache.popitem(last=False)
        return data

    def encode(self, obj):
        """The enveloped bytes of C{obj} (which carries its apiVersion and kind)."""
        api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
        cls = self._schema.kind_message(api_version, kind)
        if cls is None:
            raise StatusError.not_acceptable(
                f"{kind} in {api_version} has no protobuf form; ask for application/json")
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        raw = self._convert.to_message(body, cls).SerializeToString()
        envelope = self._unknown(raw=raw)
        envelope.typeMeta.apiVersion = api_version
        envelope.typeMeta.kind = kind
        return MAGIC + envelope.SerializeToString()

    def decode(self, data):
        """
        The object of an enveloped body, with apiVersion and kind set.

        @raise StatusError: 400 for a body that is not a known enveloped object.
        """
        if not data.startswith(MAGIC):
            raise StatusError.bad_request(
                "the protobuf body does not start with the expected prefix")
        try:
            envelope = self._unknown.FromString(data[len(MAGIC):])
        except Exception:
            raise StatusError.bad_request("the protobuf body could not be decoded") from None
        api_version = envelope.typeMeta.apiVersion
        kind = envelope.typeMeta.kind
        if type(api_version) is not str or type(kind) is not str:
            # proto2 strings that are not UTF-8 come out as bytes.
            raise StatusError.bad_request("the protobuf body's apiVersion and kind must be "
                                          "UTF-8 text")
        cls = self._schema.kind_message(api_version, kind)
        if cls is None:
            raise StatusError.bad_request(
                f"no kind \"{kind}\" is registered for version \"{api_version}\"")
        try:
            message = cls.FromString(envelope.raw)
        except Exception:
            raise StatusError.bad_request(
                f"the protobuf body of {kind} could not be decoded") from None
        obj = {"apiVersion": api_version, "kind": kind}
        obj.update(self._convert.to_dict(message))
        return obj

    def watch_frame(self, type, obj):
        """One event of a protobuf watch: a length prefix, then a bare WatchEvent."""
        event = self._event(type=type)
        event.object.raw = self.encode(obj)
        data = event.SerializeToString()
        return struct.pack(">I", len(data)) + data


_codec = None


def codec():
    """The codec of the shipped definitions (built on first use)."""
    global _codec
    if _codec is None:
        _codec = ProtobufCodec(schema())
    return _codec
