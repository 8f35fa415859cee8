# -*- test-case-name: tests.registry.test_kinds -*-
"""
ControllerRevisions: immutable snapshots of state.

C{revision} is required and a non-negative integer; C{data} can never
change once stored (metadata may), and the object may be deleted.
"""

from zope.interface import implementer

from orchd.api.errors import FieldError
from orchd.registry.strategy import DefaultStrategy, IStrategy, immutable_field


@implementer(IStrategy)
class ControllerRevisionStrategy(DefaultStrategy):
    def validate(self, ctx, obj):
        if "revision" not in obj or obj["revision"] is None:
            return [FieldError.required("revision")]
        revision = obj["revision"]
        if isinstance(revision, bool) or not isinstance(revision, int):
            return [FieldError.type_invalid("revision", revision, "must be an integer")]
        if revision < 0:
            return [FieldError.invalid(
                "revision", revision, "must be greater than or equal to 0")]
        if revision >= 2 ** 63:
            return [FieldError.invalid("revision", revision, "must fit in a 64-bit integer")]
        return []

    def validate_update(self, ctx, obj, old):
        errors = self.validate(ctx, obj)
        changed = immutable_field(obj.get("data"), old.get("data"), "data")
        if changed:
            errors.append(changed)
        return errors
