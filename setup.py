"""Packaging for orchd; a plain install also places the twistd plugin."""

from setuptools import find_packages, setup

setup(
    name="orchd",
    version="0.1.0",
    description="A small, secure control plane for container orchestration",
    long_description=open("README.rst", encoding="utf-8").read(),
    long_description_content_type="text/x-rst",
    python_requires=">=3.11",
    packages=find_packages(include=["orchd", "orchd.*"]) + ["twisted.plugins"],
    package_data={
        "twisted": ["plugins/orchd_plugin.py"],
        "orchd.api.proto": ["defs/**/*.proto"],
        "orchd.storage": ["etcddefs/*.proto"],
    },
    include_package_data=True,
    entry_points={
        # Snapshots of the store (save, restore, migration between backends).
        "console_scripts": ["orchd-admin = orchd.app.admin:main"],
        # The pytest plugin of orchd.testing: fixtures orchd and orchd_namespace
        # for any project that has orchd and pytest installed.
        "pytest11": ["orchd.testing.pytest_plugin = orchd.testing.pytest_plugin"],
    },
    install_requires=[
        "twisted[tls]>=25.5",
        "treq>=24.9",
        "pyopenssl>=24.0",
        "service-identity>=24.1",
        "pyjwt[crypto]>=2.8",
        "cryptography>=42",
        "plyvel>=1.5",
        "pyyaml>=6.0",
        # orjson: encodes and decodes JSON an order of magnitude faster than
        # the standard library on every request path.
        "orjson>=3.9",
        # jsonpatch: a complete, maintained RFC 6902 implementation.
        "jsonpatch>=1.33",
        # cel-python: evaluates CEL (custom resources' x-kubernetes-validations
        # rules, admission webhooks' matchConditions); it brings google-re2,
        # whose linear-time matching runs schema patterns.
        "cel-python>=0.5",
        # protobuf: builds the message classes of our own .proto definitions
        # and does the wire encoding in C (upb), for clients that speak it.
        "protobuf>=5.26",
        # hpack: HTTP/2 header decoding for the etcd client's gRPC calls
        # (orchd/storage/grpcwire.py); the table must follow the server's.
        "hpack>=4.0",
        "zope.interface>=6.0",
        # pynacl: NaCl's secretbox (XSalsa20-Poly1305), the secretbox provider
        # of encryption at rest, in upstream's stored layout.
        "pynacl>=1.5",
        # tzdata: the IANA zones for CronJobs' spec.timeZone where the system
        # has no /usr/share/zoneinfo (upstream embeds Go's time/tzdata).
        "tzdata>=2024.1",
    ],
    extras_require={
        "test": [
            "hypothesis>=6.100",
            "kubernetes>=29.0",
            "openapi-spec-validator>=0.7",
            # protoc, as an independent encoder for the protobuf tests.
            "grpcio-tools>=1.60",
            # prometheus_client's text parser, the reference reader of /metrics.
            "prometheus_client>=0.20",
            # A real operator framework run against orchd (tests/integration/test_kopf_operator.py).
            "kopf>=1.37",
            # Runs examples/ (operator tests written as users write them) through
            # orchd's pytest plugin, as .ci/run does after the trial suite.
            "pytest>=7.0",
        ],
    },
)
