"""Schemas shared by the crdschema tests."""

ROOT = "spec.versions[0].schema.openAPIV3Schema"


def widget(spec_properties, required=None, **spec_extra):
    """A root schema whose spec has the given properties."""
    spec = {"type": "object", "properties": spec_properties}
    if required:
        spec["required"] = required
    spec.update(spec_extra)
    return {"type": "object", "properties": {"spec": spec}}


def obj(spec, **top):
    """A custom resource with the given spec."""
    value = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec}
    value.update(top)
    return value


def messages(errors):
    return [str(error) for error in errors]
