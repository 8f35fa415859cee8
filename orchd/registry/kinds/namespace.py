# -*- test-case-name: tests.registry.test_kinds -*-
"""
Namespaces: always labelled with their own name, and deleted in two steps.

A deleted namespace first turns C{Terminating} and keeps its C{orch}
finalizer until the namespace controller has removed its contents; the
controller then finalizes it and the generic store removes it.
"""

from zope.interface import implementer

from orchd.api.errors import FieldError
from orchd.api.meta import label_key_errors
from orchd.registry.strategy import DefaultStrategy, IStrategy

NAME_LABEL = "orch.io/metadata.name"
FINALIZER = "orch"


@implementer(IStrategy)
class NamespaceStrategy(DefaultStrategy):
    def prepare_for_create(self, ctx, obj):
        obj["status"] = {"phase": "Active"}
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        finalizers = list(spec.get("finalizers") or [])
        if FINALIZER not in finalizers:
            finalizers.append(FINALIZER)
        spec["finalizers"] = finalizers
        obj["spec"] = spec
        _label(obj)

    def prepare_for_update(self, ctx, obj, old):
        # Finalizers change only through the finalize subresource.
        obj["spec"] = old.get("spec", {})
        _label(obj)

    def subresource_update(self, subresource, obj, old):
        if subresource == "finalize":
            spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
            old.setdefault("spec", {})["finalizers"] = spec.get("finalizers") or []
            return old
        return super().subresource_update(subresource, obj, old)

    def validate(self, ctx, obj):
        errors = []
        finalizers = (obj.get("spec") or {}).get("finalizers") or []
        if not isinstance(finalizers, list):
            return [FieldError.invalid("spec.finalizers", finalizers, "must be a list")]
        for index, finalizer in enumerate(finalizers):
            if not isinstance(finalizer, str):
                errors.append(FieldError.type_invalid(
                    f"spec.finalizers[{index}]", finalizer, "must be a string"))
                continue
            errors += [FieldError.invalid(f"spec.finalizers[{index}]", finalizer, message)
                       for message in label_key_errors(finalizer)]
        return errors

    def prepare_for_delete(self, ctx, obj):
        obj.setdefault("status", {})["phase"] = "Terminating"

    def pending_finalizers(self, obj):
        return bool((obj.get("spec") or {}).get("finalizers"))


def _label(obj):
    meta = obj["metadata"]
    labels = meta.get("labels")
    if not isinstance(labels, dict):
        labels = meta["labels"] = {}
    labels[NAME_LABEL] = meta.get("name", "")
