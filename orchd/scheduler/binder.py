# -*- test-case-name: tests.scheduler.test_scheduler -*-
"""
DefaultBinder: a decision is written as a Binding through the API's own
C{pods/binding} (L{orchd.registry.binding}), as the scheduler's user, so
the same checks, conflicts and pod condition apply as to any client's.
"""

from orchd.auth.user import UserInfo
from orchd.registry.context import RequestContext

NAME = "DefaultBinder"
#: The user the scheduler writes as, and its field manager (upstream's names).
USER = UserInfo("system:kube-scheduler", ("system:authenticated",))
FIELD_MANAGER = "kube-scheduler"


def scheduler_context(namespace):
    """The request context of the scheduler's own writes."""
    return RequestContext(USER, namespace, field_manager=FIELD_MANAGER)


class DefaultBinder:
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}, whose C{pods/binding}
        connector writes.
    """

    name = NAME

    def __init__(self, catalog):
        self._connector = catalog.connector("", "pods", "binding")

    async def bind(self, pod, node_name):
        """Bind C{pod} (a L{PodInfo}) to C{node_name}; raises the API's StatusError."""
        binding = {"apiVersion": "v1", "kind": "Binding",
                   "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
                   "target": {"kind": "Node", "name": node_name}}
        await self._connector.connect(scheduler_context(pod.namespace), pod.name, binding)
