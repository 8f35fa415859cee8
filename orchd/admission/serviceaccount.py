# -*- test-case-name: tests.admission.test_serviceaccount -*-
"""
Service-account admission: every new pod runs as an account that exists,
and gets that account's API credentials mounted.

On pod creation (upstream C{plugin/pkg/admission/serviceaccount}) this
names C{default} when the pod names no account, refuses a pod whose
account is missing, adds a projected volume (a bound token, the root CA
map, the namespace) mounted in every container unless automounting is off
on the pod or else on the account, and copies the account's image pull
secrets into a pod that has none. Mirror pods, written by a node agent
from its own files, are not changed: they may not use an account at all.
"""

import random

import orjson
from zope.interface import implementer

from orchd.admission.interfaces import CREATE, IAdmissionPlugin
from orchd.api import meta as metadata
from orchd.api.errors import StatusError
from orchd.api.kinds import key_prefix_of
from orchd.auth.nodegraph import MIRROR_ANNOTATION, SECRET, pod_references

DEFAULT_ACCOUNT = "default"
#: The ConfigMap with the API server's CA in every namespace (upstream
#: C{kube-root-ca.crt}), kept by L{orchd.controllers.rootca}.
ROOT_CA_CONFIG_MAP = "orch-root-ca.crt"
CA_KEY = "ca.crt"
VOLUME_PREFIX = "orch-api-access-"
MOUNT_PATH = "/var/run/secrets/orch.io/serviceaccount"
#: Upstream's lifetime of the projected token: an hour and 7 s, a value
#: the server recognises to warn about (rather than reject) old tokens.
TOKEN_EXPIRATION_SECONDS = 3607
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def token_volume(name):
    """The projected volume with the token, the root CA and the namespace."""
    return {"name": name, "projected": {"sources": [
        {"serviceAccountToken": {"path": "token",
                                 "expirationSeconds": TOKEN_EXPIRATION_SECONDS}},
        {"configMap": {"name": ROOT_CA_CONFIG_MAP,
                       "items": [{"key": CA_KEY, "path": CA_KEY}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ], "defaultMode": 0o644}}


def _dicts(value):
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def should_automount(account, pod_spec):
    """The pod's C{automountServiceAccountToken} wins, then the account's; default yes."""
    for setting in (pod_spec.get("automountServiceAccountToken"),
                    account.get("automountServiceAccountToken")):
        if isinstance(setting, bool):
            return setting
    return True


@implementer(IAdmissionPlugin)
class ServiceAccountAdmission:
    """
    @param store: the L{orchd.storage.interfaces.IStore} accounts are read from.
    @param random_source: for the volume's name (C{choice(sequence)}).
    """

    resources = frozenset({("", "pods")})

    def __init__(self, store, random_source=None):
        self._store = store
        self._random = random_source or random.SystemRandom()
        self._prefix = key_prefix_of("", "serviceaccounts")

    @staticmethod
    def _applies(attributes):
        info = attributes.info
        return ((info.group, info.resource) == ("", "pods") and not attributes.subresource
                and attributes.operation == CREATE and isinstance(attributes.obj, dict))

    @staticmethod
    def _is_mirror(pod):
        annotations = (pod.get("metadata") or {}).get("annotations")
        return isinstance(annotations, dict) and MIRROR_ANNOTATION in annotations

    def admit(self, attributes):
        if not self._applies(attributes) or self._is_mirror(attributes.obj):
            return None
        return self._admit_pod(attributes)

    async def _admit_pod(self, attributes):
        pod = attributes.obj
        spec = pod.get("spec")
        if not isinstance(spec, dict):
            return      # validation refuses it
        name = spec.get("serviceAccountName") or spec.get("serviceAccount") or DEFAULT_ACCOUNT
        spec["serviceAccountName"] = spec["serviceAccount"] = name
        account = await self._account(attributes, name)
        if should_automount(account, spec):
            self._mount_token(spec)
        if not spec.get("imagePullSecrets"):
            pulls = [{"name": ref["name"]} for ref in _dicts(account.get("imagePullSecrets"))
                     if ref.get("name")]
            if pulls:
                spec["imagePullSecrets"] = pulls

    async def _account(self, attributes, name):
        kv = await self._store.get(f"{self._prefix}{attributes.namespace}/{name}")
        if kv is None:
            self._refuse(attributes, f"error looking up service account "
                                     f"{attributes.namespace}/{name}: "
                                     f'serviceaccount "{name}" not found')
        return orjson.loads(kv.value)

    def _mount_token(self, spec):
        volumes = _dicts(spec.get("volumes"))
        existing = [v["name"] for v in volumes
                    if isinstance(v.get("name"), str) and v["name"].startswith(VOLUME_PREFIX)]
        volume_name = existing[0] if existing else metadata.generate_name(VOLUME_PREFIX,
                                                                          self._random)
        needed = False
        for field in _CONTAINER_LISTS:
            for container in _dicts(spec.get(field)):
                mounts = container.get("volumeMounts")
                if not isinstance(mounts, list):
                    mounts = container["volumeMounts"] = []
                if any(m.get("mountPath") == MOUNT_PATH for m in _dicts(mounts)):
                    continue
                mounts.append({"name": volume_name, "readOnly": True, "mountPath": MOUNT_PATH})
                needed = True
        if needed and not existing:
            if not isinstance(spec.get("volumes"), list):
                spec["volumes"] = []
            spec["volumes"].append(token_volume(volume_name))

    def validate(self, attributes):
        pod = attributes.obj
        if not self._applies(attributes):
            return
        spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
        if not self._is_mirror(pod):
            if not spec.get("serviceAccountName"):
                self._refuse(attributes, f"no service account specified for pod "
                                         f"{attributes.namespace}/{attributes.name}")
            return
        if spec.get("serviceAccountName"):
            self._refuse(attributes, "a mirror pod may not reference service accounts")
        meta = pod.get("metadata") or {}
        _, uses = pod_references(dict(pod, metadata=dict(meta, annotations={})))
        if any(kind == SECRET for kind, _ in uses):
            self._refuse(attributes, "a mirror pod may not reference secrets")
        for volume in _dicts(spec.get("volumes")):
            projected = volume.get("projected")
            sources = _dicts(projected.get("sources")) if isinstance(projected, dict) else []
            if any("serviceAccountToken" in source for source in sources):
                self._refuse(attributes, "a mirror pod may not use ServiceAccountToken "
                                         "volume projections")

    @staticmethod
    def _refuse(attributes, why):
        raise StatusError.forbidden("pods", "", attributes.name, why)
