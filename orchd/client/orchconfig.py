# -*- test-case-name: tests.app.test_pki -*-
"""
The orchconfig file: kubeconfig's format, read and written.

Unmodified C{kubectl} and the official Python client read the files orchd
writes, so the layout is kubeconfig's (C{apiVersion: v1}, C{kind: Config},
named clusters, users and contexts). orchd's own clients (the node agent,
tests) read them back with L{load_orchconfig}, which resolves the
C{current-context} and returns the credentials as PEM bytes.
"""

import base64
import ipaddress
import os
import tempfile

import attr
import yaml

from orchd.api import yamldecode

CLUSTER_NAME = "orchd"
ADMIN_USER = "orch-admin"


class OrchConfigError(ValueError):
    """An orchconfig file is unreadable or inconsistent; the message names the file."""


def write_file_atomically(path, data, mode=0o600):
    """
    Replace C{path} with C{data} in one step, the file never visible half-written
    or with looser permissions than C{mode}.

    The temporary file is created with mode 0600 in the same directory, so the
    final C{os.replace} is atomic and a private key is never world-readable.
    """
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.",
                                         suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            os.fchmod(stream.fileno(), mode)
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def server_url(bind_address, port):
    """
    The URL clients use to reach a listener on C{bind_address}: a wildcard or
    empty address is reached through 127.0.0.1, and IPv6 goes in brackets.
    """
    host = (bind_address or "").strip()
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    try:
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    except ValueError:
        pass                 # a host name
    return f"https://{host}:{int(port)}"


def _b64(pem):
    return base64.b64encode(pem).decode("ascii")


def orchconfig_document(server, ca_pem, client_cert_pem=None, client_key_pem=None, token=None,
                        cluster=CLUSTER_NAME, user=ADMIN_USER, namespace="default"):
    """
    The orchconfig for one cluster, one user and their context, as a dict.

    Credentials are embedded (C{*-data}, base64 of the whole PEM) so the file
    can be copied alone.
    """
    cluster_entry = {"server": server}
    if ca_pem:
        cluster_entry["certificate-authority-data"] = _b64(ca_pem)
    user_entry = {}
    if client_cert_pem:
        user_entry["client-certificate-data"] = _b64(client_cert_pem)
    if client_key_pem:
        user_entry["client-key-data"] = _b64(client_key_pem)
    if token:
        user_entry["token"] = token
    context = f"{user}@{cluster}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": cluster_entry}],
        "users": [{"name": user, "user": user_entry}],
        "contexts": [{"name": context,
                      "context": {"cluster": cluster, "user": user, "namespace": namespace}}],
        "current-context": context,
        "preferences": {},
    }


