"""
The key-counting controller (controller.py) against a real control plane:
the C{orchd} fixture of orchd's pytest plugin, one fresh namespace and one
controller thread per test. No sleeps: C{orchd.wait_for} polls the object.
"""

import threading

import kubernetes
import pytest

from controller import ANNOTATION, KeyCounter


@pytest.fixture
def controller(orchd, orchd_namespace):
    """The controller on this test's namespace, in a thread, stopped after the test."""
    counter = KeyCounter(orchd.api_client(), orchd_namespace, resync_seconds=1)
    thread = threading.Thread(target=counter.run, name="controller", daemon=True)
    thread.start()
    yield counter
    counter.stop()
    thread.join(10)
    assert not thread.is_alive()


def annotated(count):
    """A wait_for condition: the ConfigMap carries this key count."""
    return lambda cm: cm["metadata"].get("annotations", {}).get(ANNOTATION) == str(count)


def test_counts_keys_of_new_and_updated_configmaps(orchd, orchd_namespace, controller):
    """A new ConfigMap is annotated with its key count, and again after its data changes."""
    core = kubernetes.client.CoreV1Api(orchd.api_client())
    core.create_namespaced_config_map(orchd_namespace, {
        "metadata": {"name": "settings"}, "data": {"a": "1", "b": "2"}})
    orchd.wait_for("configmaps", "settings", annotated(2), namespace=orchd_namespace)

    core.patch_namespaced_config_map("settings", orchd_namespace, {"data": {"c": "3"}})
    orchd.wait_for("configmaps", "settings", annotated(3), namespace=orchd_namespace)


def test_writes_once_per_change(orchd, orchd_namespace, controller):
    """The controller's own write does not make it write again: one patch for one ConfigMap."""
    core = kubernetes.client.CoreV1Api(orchd.api_client())
    core.create_namespaced_config_map(orchd_namespace, {
        "metadata": {"name": "once"}, "data": {"a": "1"}})
    orchd.wait_for("configmaps", "once", annotated(1), namespace=orchd_namespace)
    # A second object, handled after the first one's MODIFIED event was seen.
    core.create_namespaced_config_map(orchd_namespace, {"metadata": {"name": "later"}})
    orchd.wait_for("configmaps", "later", annotated(0), namespace=orchd_namespace)

    patches = [r for r in orchd.requests
               if (r.verb, r.resource, r.namespace) == ("patch", "configmaps", orchd_namespace)]
    assert sorted(r.name for r in patches) == ["later", "once"]


@pytest.mark.parametrize("code", [409, 500])
def test_retries_a_failed_write(orchd, orchd_namespace, controller, code):
    """A conflict or a server error on the annotation write is retried until it lands."""
    orchd.fail_next("patch", "configmaps", code, namespace=orchd_namespace, name="flaky")
    core = kubernetes.client.CoreV1Api(orchd.api_client())
    core.create_namespaced_config_map(orchd_namespace, {
        "metadata": {"name": "flaky"}, "data": {"x": "1"}})
    orchd.wait_for("configmaps", "flaky", annotated(1), namespace=orchd_namespace)

    statuses = [r.status for r in orchd.requests
                if (r.verb, r.resource, r.name, r.namespace)
                == ("patch", "configmaps", "flaky", orchd_namespace)]
    assert statuses == [code, 200]
