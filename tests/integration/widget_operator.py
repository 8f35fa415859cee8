"""
A small kopf operator for Widgets (C{example.com/v1}), as an operator author
writes one: it reports each Widget's size in its C{status} subresource, and
holds the Widget with kopf's finalizer until its delete handler has run.

L{tests.integration.test_kopf_operator} runs it against a real orchd.
"""

import kopf

from orchd.client.orchconfig import load_orchconfig

GROUP, VERSION, PLURAL = "example.com", "v1", "widgets"

#: The Widget CustomResourceDefinition, in the upstream spelling operators ship it in.
WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget",
                  "shortNames": ["wd"]},
        "versions": [{
            "name": VERSION,
            "served": True,
            "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object",
                             "properties": {"size": {"type": "integer", "minimum": 0}}},
                    # kopf keeps its progress here, besides what the handlers write.
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                },
            }},
        }],
    },
}


def connection_info(orchconfig_path):
    """kopf's credentials from an orchconfig (kubeconfig's format): server, CA, client certificate."""
    config = load_orchconfig(orchconfig_path)
    return kopf.ConnectionInfo(
        server=config.server, ca_data=config.ca_pem, certificate_data=config.client_cert_pem,
        private_key_data=config.client_key_pem, token=config.token, default_namespace="default")


def widget_operator(orchconfig_path, seen):
    """
    The operator's handlers, in a registry of their own (so that several
    tests, or a test and a real operator, never share handlers).

    @param orchconfig_path: the credentials kopf logs in with.
    @param seen: a list the handlers append C{(handler, name)} to, from
        kopf's thread, for the test to follow.
    """
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_):
        return connection_info(orchconfig_path)

    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry)
    def create(body, spec, name, patch, **_):
        patch.status["phase"] = "Ready"
        patch.status["observedSize"] = spec.get("size", 0)
        # A core v1 Event on the Widget, posted by kopf in the background.
        kopf.info(body, reason="Ready", message=f"Widget of size {spec.get('size', 0)} is ready")
        seen.append(("create", name))

    @kopf.on.update(GROUP, VERSION, PLURAL, field="spec.size", registry=registry)
    def resize(new, name, patch, **_):
        patch.status["observedSize"] = new
        seen.append(("resize", name))

    @kopf.on.delete(GROUP, VERSION, PLURAL, registry=registry)
    def delete(name, **_):
        seen.append(("delete", name))

    return registry


def operator_settings():
    """Settings for a test: short timeouts, so that a stop is quick; everything else kopf's own."""
    settings = kopf.OperatorSettings()
    settings.watching.server_timeout = 10
    settings.watching.client_timeout = 20
    settings.watching.reconnect_backoff = 0.2
    settings.networking.request_timeout = 10
    return settings
