# -*- test-case-name: tests.admission.test_namespacelifecycle,tests.registry.test_kinds -*-
"""
Namespaced objects need a namespace that exists and is not terminating.

The system namespaces can never be deleted, since the control plane
itself keeps objects in them.
"""

from zope.interface import implementer

from orchd.admission.interfaces import CREATE, DELETE, IAdmissionPlugin
from orchd.api.errors import StatusError

SYSTEM_NAMESPACES = ("default", "orch-system", "orch-public", "orch-node-lease")


@implementer(IAdmissionPlugin)
class NamespaceLifecycle:
    """
    @param get_namespace: async callable C{name -> namespace dict or None}.
    @param cached_namespace: C{name -> namespace dict or None}, the namespace
        as known at once (a watch cache), if it is: most creates are then
        checked without waiting on anything; C{get_namespace} is asked when
        it answers None. Neither's answer is changed here (the cached one is
        shared between requests).
    """

    mutates = False

    def __init__(self, get_namespace, immortal=SYSTEM_NAMESPACES, cached_namespace=None):
        self._get_namespace = get_namespace
        self._cached_namespace = cached_namespace
        self._immortal = frozenset(immortal)

    def admit(self, attributes):
        pass

    def validate(self, attributes):
        info = attributes.info
        if info.resource == "namespaces" and info.group == "":
            if attributes.operation == DELETE and attributes.name in self._immortal:
                raise StatusError.forbidden(
                    "namespaces", "", attributes.name, "this namespace may not be deleted")
            return None
        if attributes.operation != CREATE or not info.namespaced or not info.stored:
            return None
        if self._cached_namespace is not None:
            namespace = self._cached_namespace(attributes.namespace)
            if namespace is not None:
                self._check(attributes, namespace)
                return None
        return self._check_namespace(attributes)

    async def _check_namespace(self, attributes):
        self._check(attributes, await self._get_namespace(attributes.namespace))

    @staticmethod
    def _check(attributes, namespace):
        """Refuse the create when C{namespace} (a dict, or None) is gone or terminating."""
        info = attributes.info
        if namespace is None:
            raise StatusError.not_found("namespaces", "", attributes.namespace)
        if namespace.get("status", {}).get("phase") == "Terminating" or \
                namespace["metadata"].get("deletionTimestamp"):
            raise StatusError.forbidden(
                info.resource, info.group, attributes.name,
                f"unable to create new content in namespace {attributes.namespace} "
                "because it is being terminated")
