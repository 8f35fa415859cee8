"""
orchd inside a test: a real control plane started in well under a second.

The public names (see L{orchd.testing.controlplane} for the details)::

    cp = ControlPlane(crds=(), controllers=None, feature_gates=None, runtime_config=None,
                      upstream_group_names=True, simulated_nodes=0, clock=None, audit=True)
    with ControlPlane(...) as cp: ...      # blocking: the reactor runs in a daemon thread
    cp = await start(testcase, **options)  # trial: on the test's reactor, stopped at clean-up
    cp.url, cp.ca_path, cp.kubeconfig      # kubeconfig: a file (admin credentials)
    cp.api_client(), cp.client_configuration(), cp.kopf_login(), cp.add_user(name, groups)
    cp.install_crds(paths), cp.install_webhooks(configurations, url), cp.webhook_certificate(host)
    cp.create_namespace(prefix="test-"), cp.delete_namespace(name)
    cp.requests, cp.clear_requests()       # L{Request}s, from the audit events
    cp.fail_next(verb, resource, code, times=1, subresource="", namespace=None, name=None)
    cp.wait_for(kind_or_path, name, condition, namespace=None, timeout=10)
    cp.advance(seconds)                    # with clock=True

In blocking use the methods that talk to the server block and return their
result; under trial they return Deferreds. C{api_client}, C{add_user} and
C{client_configuration} need the C{kubernetes} package, C{kopf_login} kopf
(both in the C{test} extra).
"""

__all__ = ["ControlPlane", "Request", "start"]

#: Where each public name lives: loaded on first use, so that loading the
#: pytest plugin (which pytest does in every run where orchd is installed)
#: does not import the whole server.
_HOMES = {"ControlPlane": "orchd.testing.controlplane", "start": "orchd.testing.controlplane",
          "Request": "orchd.testing.requests"}


def __getattr__(name):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
