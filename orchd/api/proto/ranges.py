# -*- test-case-name: tests.api.test_ranges -*-
"""
Integer fields within their type's range, for every kind the protobuf
definitions describe.

A JSON body may write any number anywhere; upstream's typed decoding
refuses C{replicas: 99999999999} because the field is an int32. Kinds
that orchd keeps loose would otherwise store such a number and then fail
every protobuf read of the object. The definition files know every
field's type, so they decide: a plan per message, made once, names only
the fields that are integers or lead to some, and checking an object walks
just those (a ConfigMap: two optional fields of its metadata).
"""

from google.protobuf.descriptor import FieldDescriptor

from orchd.api.errors import FieldError
from orchd.api.proto import specials
from orchd.api.proto.schema import schema

_RANGES = {
    FieldDescriptor.TYPE_INT32: ("int32", -(1 << 31), (1 << 31) - 1),
    FieldDescriptor.TYPE_INT64: ("int64", -(1 << 63), (1 << 63) - 1),
    FieldDescriptor.TYPE_UINT32: ("uint32", 0, (1 << 32) - 1),
    FieldDescriptor.TYPE_UINT64: ("uint64", 0, (1 << 64) - 1),
}

# What a planned field holds.
_ONE, _LIST, _MAP = range(3)


class _Plan(dict):
    """json name -> (holds, range or None, child plan or None)."""

    __slots__ = ()


_plans = {}
_kinds = {}


def _plan(descriptor):
    """The plan of a message type (empty when no integer is reachable)."""
    name = descriptor.full_name
    plan = _plans.get(name)
    if plan is not None:
        return plan
    plan = _plans[name] = _Plan()  # placed first: recursive types end here
    facts = schema()
    inline = facts.inline.get(name, ())
    renamed = facts.json_names.get(name, {})
    for fd in descriptor.fields:
        is_map = bool(fd.message_type and fd.message_type.GetOptions().map_entry)
        target = fd.message_type.fields_by_name["value"] if is_map else fd
        holds = _MAP if is_map else (_LIST if fd.is_repeated else _ONE)
        if target.type in _RANGES:
            plan[renamed.get(fd.name, fd.name)] = (holds, _RANGES[target.type], None)
        elif target.type == FieldDescriptor.TYPE_MESSAGE \
                and specials.special_name(target.message_type.full_name) is None:
            child = _plan(target.message_type)
            if fd.name in inline and holds == _ONE:
                plan.update(child)  # its fields sit in this object
            else:
                plan[renamed.get(fd.name, fd.name)] = (holds, None, child)
    return plan


def _prune():
    """Drop fields whose messages lead to no integer, until none is left to drop."""
    changed = True
    while changed:
        changed = False
        for plan in _plans.values():
            for key, (_, _, child) in list(plan.items()):
                if child is not None and not child:
                    del plan[key]
                    changed = True


def _kind_plan(api_version, kind):
    key = (api_version, kind)
    plan = _kinds.get(key)
    if plan is None:
        message = schema().kind_message(api_version, kind)
        plan = _plan(message.DESCRIPTOR) if message is not None else _Plan()
        _prune()
        _kinds[key] = plan
    return plan


def integer_errors(obj, api_version, kind):
    """
    Field errors for values of integer fields that are not integers of the
    field's range, anywhere in C{obj} (a kind C{api_version}/C{kind} object).
    Integral floats (C{3.0}) are made integers in place. Kinds without a
    definition have none.
    """
    plan = _kind_plan(api_version, kind)
    if not plan or type(obj) is not dict:
        return []
    errors = []
    _check(obj, plan, "", errors)
    return errors


def _check(obj, plan, prefix, errors):
    for key, (holds, limits, child) in plan.items():
        value = obj.get(key)
        if value is None:
            continue
        path = prefix + key
        if holds == _ONE:
            _check_item(obj, key, value, limits, child, path, errors)
        elif holds == _LIST:
            if type(value) is list:
                for index, item in enumerate(value):
                    _check_item(value, index, item, limits, child, f"{path}[{index}]", errors)
        elif type(value) is dict:
            for name, item in value.items():
                _check_item(value, name, item, limits, child, f"{path}[{name}]", errors)


def _check_item(container, key, value, limits, child, path, errors):
    if limits is None:
        if type(value) is dict:
            _check(value, child, path + ".", errors)
        return
    kind = type(value)
    if kind is float and value.is_integer():
        # 3.0 is the integer 3 (as protobuf would read it), and is stored so.
        value = container[key] = int(value)
    elif kind is not int:
        errors.append(FieldError.invalid(path, value, "must be an integer"))
        return
    name, low, high = limits
    if not low <= value <= high:
        errors.append(FieldError.invalid(path, value, f"must be within the {name} range"))
