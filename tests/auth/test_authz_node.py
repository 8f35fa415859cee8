"""The Node mode: node identity, the graph of pods and what they use, decisions."""

import orjson
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from orchd.api.kinds import COORDINATION, STORAGE
from orchd.auth.attributes import Attributes
from orchd.auth.authz.node import ATTACHMENTS_PREFIX, PODS_PREFIX, VOLUMES_PREFIX
from orchd.auth.authz.node import NodeAuthorizer, node_name
from orchd.auth.interfaces import Decision, IAuthorizer
from orchd.auth.nodegraph import CONFIG_MAP, SECRET, pod_references, volume_references
from orchd.auth.user import UserInfo
from orchd.storage.interfaces import CompactedError
from orchd.storage.memory import MemoryStore

ALLOW, DENY, NONE = Decision.ALLOW, Decision.DENY, Decision.NO_OPINION
N1 = UserInfo("system:node:n1", ("system:nodes", "system:authenticated"))
N2 = UserInfo("system:node:n2", ("system:nodes",))
NO_RELATION = "no relationship found between node 'n1' and this object"
LEASE = {"group": COORDINATION, "namespace": "orch-node-lease"}
CLUSTER = {"namespace": ""}
STATUS = {"subresource": "status"}


def pod(name, node="n1", annotations=None, **spec):
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "annotations": annotations or {}}
    spec = {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}], **spec}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def secret_volume(name):
    return {"name": f"v-{name}", "secret": {"secretName": name}}


def claim_volume(name):
    return {"name": f"v-{name}", "persistentVolumeClaim": {"claimName": name}}


