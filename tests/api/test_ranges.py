"""Tests for L{orchd.api.proto.ranges}: integer fields within their type's range."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.proto.ranges import integer_errors


def messages(obj, api_version="apps/v1", kind="Deployment"):
    return [str(e) for e in integer_errors(obj, api_version, kind)]


class RangeTests(SynchronousTestCase):
    def test_int32_field(self):
        """An int32 field refuses a number past 2**31-1, with the field's path."""
        self.assertEqual(messages({"spec": {"replicas": 99999999999}}), [
            "spec.replicas: Invalid value: 99999999999: must be within the int32 range"])
        self.assertEqual(messages({"spec": {"replicas": 2147483647}}), [])
        self.assertEqual(len(messages({"spec": {"replicas": -2147483649}})), 1)

    def test_int64_field(self):
        """An int64 field refuses a number past 2**63-1."""
        self.assertEqual(messages({"metadata": {"generation": 2 ** 63}}, "v1", "ConfigMap"), [
            "metadata.generation: Invalid value: 9223372036854775808: must be within the "
            "int64 range"])

    def test_not_an_integer(self):
        """Strings, booleans and fractions are not integers."""
        self.assertEqual(messages({"spec": {"replicas": "3"}}), [
            'spec.replicas: Invalid value: "3": must be an integer'])
        self.assertEqual(len(messages({"spec": {"replicas": True}})), 1)
        self.assertEqual(len(messages({"spec": {"replicas": 1.5}})), 1)

    def test_integral_float_becomes_integer(self):
        """3.0 is accepted and stored as 3."""
        obj = {"spec": {"replicas": 3.0}}
        self.assertEqual(messages(obj), [])
        self.assertEqual(type(obj["spec"]["replicas"]), int)

    def test_lists_and_maps(self):
        """Paths name list indices and map keys."""
        obj = {"spec": {"template": {"spec": {"containers": [
            {"name": "a"}, {"name": "b", "ports": [{"containerPort": 10 ** 10}]}]}}}}
        self.assertEqual(messages(obj), [
            "spec.template.spec.containers[1].ports[0].containerPort: Invalid value: "
            "10000000000: must be within the int32 range"])

    def test_other_types_are_left_alone(self):
        """Fields that are not integers, and unknown fields, are not looked at."""
        self.assertEqual(messages({"spec": {"paused": "yes", "unknown": 10 ** 30}}), [])
        self.assertEqual(messages({"data": {"a": 10 ** 30}}, "v1", "ConfigMap"), [])

    def test_kind_without_definition(self):
        """A kind the definitions do not describe has no integer fields."""
        self.assertEqual(messages({"spec": {"x": 10 ** 30}}, "example.com/v1", "Widget"), [])
