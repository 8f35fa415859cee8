"""
The cost of encryption at rest: Secret create and GET on two orchd servers,
one whose --encryption-provider-config encrypts secrets with aesgcm and one
without encryption (identity, the default), alternated over the rounds.
"""

import base64
import json
import os
import statistics
import sys

import yaml

from common import compare_servers, compared_server, create_get_rounds

NAMESPACE = "bench-secrets"
SECRETS = f"/api/v1/namespaces/{NAMESPACE}/secrets"
GET_PATH = SECRETS + "/bench-get"
SERVERS = ("aesgcm", "identity")


def secret_body(workdir):
    """A ~2 KB Secret (ten 135-byte values, 180 bytes once base64-encoded) and its file."""
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bench"},
           "type": "Opaque",
           "data": {f"key{i}": base64.b64encode(os.urandom(135)).decode() for i in range(10)}}
    path = os.path.join(workdir, "secret.json")
    with open(path, "w") as f:
        json.dump(obj, f)
    return obj, path


def encryption_config(workdir):
    """An EncryptionConfiguration encrypting secrets with one random 32-byte aesgcm key."""
    path = os.path.join(workdir, "encryption.yaml")
    with open(path, "w") as f:
        yaml.safe_dump({
            "apiVersion": "apiserver.config.orch.io/v1", "kind": "EncryptionConfiguration",
            "resources": [{"resources": ["secrets"], "providers": [
                {"aesgcm": {"keys": [{"name": "bench",
                                      "secret": base64.b64encode(os.urandom(32)).decode()}]}},
                {"identity": {}}]}]}, f)
    os.chmod(path, 0o600)
    return path


def encryption_cases(workdir, args, report):
    """create@16 and GET@16 of Secrets on both servers, alternated over the rounds."""
    print("encryption: aesgcm against identity, Secret create@16 and GET@16", file=sys.stderr)
    template, body_path = secret_body(workdir)
    servers = {}
    try:
        for name in SERVERS:
            place = os.path.join(workdir, name)
            os.mkdir(place)
            flags = (["--encryption-provider-config", encryption_config(place)]
                     if name == "aesgcm" else [])
            servers[name] = compared_server(place, flags, NAMESPACE, SECRETS, template,
                                            "encryption")
        results = create_get_rounds(servers, args, SECRETS, GET_PATH, body_path,
                                    "encryption")
    finally:
        for orchd in servers.values():
            orchd.stop()
    report["encryption"] = compare_servers(results, "aesgcm", "identity")


def print_encryption(report):
    if "encryption" not in report:
        return
    e = report["encryption"]
    print(f"encryption at rest (16 connections, ~2 KB Secrets, medians of {report['rounds']} "
          f"rounds):")
    for verb in ("create", "get"):
        enc, plain = e[f"{verb}-aesgcm"], e[f"{verb}-identity"]
        errors = sum(r["errors"] + r["non_2xx"] for r in (enc, plain))
        rounds = e[f"{verb}_ratio_rounds"]
        print(f"       {verb}@16: aesgcm {enc['rps']:.0f}/s (p50 {enc['p50_ms']:.2f} ms, "
              f"p99 {enc['p99_ms']:.2f} ms, {enc['cpu_us']:.0f} us CPU), identity "
              f"{plain['rps']:.0f}/s (p50 {plain['p50_ms']:.2f} ms, p99 {plain['p99_ms']:.2f} "
              f"ms, {plain['cpu_us']:.0f} us CPU): ratio "
              f"{e[f'{verb}_ratio']:.3f} (rounds {', '.join(f'{r:.3f}' for r in rounds)}; "
              f"median of {statistics.median(rounds):.3f})"
              + (f"; errors {errors}" if errors else ""))
