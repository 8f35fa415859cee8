# -*- test-case-name: tests.registry.test_kinds,tests.server.test_handlers -*-
"""
Per-kind rules behind one generic store.

The generic store (C{orchd.registry.generic}) runs the same sequence for
every kind; a strategy supplies what differs: defaults, validation,
immutability, which finalizers hold a deleted object, and the fields a
field selector may name. Kinds without rules of their own use
L{DefaultStrategy} as it is.
"""

from zope.interface import Attribute, Interface, implementer

from orchd.api.errors import FieldError, StatusError


class IStrategy(Interface):
    """What one kind adds to generic create, update and delete."""

    allow_create_on_update = Attribute("True if PUT of a missing object creates it.")
    allow_unconditional_update = Attribute("True if PUT without resourceVersion is allowed.")
    keep_status_on_create = Attribute("True if a create may set status (e.g. nodes).")
    selectable_fields = Attribute("Field-selector names beyond metadata.name/namespace.")

    def prepare_for_create(ctx, obj):
        """Normalise a new object before validation (e.g. drop status). May mutate."""

    def validate(ctx, obj):
        """@return: a list of L{orchd.api.errors.FieldError}. Must not mutate C{obj}."""

    def prepare_for_update(ctx, obj, old):
        """Carry over what the caller may not change (e.g. status). May mutate C{obj}."""

    def validate_update(ctx, obj, old):
        """@return: FieldErrors, including changes to immutable fields."""

    def subresource_update(subresource, obj, old):
        """
        The object a write to a subresource (C{status}, ...) stores.

        @param old: a copy of the stored object, free to modify and return.
        """

    def prepare_for_delete(ctx, obj):
        """Mark an object whose deletion waits on finalizers (e.g. a terminating namespace)."""

    def begin_create(ctx, obj):
        """
        (awaitable) Take what a valid new object holds outside itself (e.g. a
        Service's cluster IP), just before the store write; may fill C{obj}.

        @return: None, or an object whose C{revert()} (awaitable) gives it
            back when the write fails.
        """

    def begin_update(ctx, obj, old):
        """
        (awaitable) As L{begin_create} for an update: the result's
        C{commit()} frees what the update gave up, C{revert()} what it took.
        """

    def after_delete(ctx, obj):
        """(awaitable) Give back what a removed object held."""

    def pending_finalizers(obj):
        """@return: True while something other than metadata.finalizers holds the object."""

    def graceful_delete_period(ctx, obj, requested):
        """
        The grace period a DELETE gives C{obj} (upstream's C{CheckGracefulDelete}).

        @param requested: the request's C{gracePeriodSeconds}, or None.
        @return: seconds (0: at once, yet through the same two steps), or
            None when this kind's objects are removed at once.
        """

    def field_values(obj):
        """@return: the field-selector values of C{obj}, by field name."""


@implementer(IStrategy)
class DefaultStrategy:
    """
    The behaviour of a kind with no rules of its own.

    Status, for kinds that have a status subresource, can only be written
    through that subresource; the generic store enforces this with
    L{reset_status} and L{keep_status}.
    """

    allow_create_on_update = False
    allow_unconditional_update = True
    #: False: a create drops C{status} of kinds with a status subresource.
    keep_status_on_create = False

    #: Field names a field selector may use besides the two every kind has
    #: (set from the kind's definition, L{orchd.registry.definitions}).
    selectable_fields = ()

    def __init__(self, catalog=None):
        """
        @param catalog: the catalog serving the kind, which a kind's
            definition makes its strategy with; these rules need nothing of it.
        """

    def prepare_for_create(self, ctx, obj):
        pass

    def validate(self, ctx, obj):
        return []

    def prepare_for_update(self, ctx, obj, old):
        pass

    def validate_update(self, ctx, obj, old):
        return self.validate(ctx, obj)

    def subresource_update(self, subresource, obj, old):
        """A status write changes status and nothing else."""
        if subresource != "status":
            raise StatusError.method_not_allowed("update", subresource)
        if "status" in obj:
            old["status"] = obj["status"]
        else:
            old.pop("status", None)
        return old

    def prepare_for_delete(self, ctx, obj):
        pass

    async def begin_create(self, ctx, obj):
        return None

    async def begin_update(self, ctx, obj, old):
        return None

    async def after_delete(self, ctx, obj):
        pass

    def pending_finalizers(self, obj):
        return False

    def graceful_delete_period(self, ctx, obj, requested):
        return None

    def field_values(self, obj):
        values = {}
        for field in self.selectable_fields:
            value = obj
            for part in field.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            values[field] = _selector_text(value, field)
        return values


#: Fields whose absence reads as a value, as upstream's typed objects give them.
_ZERO_VALUES = {"spec.hostNetwork": "false", "spec.unschedulable": "false",
                "status.replicas": "0", "status.successful": "0"}


def _selector_text(value, field=""):
    if value is None:
        return _ZERO_VALUES.get(field, "")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def immutable_field(new, old, path):
    """The FieldError for changing a field that cannot change, or None."""
    if new != old:
        return FieldError.invalid(path, new, "field is immutable")
    return None
