# -*- test-case-name: tests.admission.test_defaulttolerationseconds -*-
"""
DefaultTolerationSeconds admission: every pod tolerates a node being not
ready or unreachable for a while, not for ever and not for no time at all.

Without it a pod would be evicted the moment its node's Ready condition
turns False or Unknown (a NoExecute taint it does not tolerate). Upstream
(C{plugin/pkg/admission/defaulttolerationseconds}) adds, on pod create and
update, a C{NoExecute} toleration with C{tolerationSeconds} (300 s, here
C{--pod-eviction-timeout}) for each of the two keys the pod does not
already tolerate; the taint eviction controller then honours it.
"""

from zope.interface import implementer

from orchd.admission.interfaces import CREATE, UPDATE, IAdmissionPlugin
from orchd.api import taints as t

DEFAULT_SECONDS = 300


def _covers(toleration, key):
    """A toleration (any operator) that names C{key} or no key, for NoExecute or any effect."""
    return ((toleration.get("key") or "") in ("", key)
            and (toleration.get("effect") or "") in ("", t.NO_EXECUTE))


@implementer(IAdmissionPlugin)
class DefaultTolerationSeconds:
    """
    @param seconds: the C{tolerationSeconds} of the added tolerations.
    """

    resources = frozenset({("", "pods")})
    validates = False

    def __init__(self, seconds=DEFAULT_SECONDS):
        self._seconds = int(seconds)

    def admit(self, attributes):
        info, pod = attributes.info, attributes.obj
        if ((info.group, info.resource) != ("", "pods") or attributes.subresource
                or attributes.operation not in (CREATE, UPDATE) or not isinstance(pod, dict)):
            return
        spec = pod.get("spec")
        if not isinstance(spec, dict):
            return      # validation refuses it
        tolerations = spec.get("tolerations")
        if tolerations is not None and not isinstance(tolerations, list):
            return
        present = t.as_dicts(tolerations)
        added = [{"key": key, "operator": "Exists", "effect": t.NO_EXECUTE,
                  "tolerationSeconds": self._seconds}
                 for key in (t.NOT_READY, t.UNREACHABLE)
                 if not any(_covers(tol, key) for tol in present)]
        if added:
            spec["tolerations"] = (tolerations or []) + added

    def validate(self, attributes):
        pass
