# -*- test-case-name: tests.auth.test_authz_node -*-
"""
What each node may read: the pods bound to it and the objects they use.

The Node authorizer asks "is this secret (config map, claim, volume,
service account, attachment) used by a pod on node N?" on every request of
a node agent, so the answer is kept ready: for each object, how many pods on
each node use it. A pod that leaves takes only its own counts with it, so
what another pod still uses stays readable.

Relations follow upstream's graph: a pod uses the secrets, config maps,
claims and service account its spec names; a persistent volume belongs to
the claim its C{claimRef} names and uses the secrets its source names (those
the node agent reads); a volume attachment belongs to its C{nodeName}. Counts
flow from pods to claims to their volumes to those volumes' secrets.
"""

import sys

from orchd.storage.informer import Informer, start_all, stop_all
from orchd.storage.interfaces import DELETED

SECRET = "secrets"
CONFIG_MAP = "configmaps"
CLAIM = "persistentvolumeclaims"
VOLUME = "persistentvolumes"
SERVICE_ACCOUNT = "serviceaccounts"
ATTACHMENT = "volumeattachments"
POD = "pods"

#: Pods the node agent creates from its own files; they must grant nothing.
MIRROR_ANNOTATION = "orch.io/config.mirror"

_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
#: Pod volume sources naming a secret in C{secretRef.name}.
_SECRET_REF_SOURCES = ("cephfs", "cinder", "flexVolume", "rbd", "scaleIO", "iscsi", "storageos")
#: Volume sources naming a secret by reference: (source, field, whether an
#: empty namespace means the claim's), as upstream's PV secret visitor reads them.
_VOLUME_SECRET_REFS = (
    ("cephfs", "secretRef", True), ("cinder", "secretRef", False),
    ("flexVolume", "secretRef", True), ("rbd", "secretRef", True),
    ("scaleIO", "secretRef", True), ("iscsi", "secretRef", True),
    ("storageos", "secretRef", False), ("csi", "nodePublishSecretRef", False),
    ("csi", "nodeStageSecretRef", False), ("csi", "nodeExpandSecretRef", False),
)


def _dict(value):
    return value if isinstance(value, dict) else {}


def _dicts(value):
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _name(value):
    """A usable name, interned: thousands of pods name the same few objects."""
    return sys.intern(value) if isinstance(value, str) and value else None


def _identity(obj):
    meta = _dict(obj.get("metadata"))
    return _name(meta.get("namespace")) or "", _name(meta.get("name")) or ""


def _name_only(obj):
    return _identity(obj)[1]


def pod_references(pod):
    """
    C{(nodeName, refs)} of a pod: refs are C{(kind, name)} pairs in the pod's
    namespace, without repeats. Mirror pods reference nothing, so a node
    cannot grant itself access by writing a pod.
    """
    spec = _dict(pod.get("spec"))
    node = _name(spec.get("nodeName"))
    if MIRROR_ANNOTATION in _dict(_dict(pod.get("metadata")).get("annotations")):
        return node, ()
    refs = {}

    def add(kind, name):
        name = _name(name)
        if name:
            refs[(kind, name)] = None

    add(SERVICE_ACCOUNT, spec.get("serviceAccountName") or "default")
    for ref in _dicts(spec.get("imagePullSecrets")):
        add(SECRET, ref.get("name"))
    for field in _CONTAINER_LISTS:
        for container in _dicts(spec.get(field)):
            for source in _dicts(container.get("envFrom")):
                add(SECRET, _dict(source.get("secretRef")).get("name"))
                add(CONFIG_MAP, _dict(source.get("configMapRef")).get("name"))
            for env in _dicts(container.get("env")):
                value_from = _dict(env.get("valueFrom"))
                add(SECRET, _dict(value_from.get("secretKeyRef")).get("name"))
                add(CONFIG_MAP, _dict(value_from.get("configMapKeyRef")).get("name"))
    pod_name = _identity(pod)[1]
    for volume in _dicts(spec.get("volumes")):
        add(SECRET, _dict(volume.get("secret")).get("secretName"))
        add(SECRET, _dict(volume.get("azureFile")).get("secretName"))
        for source in _SECRET_REF_SOURCES:
            add(SECRET, _dict(_dict(volume.get(source)).get("secretRef")).get("name"))
        add(SECRET, _dict(_dict(volume.get("csi")).get("nodePublishSecretRef")).get("name"))
        add(CONFIG_MAP, _dict(volume.get("configMap")).get("name"))
        for source in _dicts(_dict(volume.get("projected")).get("sources")):
            add(SECRET, _dict(source.get("secret")).get("name"))
            add(CONFIG_MAP, _dict(source.get("configMap")).get("name"))
        add(CLAIM, _dict(volume.get("persistentVolumeClaim")).get("claimName"))
        if isinstance(volume.get("ephemeral"), dict) and isinstance(volume.get("name"), str):
            # The claim an ephemeral volume gets is named after pod and volume.
            add(CLAIM, f"{pod_name}-{volume['name']}")
    return node, tuple(refs)


