"""
The Widget operator (widgets.py) against a real control plane: the C{orchd}
fixture of orchd's pytest plugin, with the kopf operator running in a thread
for the whole module. No sleeps: C{orchd.wait_for} polls the object.
"""

import os
import pathlib
import threading

import kopf
import kubernetes
import pytest

import widgets  # noqa: F401 (importing registers the operator's handlers with kopf)

HERE = pathlib.Path(__file__).parent
GROUP, VERSION, PLURAL = "example.com", "v1", "widgets"


@pytest.fixture(scope="module")
def operator(orchd):
    """The operator, started once for this module on the session's control plane."""
    orchd.install_crds([HERE / "widget-crd.yaml"])
    # The operator's own client reads $KUBECONFIG (its startup handler); kopf
    # logs in with the control plane's credentials.
    previous = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(orchd.kubeconfig)
    registry = kopf.get_default_registry()
    kopf.on.login(registry=registry)(lambda **_: orchd.kopf_login())

    settings = kopf.OperatorSettings()
    settings.watching.server_timeout = 10
    settings.networking.request_timeout = 10
    # Retry failed API calls (the 500s a test injects) quickly.
    settings.networking.error_backoffs = [0.1, 0.2, 0.5]
    stop, ready, errors = threading.Event(), threading.Event(), []

    def run():
        try:
            kopf.run(registry=registry, settings=settings, standalone=True, clusterwide=True,
                     stop_flag=stop, ready_flag=ready)
        except BaseException as error:     # reported by the fixture, not lost in the thread
            errors.append(error)

    thread = threading.Thread(target=run, name="kopf", daemon=True)
    thread.start()
    try:
        assert ready.wait(30), f"kopf did not start: {errors}"
        yield
    finally:
        stop.set()
        thread.join(30)
        if previous is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = previous
    assert not thread.is_alive() and errors == []


def widgets_api(orchd):
    return kubernetes.client.CustomObjectsApi(orchd.api_client())


def create_widget(orchd, namespace, name, size):
    return widgets_api(orchd).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL,
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Widget",
         "metadata": {"name": name}, "spec": {"size": size}})


def has_status(size):
    """A wait_for condition: the operator has reported this size."""
    return lambda widget: (widget.get("status", {}).get("phase") == "Ready"
                           and widget["status"].get("observedSize") == size)


def test_create_writes_status_and_configmap(orchd, orchd_namespace, operator):
    """A new Widget gets its status and an owned ConfigMap holding its size."""
    widget = create_widget(orchd, orchd_namespace, "w1", 3)
    orchd.wait_for("widgets.example.com", "w1", has_status(3), namespace=orchd_namespace)

    configmap = kubernetes.client.CoreV1Api(orchd.api_client()).read_namespaced_config_map(
        "w1-size", orchd_namespace)
    assert configmap.data == {"size": "3"}
    [owner] = configmap.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid) == ("Widget", "w1", widget["metadata"]["uid"])


def test_resize_updates_both(orchd, orchd_namespace, operator):
    """Changing spec.size updates the ConfigMap and the status, once each."""
    create_widget(orchd, orchd_namespace, "w2", 1)
    orchd.wait_for("widgets.example.com", "w2", has_status(1), namespace=orchd_namespace)
    orchd.clear_requests()

    widgets_api(orchd).patch_namespaced_custom_object(
        GROUP, VERSION, orchd_namespace, PLURAL, "w2", {"spec": {"size": 5}})
    orchd.wait_for("widgets.example.com", "w2", has_status(5), namespace=orchd_namespace)
    orchd.wait_for("configmaps", "w2-size", lambda cm: cm["data"]["size"] == "5",
                   namespace=orchd_namespace)

    configmap_patches = [r for r in orchd.requests
                         if (r.verb, r.resource, r.name) == ("patch", "configmaps", "w2-size")]
    assert [r.status for r in configmap_patches] == [200]


def test_operator_retries_a_failed_status_write(orchd, orchd_namespace, operator):
    """A 500 on the operator's patch of the Widget is retried, and the Widget still gets ready."""
    orchd.clear_requests()
    orchd.fail_next("patch", "widgets", 500, namespace=orchd_namespace, name="w3")
    create_widget(orchd, orchd_namespace, "w3", 2)
    orchd.wait_for("widgets.example.com", "w3", has_status(2), namespace=orchd_namespace)

    statuses = [r.status for r in orchd.requests
                if (r.verb, r.resource, r.name) == ("patch", "widgets", "w3")]
    assert statuses[0] == 500 and 200 in statuses[1:]
