"""
A small kopf operator, written as for production: run it with
C{kopf run widgets.py}. It reports each Widget's size in the Widget's
C{status} and keeps a ConfigMap per Widget (owned by it, so that deleting
the Widget deletes the ConfigMap through garbage collection).

C{test_widgets.py} tests it against a real orchd.
"""

import os

import kopf
import kubernetes


@kopf.on.startup()
def configure(**_):
    """The official client's credentials: in a pod its service account, else $KUBECONFIG."""
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        # Read $KUBECONFIG now: the client only reads it when first imported.
        kubernetes.config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))


def configmap_for(name, size):
    """The ConfigMap the operator keeps for a Widget."""
    return {"metadata": {"name": f"{name}-size"}, "data": {"size": str(size)}}


@kopf.on.create("example.com", "v1", "widgets")
def create(body, spec, name, namespace, patch, **_):
    size = spec.get("size", 0)
    configmap = configmap_for(name, size)
    kopf.adopt(configmap, owner=body)
    kubernetes.client.CoreV1Api().create_namespaced_config_map(namespace, configmap)
    patch.status["phase"] = "Ready"
    patch.status["observedSize"] = size


@kopf.on.field("example.com", "v1", "widgets", field="spec.size")
def resize(name, namespace, new, patch, old, **_):
    if old is None:         # the create handler has done it
        return
    kubernetes.client.CoreV1Api().patch_namespaced_config_map(
        f"{name}-size", namespace, {"data": {"size": str(new)}})
    patch.status["observedSize"] = new
