"""
orchd.testing in blocking mode, as a plain program or a pytest test uses
it: the global reactor in a daemon thread, the official client and kopf
called from the main thread. Run by L{tests.testing.test_threaded} in a
subprocess (trial's own reactor cannot share the process); prints one
C{ok <check>} line per passed check and exits non-zero at the first failure.
"""

import json
import os
import sys
import tempfile
import threading
import time

import kubernetes

from orchd.testing import ControlPlane
from orchd.testing.reactorthread import ReactorThreadError


def ok(check):
    print("ok", check, flush=True)


def core(client):
    return kubernetes.client.CoreV1Api(client)


def plain():
    """Start, client, namespaces, faults, records, two planes, blocking calls."""
    started = time.monotonic()
    with ControlPlane() as cp, ControlPlane() as other:
        ok(f"two started in {time.monotonic() - started:.3f}s")
        assert cp.url != other.url
        api = core(cp.api_client())
        assert "default" in [n.metadata.name for n in api.list_namespace().items]
        ok("official client")
        name = cp.create_namespace()
        assert name.startswith("test-")
        ok("create_namespace")
        api.create_namespaced_config_map(name, {"metadata": {"name": "c"}, "data": {"k": "v"}})
        cp.fail_next("create", "configmaps", 429)
        try:
            api.create_namespaced_config_map(name, {"metadata": {"name": "d"}})
        except kubernetes.client.ApiException as e:
            assert e.status == 429, e.status
        else:
            raise AssertionError("fail_next did not fail")
        ok("fail_next")
        found = cp.wait_for("configmaps", "c", lambda obj: obj["data"] == {"k": "v"},
                            namespace=name)
        assert found["metadata"]["name"] == "c"
        ok("wait_for")
        creates = [(r.name, r.status) for r in cp.requests
                   if r.verb == "create" and r.resource == "configmaps"]
        assert creates == [("c", 201), (None, 429)] or creates == [("c", 201), ("d", 429)], \
            creates
        assert [r for r in other.requests if r.resource == "configmaps"] == []
        ok("requests")
        try:
            other.wait_for("namespaces", name, lambda obj: True, timeout=0.05)
        except TimeoutError:
            ok("separate stores")
        cp.delete_namespace(name)
        from twisted.internet import reactor
        from twisted.internet.threads import blockingCallFromThread
        try:
            blockingCallFromThread(reactor, cp.stop)
        except ReactorThreadError:
            ok("blocking call from the reactor thread refused")
        else:
            raise AssertionError("a blocking call from the reactor thread was not refused")
    assert not os.path.exists(cp.data_dir)
    ok("stopped")


def operator():
    """A kopf operator in its own thread against a control plane, from this thread."""
    import kopf

    sys.path.insert(0, os.getcwd())
    from tests.integration import widget_operator as module
    from tests.integration.widget_operator import (
        GROUP, PLURAL, VERSION, WIDGET_CRD, operator_settings, widget_operator,
    )
    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "widget.json"), "w") as f:
        json.dump(WIDGET_CRD, f)
    with ControlPlane(crds=[folder]) as cp:
        seen = []
        # The operator logs in with what cp.kopf_login() gives.
        module.connection_info = lambda path: cp.kopf_login()
        registry = widget_operator(cp.kubeconfig, seen)
        stop, ready, errors = threading.Event(), threading.Event(), []

        def run():
            try:
                kopf.run(registry=registry, settings=operator_settings(), stop_flag=stop,
                         ready_flag=ready, standalone=True, clusterwide=True)
            except BaseException as error:
                errors.append(error)
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        assert ready.wait(30), errors
        custom = kubernetes.client.CustomObjectsApi(cp.api_client())
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Widget",
            "metadata": {"name": "w1"}, "spec": {"size": 2}})
        cp.wait_for(f"{PLURAL}.{GROUP}", "w1",
                    lambda obj: (obj.get("status") or {}).get("phase") == "Ready",
                    namespace="default", timeout=30)
        ok("kopf reconciled")
        patches = [r for r in cp.requests
                   if r.verb == "patch" and r.resource == PLURAL and r.name == "w1"]
        assert patches, [(r.verb, r.resource, r.name) for r in cp.requests]
        ok("kopf patches recorded")
        stop.set()
        thread.join(30)
        assert not thread.is_alive() and errors == [], errors
    ok("kopf stopped")


if __name__ == "__main__":
    {"plain": plain, "operator": operator}[sys.argv[1]]()
