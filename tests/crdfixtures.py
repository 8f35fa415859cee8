"""CustomResourceDefinitions the custom resource tests share."""

import copy

CRDS = "/apis/apiextensions.orch.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"

WIDGET_SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "replicas": {"type": "integer", "minimum": 0},
                "color": {"type": "string", "default": "blue", "enum": ["blue", "red"]},
                "selector": {"type": "string"},
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "required": ["name"], "properties": {
                        "name": {"type": "string"}, "port": {"type": "integer"}}},
                },
            },
        },
        "status": {"type": "object", "properties": {
            "replicas": {"type": "integer"}, "phase": {"type": "string"}}},
    },
}


def widget_crd(versions=None, scope="Namespaced", names=None, group="example.com", **version):
    """The C{widgets.example.com} definition: one version v1 unless told otherwise."""
    names = names or {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"],
                      "categories": ["all"]}
    if versions is None:
        versions = [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": copy.deepcopy(WIDGET_SCHEMA)},
            "subresources": {"status": {}, "scale": {
                "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                "labelSelectorPath": ".spec.selector"}},
            "additionalPrinterColumns": [
                {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1},
            ],
            "selectableFields": [{"jsonPath": ".spec.color"}],
            **version,
        }]
    return {
        "apiVersion": "apiextensions.orch.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{names['plural']}.{group}"},
        "spec": {"group": group, "scope": scope, "names": names, "versions": versions},
    }


def widget(name, **spec):
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": spec}


def condition(crd, kind):
    for found in crd["status"]["conditions"]:
        if found["type"] == kind:
            return found
    return None
