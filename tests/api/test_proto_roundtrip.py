"""
JSON -> protobuf -> JSON is the identity for every kind, on generated objects,
and bytes from an independent encoder (protoc) decode to the expected objects.
"""

import base64
import subprocess
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from orchd.registry.kinds.builtin import KINDS
from orchd.api.proto import specials
from orchd.api.proto.convert import BYTES, MESSAGE, SPECIAL, Converter
from orchd.api.proto.envelope import codec
from orchd.api.proto.schema import DEFS, schema

_INT_RANGES = {"int32": (-2**31, 2**31 - 1), "int64": (-2**53, 2**53), "uint32": (0, 2**32 - 1),
               "uint64": (0, 2**53)}
_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), min_size=1, max_size=8)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | _TEXT,
    lambda children: st.lists(children, max_size=2) | st.dictionaries(_TEXT, children,
                                                                      max_size=2),
    max_leaves=4)


def _special(name, depth):
    if name in (specials.TIME, specials.MICRO_TIME):
        seconds = st.integers(1, 4_000_000_000)
        if name == specials.TIME:
            return seconds.map(lambda s: specials.second_text(s) + "Z")
        return st.tuples(seconds, st.integers(0, 999_999)).map(
            lambda t: f"{specials.second_text(t[0])}.{t[1]:06d}Z")
    if name == specials.DURATION:
        return st.integers(-10**13, 10**13).map(specials.duration_text)
    if name == specials.INT_OR_STRING:
        return st.integers(-2**31, 2**31 - 1) | _TEXT
    if name == specials.QUANTITY:
        return st.sampled_from(["1", "500m", "2Gi", "0.5", "100Ki"])
    if name == specials.EXTRA:
        return st.lists(_TEXT, max_size=2)
    if name == specials.OR_BOOL:
        return st.booleans()
    if name == specials.OR_STRINGS:
        return st.lists(_TEXT, min_size=1, max_size=2)
    if name == specials.OR_ARRAY:
        return st.just({})
    return st.dictionaries(_TEXT, _JSON, min_size=1, max_size=2)  # raw JSON, field sets


def objects(converter, cls, depth=0):
    """A strategy for JSON objects of message C{cls} that survive a round trip."""
    plan = converter._plan(cls.DESCRIPTOR)
    fields = {}
    for json_name, field in plan.by_json.items():
        value = _value(converter, field, depth)
        if value is not None:
            fields[json_name] = value
    return st.fixed_dictionaries({}, optional=fields)


def _value(converter, field, depth):
    if field.shape == MESSAGE:
        if depth >= 3:
            return None
        single = st.deferred(lambda: objects(converter, _class_of(field), depth + 1))
    elif field.shape == SPECIAL:
        single = _special(field.special, depth)
    elif field.shape == BYTES:
        single = st.binary(min_size=1, max_size=6).map(lambda b: base64.b64encode(b).decode())
    else:
        single = _scalar(field)
    if field.is_map:
        return st.dictionaries(_TEXT, single, min_size=1, max_size=2)
    if field.repeated:
        return st.lists(single, min_size=1, max_size=2)
    return single


def _scalar(field):
    kind = field.scalar_type
    if kind == "bool":
        return st.just(True) | (st.just(False) if field.keep else st.just(True))
    if kind in ("double", "float"):
        return st.integers(1, 1000).map(float)
    if kind == "string":
        return _TEXT | st.just("") if field.keep else _TEXT
    low, high = _INT_RANGES[kind]
    nonzero = st.integers(low, high).filter(bool)
    return st.integers(low, high) if field.keep else nonzero


def _class_of(field):
    return schema().message_class(field.plan.full_name)