def volume_references(volume):
    """
    C{(claim, secrets)} of a persistent volume: the C{(namespace, name)} of
    the claim it is bound to (None when unbound), and the secrets the node
    agent reads to mount it.
    """
    spec = _dict(volume.get("spec"))
    claim_ref = _dict(spec.get("claimRef"))
    claim_namespace, claim_name = _name(claim_ref.get("namespace")), _name(claim_ref.get("name"))
    if not claim_name:
        return None, ()
    claim_namespace = claim_namespace or ""
    secrets = {}
    azure = _dict(spec.get("azureFile"))
    name = _name(azure.get("secretName"))
    if name:
        secrets[(_name(azure.get("secretNamespace")) or claim_namespace, name)] = None
    for source, field, claim_default in _VOLUME_SECRET_REFS:
        ref = _dict(_dict(spec.get(source)).get(field))
        name = _name(ref.get("name"))
        if name:
            namespace = _name(ref.get("namespace")) or (claim_namespace if claim_default else "")
            secrets[(namespace, name)] = None
    return (claim_namespace, claim_name), tuple(secrets)


class NodeGraph:
    """
    The relations, kept current from informers on pods and (optionally)
    persistent volumes and volume attachments.

    @param store: where to list and watch from (an IStore or CachedReads).
    @param pods_prefix: the key prefix of pods.
    @param volumes_prefix: the key prefix of persistent volumes, or None to
        not follow them (then no node is related to any volume).
    @param attachments_prefix: likewise for volume attachments.
    """

    def __init__(self, store, pods_prefix, volumes_prefix=None, attachments_prefix=None):
        self._pods = {}             # (namespace, name) -> (node, refs)
        self._node_pods = {}        # node -> {(namespace, name)}
        self._uses = {}             # (kind, namespace, name) -> {node: number of uses}
        self._volumes = {}          # volume name -> (claim, secrets)
        self._claim_volumes = {}    # claim (namespace, name) -> {volume name}
        self._attachments = {}      # attachment name -> node
        self.synced = False
        # Informers keep only names: the graph holds what it needs itself.
        self._informers = [Informer(store, pods_prefix, self._pod_changed, keep=_identity)]
        if volumes_prefix is not None:
            self._informers.append(
                Informer(store, volumes_prefix, self._volume_changed, keep=_name_only))
        if attachments_prefix is not None:
            self._informers.append(
                Informer(store, attachments_prefix, self._attachment_changed, keep=_name_only))

    def start(self):
        """Fires once every followed resource has been listed."""
        d = start_all(self._informers)
        d.addCallback(lambda _: setattr(self, "synced", True))
        return d

    def stop(self):
        stop_all(self._informers)

    # -- questions (no store reads: dictionary lookups only) ----------------------

    def related(self, kind, namespace, name, node):
        """Whether object C{kind} C{namespace}/C{name} belongs to C{node}."""
        if kind == POD:
            return self.pod_node(namespace, name) == node
        if kind == ATTACHMENT:
            return self._attachments.get(name) == node
        return node in self._uses.get((kind, namespace, name), ())

    def pod_node(self, namespace, name):
        """The node a known pod is bound to, or None."""
        pod = self._pods.get((namespace, name))
        return pod[0] if pod is not None else None

    def pods_on(self, node):
        """The C{(namespace, name)} of the pods bound to C{node}."""
        return frozenset(self._node_pods.get(node, ()))

    def users(self, kind, namespace, name):
        """C{{node: number of uses}} of an object (a copy, for inspection)."""
        return dict(self._uses.get((kind, namespace, name), {}))

    # -- pods -----------------------------------------------------------------------

    def _pod_changed(self, type, obj, old):
        namespace, name = old if type == DELETED and old else _identity(obj)
        if type == DELETED:
            self.set_pod(namespace, name, None, ())
        else:
            self.set_pod(namespace, name, *pod_references(obj))

    def set_pod(self, namespace, name, node, refs):
        """Bind pod C{namespace}/C{name} to C{node} using C{refs} (node None: gone)."""
        key = (namespace, name)
        before = self._pods.get(key)
        if before == (node, refs) or (before is None and node is None):
            return
        if before is not None:
            del self._pods[key]
            old_node, old_refs = before
            pods = self._node_pods[old_node]
            pods.discard(key)
            if not pods:
                del self._node_pods[old_node]
            for kind, ref in old_refs:
                self._use(kind, namespace, ref, old_node, -1)
        if node is not None:
            self._pods[key] = (node, refs)
            self._node_pods.setdefault(node, set()).add(key)
            for kind, ref in refs:
                self._use(kind, namespace, ref, node, 1)

    def _use(self, kind, namespace, name, node, delta):
        self._count((kind, namespace, name), node, delta)
        if kind == CLAIM:
            for volume in self._claim_volumes.get((namespace, name), ()):
                self._use_volume(volume, node, delta)

    def _use_volume(self, volume, node, delta):
        self._count((VOLUME, "", volume), node, delta)
        for namespace, secret in self._volumes[volume][1]:
            self._count((SECRET, namespace, secret), node, delta)

    def _count(self, key, node, delta):
        nodes = self._uses.get(key)
        if nodes is None:
            nodes = self._uses[key] = {}
        count = nodes.get(node, 0) + delta
        if count > 0:
            nodes[node] = count
        else:
            nodes.pop(node, None)
            if not nodes:
                del self._uses[key]

    # -- volumes and attachments ------------------------------------------------------

    def _volume_changed(self, type, obj, old):
        name = old if type == DELETED and old else _name_only(obj)
        if type == DELETED:
            self.set_volume(name, None, ())
        else:
            self.set_volume(name, *volume_references(obj))

    def set_volume(self, name, claim, secrets):
        """Bind volume C{name} to C{claim} (None: unbound or gone), using C{secrets}."""
        before = self._volumes.get(name)
        if before == (claim, secrets) or (before is None and claim is None):
            return
        if before is not None:
            # Take back what the pods using the old claim gave the volume.
            for node, count in list(self._uses.get((CLAIM, *before[0]), {}).items()):
                self._use_volume(name, node, -count)
            del self._volumes[name]
            volumes = self._claim_volumes[before[0]]
            volumes.discard(name)
            if not volumes:
                del self._claim_volumes[before[0]]
        if claim is not None:
            self._volumes[name] = (claim, secrets)
            self._claim_volumes.setdefault(claim, set()).add(name)
            for node, count in list(self._uses.get((CLAIM, *claim), {}).items()):
                self._use_volume(name, node, count)

    def _attachment_changed(self, type, obj, old):
        name = old if type == DELETED and old else _name_only(obj)
        node = None if type == DELETED else _name(_dict(obj.get("spec")).get("nodeName"))
        if node is None:
            self._attachments.pop(name, None)
        else:
            self._attachments[name] = node
