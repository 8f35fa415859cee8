"""
A controller written with the official Kubernetes client only: it watches
the ConfigMaps of a namespace and writes on each one an annotation counting
its data keys (C{example.com/keys}). A write that fails (a conflict, a 5xx)
is retried at the next event or resync; an object already annotated with the
right count is left alone, so the controller never writes in a loop.

Run it with C{python controller.py NAMESPACE} ($KUBECONFIG); C{test_controller.py}
tests it against a real orchd.
"""

import logging
import sys
import threading

import kubernetes

ANNOTATION = "example.com/keys"
log = logging.getLogger("configmap-controller")


class KeyCounter:
    """The controller: a list, then a watch from its resourceVersion, reconciling each ConfigMap."""

    def __init__(self, api_client, namespace, resync_seconds=5):
        self.api = kubernetes.client.CoreV1Api(api_client)
        self.namespace = namespace
        self.resync_seconds = resync_seconds
        self.stopping = threading.Event()

    def reconcile(self, configmap):
        """Annotate one ConfigMap; False when the write failed (retried later)."""
        wanted = str(len(configmap.data or {}))
        annotations = configmap.metadata.annotations or {}
        if annotations.get(ANNOTATION) == wanted:
            return True
        try:
            self.api.patch_namespaced_config_map(
                configmap.metadata.name, self.namespace,
                {"metadata": {"annotations": {ANNOTATION: wanted},
                              # Only on the version we read: a conflict means newer data.
                              "resourceVersion": configmap.metadata.resource_version}})
        except kubernetes.client.ApiException as error:
            log.warning("annotating %s failed (%s), retried later",
                        configmap.metadata.name, error.status)
            return False
        return True

    def run(self):
        """List and watch until L{stop}; each list (every resync) retries what failed."""
        while not self.stopping.is_set():
            try:
                listed = self.api.list_namespaced_config_map(self.namespace)
            except kubernetes.client.ApiException as error:
                log.warning("list failed (%s)", error.status)
                self.stopping.wait(0.2)
                continue
            for configmap in listed.items:
                self.reconcile(configmap)
            watch = kubernetes.watch.Watch()
            try:
                for event in watch.stream(self.api.list_namespaced_config_map, self.namespace,
                                          resource_version=listed.metadata.resource_version,
                                          timeout_seconds=self.resync_seconds):
                    if self.stopping.is_set():
                        break
                    if event["type"] in ("ADDED", "MODIFIED"):
                        if not self.reconcile(event["object"]):
                            break       # relist at once: the retry reads the latest version
            except kubernetes.client.ApiException as error:
                log.warning("watch ended (%s), relisting", error.status)
            finally:
                watch.stop()

    def stop(self):
        self.stopping.set()


if __name__ == "__main__":
    kubernetes.config.load_kube_config()
    logging.basicConfig(level=logging.INFO)
    KeyCounter(None, sys.argv[1]).run()