class RoundTripTests(SynchronousTestCase):
    def test_every_kind(self):
        """For every kind with a message, generated objects survive JSON -> protobuf -> JSON."""
        converter = Converter(schema())
        seen = set()
        for info in KINDS:
            for kind in (info.kind, info.list_kind):
                cls = schema().kind_message(info.api_version, kind)
                if cls is None or (info.api_version, kind) in seen:
                    continue
                seen.add((info.api_version, kind))
                self._check(converter, cls, info.api_version, kind)
        self.assertGreater(len(seen), 100)

    def _check(self, converter, cls, api_version, kind):
        wire = codec()

        @settings(max_examples=15, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(objects(converter, cls))
        def round_trip(body):
            obj = {"apiVersion": api_version, "kind": kind, **body}
            self.assertEqual(wire.decode(wire.encode(obj)), obj)

        round_trip()


class IndependentEncoderTests(SynchronousTestCase):
    """protoc, compiling our own .proto files, encodes; we decode."""

    def protoc_encode(self, message, text):
        process = subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", f"-I{DEFS}", f"--encode={message}",
             *_files_for(message)], input=text.encode(), capture_output=True)
        if process.returncode != 0:
            self.fail(process.stderr.decode())
        return process.stdout

    def decode(self, message, data):
        return Converter(schema()).to_dict(schema().message_class(message).FromString(data))

    def test_config_map(self):
        """A ConfigMap with metadata times and a bytes map."""
        data = self.protoc_encode("orch.api.core.v1.ConfigMap", '''
            metadata { name: "c" namespace: "default" creationTimestamp { seconds: 1714557600 }
                       labels { key: "app" value: "web" } }
            data { key: "a" value: "b" }
            binaryData { key: "bin" value: "\\x00\\x01" }''')
        self.assertEqual(self.decode("orch.api.core.v1.ConfigMap", data), {
            "metadata": {"name": "c", "namespace": "default",
                         "creationTimestamp": "2024-05-01T10:00:00Z", "labels": {"app": "web"}},
            "data": {"a": "b"}, "binaryData": {"bin": "AAE="}})

    def test_pod_inline_and_intstr(self):
        """A Pod: inline volume source, probe handler with a named port, zeros dropped."""
        data = self.protoc_encode("orch.api.core.v1.Pod", '''
            metadata { name: "p" }
            spec {
              volumes { name: "v" volumeSource { emptyDir { medium: "Memory" } } }
              containers { name: "c" image: "img" terminationMessagePath: ""
                           readinessProbe { handler { httpGet { path: "/h"
                               port { type: 1 strVal: "http" } } } periodSeconds: 5 } }
              priority: 0
            }''')
        pod = self.decode("orch.api.core.v1.Pod", data)
        self.assertEqual(pod["spec"]["volumes"], [{"name": "v", "emptyDir": {"medium": "Memory"}}])
        container = pod["spec"]["containers"][0]
        self.assertEqual(container["readinessProbe"],
                         {"httpGet": {"path": "/h", "port": "http"}, "periodSeconds": 5})
        self.assertNotIn("terminationMessagePath", container)
        self.assertEqual(pod["spec"]["priority"], 0)

    def test_deployment_keeps_zero_replicas(self):
        """A Deployment's replicas of 0 is kept; rolling update percentages stay strings."""
        data = self.protoc_encode("orch.api.apps.v1.Deployment", '''
            metadata { name: "d" }
            spec { replicas: 0 strategy { type: "RollingUpdate"
                   rollingUpdate { maxSurge { type: 1 strVal: "25%" }
                                   maxUnavailable { type: 0 intVal: 1 } } } }''')
        self.assertEqual(self.decode("orch.api.apps.v1.Deployment", data)["spec"], {
            "replicas": 0, "strategy": {"type": "RollingUpdate", "rollingUpdate": {
                "maxSurge": "25%", "maxUnavailable": 1}}})

    def test_cluster_role_binding(self):
        """A ClusterRoleBinding with subjects."""
        data = self.protoc_encode("orch.api.rbac.v1.ClusterRoleBinding", '''
            metadata { name: "b" }
            subjects { kind: "Group" apiGroup: "rbac.authorization.orch.io" name: "g" }
            roleRef { apiGroup: "rbac.authorization.orch.io" kind: "ClusterRole" name: "view" }''')
        self.assertEqual(self.decode("orch.api.rbac.v1.ClusterRoleBinding", data), {
            "metadata": {"name": "b"},
            "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.orch.io", "name": "g"}],
            "roleRef": {"apiGroup": "rbac.authorization.orch.io", "kind": "ClusterRole",
                        "name": "view"}})


def _files_for(message):
    package = message.rsplit(".", 1)[0]
    parts = package.split(".")
    return [f"{'/'.join(parts[:-1])}/{parts[-1]}.proto"]