def cluster_info_document(server, ca_pem, cluster=""):
    """The C{cluster-info} flavour: the cluster alone, no users or contexts."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster,
                      "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)}}],
        "users": [],
        "contexts": [],
        "current-context": "",
        "preferences": {},
    }


def dump_orchconfig(document):
    """YAML text of an orchconfig document, keys in the order kubectl writes them."""
    return yaml.safe_dump(document, default_flow_style=False, sort_keys=False)


def write_orchconfig(path, server, ca_pem, client_cert_pem=None, client_key_pem=None, token=None,
                     cluster=CLUSTER_NAME, user=ADMIN_USER, namespace="default"):
    """Write an orchconfig atomically with mode 0600 (it may hold a private key)."""
    document = orchconfig_document(server, ca_pem, client_cert_pem, client_key_pem, token,
                                   cluster=cluster, user=user, namespace=namespace)
    write_file_atomically(path, dump_orchconfig(document).encode("utf-8"), 0o600)


def set_orchconfig_server(path, server, cluster=CLUSTER_NAME):
    """
    Point cluster C{cluster} of an existing file at C{server}, keeping the rest.

    Used on restart when the port or address changed: the credentials stay.
    @return: True if the file changed.
    """
    document = yamldecode.load_file(path)
    for entry in document.get("clusters") or ():
        if entry.get("name") == cluster and entry.get("cluster", {}).get("server") != server:
            entry["cluster"]["server"] = server
            write_file_atomically(path, dump_orchconfig(document).encode("utf-8"), 0o600)
            return True
    return False


@attr.s(frozen=True, slots=True)
class OrchConfig:
    """
    What a client needs from an orchconfig's current context.

    PEM fields are bytes or None; C{token} is text or None.
    """

    server = attr.ib()
    ca_pem = attr.ib(default=None)
    client_cert_pem = attr.ib(default=None)
    client_key_pem = attr.ib(default=None)
    token = attr.ib(default=None)
    insecure_skip_tls_verify = attr.ib(default=False)
    tls_server_name = attr.ib(default=None)
    namespace = attr.ib(default="default")


def _named(document, section, name, path):
    for entry in document.get(section) or ():
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry.get(section[:-1]) or {}
    raise OrchConfigError(f"{path}: no {section[:-1]} named {name!r}")


def _read_relative(base, file_name, key, path):
    full = os.path.join(base, os.path.expanduser(file_name))
    try:
        with open(full, "rb") as stream:
            return stream.read()
    except OSError as error:
        raise OrchConfigError(f"{path}: cannot read {key} {full}: {error.strerror}") from None


def _credential(entry, data_key, path_key, base, path):
    """One credential given inline (base64) or as a path relative to the file."""
    data, file_name = entry.get(data_key), entry.get(path_key)
    if data and file_name:
        raise OrchConfigError(f"{path}: {data_key} and {path_key} are both specified")
    if data:
        try:
            return base64.b64decode(data, validate=True)
        except ValueError:
            raise OrchConfigError(f"{path}: {data_key} is not valid base64") from None
    if file_name:
        return _read_relative(base, file_name, path_key, path)
    return None


def _choose_context(document, path):
    current = document.get("current-context")
    contexts = document.get("contexts") or []
    if current:
        return _named(document, "contexts", current, path)
    if len(contexts) == 1:
        return contexts[0].get("context") or {}
    if not contexts and len(document.get("clusters") or []) == 1:
        # cluster-info style: a cluster and no user.
        return {"cluster": document["clusters"][0].get("name")}
    raise OrchConfigError(f"{path}: no current-context")


def load_orchconfig(path):
    """
    Read the current context of the orchconfig at C{path}.

    Path fields are relative to the file's directory; C{*-data} fields are base64.
    @raise OrchConfigError: if the file is missing, not YAML, or its current
        context names a cluster or user it does not define.
    """
    try:
        document = yamldecode.load_file(path)
    except OSError as error:
        raise OrchConfigError(f"{path}: cannot read: {error.strerror}") from None
    except yamldecode.YAMLDecodeError as error:
        raise OrchConfigError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(document, dict):
        raise OrchConfigError(f"{path}: not an orchconfig (expected a mapping)")
    base = os.path.dirname(os.path.abspath(path))
    context = _choose_context(document, path)
    cluster = _named(document, "clusters", context.get("cluster"), path)
    user = _named(document, "users", context["user"], path) if context.get("user") else {}
    server = cluster.get("server")
    if not server:
        raise OrchConfigError(f"{path}: cluster {context.get('cluster')!r} has no server")
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = _read_relative(base, user["tokenFile"], "tokenFile", path).decode("utf-8").strip()
    return OrchConfig(
        server=server,
        ca_pem=_credential(cluster, "certificate-authority-data", "certificate-authority",
                           base, path),
        client_cert_pem=_credential(user, "client-certificate-data", "client-certificate",
                                    base, path),
        client_key_pem=_credential(user, "client-key-data", "client-key", base, path),
        token=token or None,
        insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify", False)),
        tls_server_name=cluster.get("tls-server-name"),
        namespace=context.get("namespace") or "default",
    )