def volume(name, claim=(None, None), **source):
    spec = {"claimRef": {"namespace": claim[0], "name": claim[1]}, **source}
    return {"kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


class Fixture(SynchronousTestCase):
    def setUp(self):
        self.store = MemoryStore()

    def start(self, **kwargs):
        self.authorizer = NodeAuthorizer(self.store, **kwargs)
        self.successResultOf(self.authorizer.start())
        self.addCleanup(self.authorizer.stop)
        return self.authorizer

    def write(self, prefix, obj):
        meta = obj["metadata"]
        key = prefix + (f"{meta['namespace']}/" if "namespace" in meta else "") + meta["name"]
        current, value = self.successResultOf(self.store.get(key)), orjson.dumps(obj)
        self.successResultOf(self.store.create(key, value) if current is None
                             else self.store.update(key, value, current.mod_revision))

    def put_pod(self, obj):
        self.write(PODS_PREFIX, obj)

    def delete_pod(self, name):
        self.successResultOf(self.store.delete(f"{PODS_PREFIX}ns/{name}"))

    def decide(self, verb, resource, user=N1, name="", namespace="ns", group="", subresource=""):
        return self.authorizer.authorize(Attributes(
            user, verb, namespace=namespace, api_group=group, resource=resource,
            subresource=subresource, name=name))

    def check(self, expected, verbs, resource, **kwargs):
        for verb in verbs.split():
            decision, _ = self.decide(verb, resource, **kwargs)
            self.assertEqual(decision, expected, (verb, resource, kwargs))


class IdentityTests(Fixture):
    def test_interface(self):
        """The Node authorizer provides IAuthorizer."""
        verifyObject(IAuthorizer, self.start())

    def test_node_name(self):
        """A node is a system:node:<name> user in group system:nodes."""
        self.assertEqual(node_name(N1), "n1")
        self.assertIsNone(node_name(UserInfo("system:node:n1")))
        self.assertIsNone(node_name(UserInfo("alice", ("system:nodes",))))
        self.assertEqual(node_name(UserInfo("system:node:", ("system:nodes",))), "")

    def test_others_get_no_opinion(self):
        """Users not nodes get no opinion, even for node-rule requests; nameless nodes a reason."""
        self.start()
        for user, reason in ((UserInfo("alice", ("system:nodes",)), ""),
                             (UserInfo("system:node:n1"), ""),
                             (UserInfo("system:node:", ("system:nodes",)),
                              'unknown node for user "system:node:"')):
            self.assertEqual(self.decide("get", "nodes", user=user, **CLUSTER), (NONE, reason))

    def test_rules_for(self):
        """A node's permissions cannot be enumerated; other users' are simply empty."""
        authorizer = self.start()
        self.assertEqual(authorizer.rules_for(N1, "ns"), ([], [], True))
        self.assertEqual(authorizer.rules_for(UserInfo("alice"), "ns"), ([], [], False))


class ReferenceTests(SynchronousTestCase):
    def test_pod_references(self):
        """Every place a pod names a secret, config map, claim or service account counts."""
        env = [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "key", "key": "k"}}},
               {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "cm-key", "key": "k"}}},
               {"name": "C", "value": "plain"}]
        volumes = [
            secret_volume("vol"), {"name": "cm", "configMap": {"name": "cm-vol"}},
            {"name": "p", "projected": {"sources": [
                {"secret": {"name": "proj"}}, {"configMap": {"name": "cm-proj"}},
                {"serviceAccountToken": {"path": "token"}}]}},
            {"name": "csi", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi"}}},
            {"name": "rbd", "rbd": {"secretRef": {"name": "rbd"}}},
            {"name": "az", "azureFile": {"secretName": "az", "shareName": "s"}},
            claim_volume("claim"),
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}]
        node, refs = pod_references(pod(
            "p", serviceAccountName="runner", imagePullSecrets=[{"name": "pull"}], volumes=volumes,
            initContainers=[{"name": "i", "envFrom": [{"secretRef": {"name": "init-env"}}]}],
            containers=[{"name": "c", "env": env,
                         "envFrom": [{"configMapRef": {"name": "cm-env"}}]}],
            ephemeralContainers=[{"name": "e", "envFrom": [{"secretRef": {"name": "eph"}}]}]))
        secrets = ("pull", "init-env", "key", "eph", "vol", "proj", "csi", "rbd", "az")
        self.assertEqual((node, sorted(refs)), ("n1", sorted(
            [("serviceaccounts", "runner"), *((SECRET, n) for n in secrets),
             *((CONFIG_MAP, n) for n in ("cm-key", "cm-env", "cm-vol", "cm-proj")),
             ("persistentvolumeclaims", "claim"), ("persistentvolumeclaims", "p-scratch")])))

    def test_defaults_repeats_and_odd_shapes(self):
        """No service account name means C{default}; names count once; odd shapes are skipped."""
        volumes = [secret_volume("s"), secret_volume("s"), "x", {"secret": "y"}]
        odd_env = [{"env": [{"valueFrom": None}, "z"]}]
        _, refs = pod_references(pod("p", volumes=volumes, containers=odd_env))
        self.assertEqual(refs, (("serviceaccounts", "default"), (SECRET, "s")))

    def test_volume_references(self):
        """A volume belongs to its claim and uses the secrets the node agent reads."""
        pv = volume("pv1", ("ns", "claim"),
                    csi={"driver": "d", "nodePublishSecretRef": {"name": "pub", "namespace": "x"},
                         "controllerPublishSecretRef": {"name": "ctl", "namespace": "x"}})
        self.assertEqual(volume_references(pv), (("ns", "claim"), (("x", "pub"),)))
        rbd = volume("pv2", ("ns", "claim"), rbd={"secretRef": {"name": "ceph"}})
        self.assertEqual(volume_references(rbd), (("ns", "claim"), (("ns", "ceph"),)))
        self.assertEqual(volume_references(volume("pv3")), (None, ()))


class GraphTests(Fixture):
    def test_listed_pods_are_in_the_graph(self):
        """Pods listed at start are in the graph; the informer keeps only their names."""
        self.put_pod(pod("a", volumes=[secret_volume("s")]))
        self.put_pod(pod("b", node=None, volumes=[secret_volume("t")]))
        authorizer = self.start()
        self.assertTrue(authorizer.graph.synced)
        self.assertEqual(authorizer.graph.pods_on("n1"), {("ns", "a")})
        self.check(ALLOW, "get", "secrets", name="s")
        self.check(NONE, "get", "secrets", name="t")
        self.assertEqual(sorted(authorizer.graph._informers[0].objects()),
                         [("ns", "a"), ("ns", "b")])

    def test_created_pod(self):
        """A pod bound later relates its objects to its node, and only to it."""
        self.start()
        self.assertEqual(self.decide("get", "secrets", name="s"), (NONE, NO_RELATION))
        self.put_pod(pod("a", node=None, volumes=[secret_volume("s")]))
        self.check(NONE, "get", "secrets", name="s")
        self.put_pod(pod("a", volumes=[secret_volume("s")]))
        self.check(ALLOW, "get", "secrets", name="s")
        self.check(NONE, "get", "secrets", user=N2, name="s")
        self.check(NONE, "get", "secrets", name="s", namespace="other")

    def test_rebound_pod(self):
        """A pod moved to another node takes its objects along."""
        self.start()
        self.put_pod(pod("a", volumes=[secret_volume("s")]))
        self.put_pod(pod("a", node="n2", volumes=[secret_volume("s")]))
        self.check(NONE, "get", "secrets", name="s")
        self.check(ALLOW, "get", "secrets", user=N2, name="s")
        self.assertEqual(self.authorizer.graph.pods_on("n1"), frozenset())
        self.assertEqual(self.authorizer.graph.pods_on("n2"), {("ns", "a")})

    def test_changed_references(self):
        """A pod whose references change (an ephemeral container added) is re-read."""
        self.start()
        self.put_pod(pod("a"))
        self.put_pod(pod("a", ephemeralContainers=[
            {"name": "debug", "envFrom": [{"secretRef": {"name": "dbg"}}]}]))
        self.check(ALLOW, "get", "secrets", name="dbg")

    def test_deleted_pods(self):
        """Pods share a secret: it stays a node's until the last of its pods is deleted."""
        self.start()
        self.put_pod(pod("a", volumes=[secret_volume("s")]))
        self.put_pod(pod("b", volumes=[secret_volume("s")]))
        self.put_pod(pod("c", node="n2", volumes=[secret_volume("s")]))
        self.assertEqual(self.authorizer.graph.users(SECRET, "ns", "s"), {"n1": 2, "n2": 1})
        self.delete_pod("a")
        self.check(ALLOW, "get", "secrets", name="s")
        self.delete_pod("b")
        self.check(NONE, "get", "secrets", name="s")
        self.check(NONE, "create", "serviceaccounts", name="default", subresource="token")
        self.check(ALLOW, "get", "secrets", user=N2, name="s")
        self.delete_pod("c")
        self.assertEqual(self.authorizer.graph.users(SECRET, "ns", "s"), {})

    def test_relist(self):
        """After losing its watch the graph lists again and applies only the difference."""
        self.put_pod(pod("a", volumes=[secret_volume("s")]))
        self.put_pod(pod("b", volumes=[secret_volume("s")]))
        self.put_pod(pod("c", volumes=[secret_volume("t")]))
        self.start()
        informer = self.authorizer.graph._informers[0]
        informer._watch.stop()
        informer._watch = None
        self.delete_pod("a")
        self.delete_pod("c")
        self.put_pod(pod("b", node="n2", volumes=[secret_volume("s")]))
        self.put_pod(pod("d", volumes=[secret_volume("u")]))
        informer._failed(CompactedError(1, 2))
        graph = self.authorizer.graph
        self.assertEqual(graph.users(SECRET, "ns", "s"), {"n2": 1})
        self.assertEqual(graph.users(SECRET, "ns", "t"), {})
        self.assertEqual(graph.pods_on("n1"), {("ns", "d")})
        self.check(ALLOW, "get", "secrets", name="u")
        self.check(NONE, "get", "secrets", name="s")

    def test_volumes_follow_claims(self):
        """A volume bound to a used claim, and its secrets, are readable by the node."""
        self.start()
        claim_pod = pod("a", volumes=[claim_volume("c")])
        self.put_pod(claim_pod)
        stage = {"name": "st", "namespace": "ns"}
        pv = volume("pv1", ("ns", "c"), csi={"driver": "d", "nodeStageSecretRef": stage})
        self.write(VOLUMES_PREFIX, pv)
        self.check(ALLOW, "get", "persistentvolumeclaims", name="c")
        self.check(ALLOW, "get", "persistentvolumes", name="pv1", namespace="")
        self.check(ALLOW, "get", "secrets", name="st")
        self.check(NONE, "get", "persistentvolumes", user=N2, name="pv1", namespace="")
        # Re-bound to another claim: the node loses the volume and its secret.
        self.write(VOLUMES_PREFIX, volume("pv1", ("ns", "other")))
        self.check(NONE, "get", "persistentvolumes", name="pv1", namespace="")
        self.check(NONE, "get", "secrets", name="st")
        self.write(VOLUMES_PREFIX, pv)
        self.delete_pod("a")
        self.check(NONE, "get", "persistentvolumes", name="pv1", namespace="")
        self.check(NONE, "get", "secrets", name="st")
        self.put_pod(claim_pod)
        self.successResultOf(self.store.delete(VOLUMES_PREFIX + "pv1"))
        self.check(NONE, "get", "secrets", name="st")
        self.check(ALLOW, "get", "persistentvolumeclaims", name="c")

    def test_volumes_not_followed(self):
        """Without a volumes prefix no node may get a volume."""
        self.write(VOLUMES_PREFIX, volume("pv1", ("ns", "c")))
        self.put_pod(pod("a", volumes=[claim_volume("c")]))
        self.start(volumes_prefix=None, attachments_prefix=None)
        self.assertEqual(len(self.authorizer.graph._informers), 1)
        self.check(NONE, "get", "persistentvolumes", name="pv1", namespace="")

    def test_attachments(self):
        """A volume attachment is readable by the node it names."""
        self.start()
        self.write(ATTACHMENTS_PREFIX, {"metadata": {"name": "va1"}, "spec": {"nodeName": "n1"}})
        kwargs = {"name": "va1", "namespace": "", "group": STORAGE}
        self.check(ALLOW, "get", "volumeattachments", **kwargs)
        self.check(NONE, "get", "volumeattachments", user=N2, **kwargs)
        self.check(NONE, "list", "volumeattachments", namespace="", group=STORAGE)
        self.successResultOf(self.store.delete(ATTACHMENTS_PREFIX + "va1"))
        self.check(NONE, "get", "volumeattachments", **kwargs)


class DecisionTests(Fixture):
    def setUp(self):
        super().setUp()
        self.put_pod(pod("mine", serviceAccountName="runner",
                         volumes=[secret_volume("s"), {"name": "c", "configMap": {"name": "cm"}},
                                  claim_volume("pvc")]))
        self.put_pod(pod("theirs", node="n2", serviceAccountName="other",
                         volumes=[secret_volume("t")]))
        self.start()

    def test_secrets_and_config_maps(self):
        """Only objects its pods use, one at a time; never collections or writes."""
        for resource, used, unused in (("secrets", "s", "t"), ("configmaps", "cm", "x")):
            # A list or watch pinned to one name by its field selector counts too.
            self.check(ALLOW, "get list watch", resource, name=used)
            self.assertEqual(self.decide("get", resource, name=unused), (NONE, NO_RELATION))
            self.assertEqual(self.decide("list", resource), (NONE, "No Object name found"))
            self.check(NONE, "watch", resource, namespace="")
            self.check(NONE, "update delete create", resource, name=used)
            self.check(NONE, "get", resource, name=used, subresource="x")

    def test_claims_and_volumes(self):
        """Claims its pods use may be read and their status written; nothing else."""
        self.check(ALLOW, "get", "persistentvolumeclaims", name="pvc")
        self.check(NONE, "get", "persistentvolumeclaims", name="other")
        self.check(NONE, "list watch update delete", "persistentvolumeclaims")
        self.check(ALLOW, "update patch", "persistentvolumeclaims", name="pvc", **STATUS)
        self.check(NONE, "patch", "persistentvolumeclaims", name="other", **STATUS)
        self.check(NONE, "get", "persistentvolumeclaims", name="pvc", **STATUS)
        self.check(NONE, "get", "persistentvolumes", name="pv", **CLUSTER)

    def test_service_account_tokens(self):
        """Tokens only for the service accounts of its pods."""
        self.check(ALLOW, "create", "serviceaccounts", name="runner", subresource="token")
        self.check(NONE, "create", "serviceaccounts", name="other", subresource="token")
        self.check(NONE, "create", "serviceaccounts", subresource="token")
        self.check(NONE, "get", "serviceaccounts", name="runner")

    def test_leases(self):
        """Its own lease in the node-lease namespace; writes to others' are denied."""
        self.check(ALLOW, "get update patch delete", "leases", name="n1", **LEASE)
        self.check(ALLOW, "create", "leases", **LEASE)
        self.check(NONE, "get", "leases", name="n2", **LEASE)
        self.check(DENY, "update patch delete", "leases", name="n2", **LEASE)
        self.check(NONE, "list watch", "leases", **LEASE)
        self.check(NONE, "get", "leases", name="n1", group=COORDINATION, namespace="orch-system")

    def test_csinodes(self):
        """Its own CSINode only; writes to others' are denied."""
        self.check(ALLOW, "get update delete", "csinodes", name="n1", group=STORAGE, **CLUSTER)
        self.check(ALLOW, "create", "csinodes", group=STORAGE, **CLUSTER)
        self.check(DENY, "update patch delete", "csinodes", name="n2", group=STORAGE, **CLUSTER)
        self.check(NONE, "get", "csinodes", name="n2", group=STORAGE, **CLUSTER)

    def test_nodes(self):
        """Nodes are readable and creatable; only its own may be written."""
        self.check(ALLOW, "get list watch", "nodes", name="n2", **CLUSTER)
        self.check(ALLOW, "create", "nodes", **CLUSTER)
        for subresource in ("", "status"):
            self.check(ALLOW, "update patch", "nodes", name="n1", subresource=subresource)
            self.check(DENY, "update patch", "nodes", name="n2", subresource=subresource)
        self.assertEqual(self.decide("patch", "nodes", name="n2", **CLUSTER),
                         (DENY, 'node "n1" is not allowed to modify node "n2"'))
        self.check(NONE, "delete", "nodes", name="n1", **CLUSTER)
        self.check(NONE, "get", "nodes", name="n1", subresource="proxy", **CLUSTER)

    def test_pods(self):
        """Pods are readable, mirror pods creatable; only pods bound to it writable."""
        self.check(ALLOW, "get list watch", "pods", name="theirs")
        self.check(ALLOW, "create", "pods")
        self.check(ALLOW, "delete", "pods", name="mine")
        self.check(ALLOW, "update patch", "pods", name="mine", **STATUS)
        self.check(ALLOW, "create", "pods", name="mine", subresource="eviction")
        for name in ("theirs", "unknown"):
            self.check(DENY, "delete", "pods", name=name)
            self.check(DENY, "update patch", "pods", name=name, **STATUS)
            self.check(DENY, "create", "pods", name=name, subresource="eviction")
        self.assertEqual(
            self.decide("delete", "pods", name="theirs"),
            (DENY, 'node "n1" can only delete pods with spec.nodeName set to itself'))
        self.check(NONE, "update patch", "pods", name="mine")
        self.check(NONE, "deletecollection", "pods")
        self.check(NONE, "get", "pods", name="mine", subresource="log")

    def test_static_rules(self):
        """Other requests the node rules allow are allowed; the rest get no opinion."""
        self.check(ALLOW, "create patch", "events")
        self.check(ALLOW, "list", "services", **CLUSTER)
        self.check(ALLOW, "create", "tokenreviews", group="authentication.orch.io", **CLUSTER)
        self.check(ALLOW, "create", "certificatesigningrequests", group="certificates.orch.io",
                   **CLUSTER)
        self.check(NONE, "delete", "events", name="e")
        self.check(NONE, "get", "deployments", name="d", group="apps")
        self.check(NONE, "create", "namespaces", **CLUSTER)
        # The node rules name no URLs.
        attributes = Attributes(N1, "get", is_resource_request=False, path="/healthz")
        self.assertEqual(self.authorizer.authorize(attributes), (NONE, ""))


class LifecycleTests(Fixture):
    def test_before_start(self):
        """Before the first listing nothing is related, and the reason says why."""
        self.put_pod(pod("a", volumes=[secret_volume("s")]))
        self.authorizer = NodeAuthorizer(self.store)
        self.assertEqual(self.decide("get", "secrets", name="s"),
                         (NONE, NO_RELATION + " (the node authorizer has not listed pods yet)"))

    def test_stop(self):
        """After stop the graph follows the store no more."""
        self.start()
        self.authorizer.stop()
        self.put_pod(pod("a", volumes=[secret_volume("s")]))
        self.check(NONE, "get", "secrets", name="s")

    def test_mirror_pod(self):
        """A mirror pod is the node's to write, but grants it nothing it names."""
        self.start()
        self.put_pod(pod("m", annotations={"orch.io/config.mirror": "hash"},
                         volumes=[secret_volume("s")]))
        self.check(ALLOW, "patch", "pods", name="m", subresource="status")
        self.check(NONE, "get", "secrets", name="s")
        self.check(NONE, "create", "serviceaccounts", name="default", subresource="token")
