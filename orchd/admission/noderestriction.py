# -*- test-case-name: tests.admission.test_noderestriction -*-
"""
Node restriction: what a node agent writes must be about itself.

The Node authorizer sees names in URLs but not request bodies; this plugin
checks the bodies of a node's creates. A node may create only mirror pods
bound to itself that use no secrets, config maps, claims or service
account (else writing a pod would let it read them), and only the Node,
Lease and CSINode named after it.
"""

from zope.interface import implementer

from orchd.admission.interfaces import CREATE, IAdmissionPlugin
from orchd.api.errors import StatusError
from orchd.api.kinds import COORDINATION, STORAGE
from orchd.auth.authz.node import node_name
from orchd.auth.nodegraph import MIRROR_ANNOTATION, pod_references

#: Kinds a node may create only under its own name: (group, resource).
_NAMED_AFTER_NODE = {("", "nodes"), (COORDINATION, "leases"), (STORAGE, "csinodes")}


@implementer(IAdmissionPlugin)
class NodeRestriction:
    mutates = False

    def admit(self, attributes):
        pass

    def validate(self, attributes):
        if attributes.operation != CREATE or attributes.subresource:
            return
        node = node_name(attributes.user)
        if node is None:
            return
        info = attributes.info
        if (info.group, info.resource) == ("", "pods"):
            self._check_pod(attributes, node)
        elif (info.group, info.resource) in _NAMED_AFTER_NODE and attributes.name != node:
            self._refuse(attributes, f'node "{node}" is not allowed to modify '
                                     f'{info.singular} "{attributes.name}"')

    def _check_pod(self, attributes, node):
        pod = attributes.obj
        meta = pod.get("metadata") or {}
        if MIRROR_ANNOTATION not in (meta.get("annotations") or {}):
            self._refuse(attributes, f'pod does not have "{MIRROR_ANNOTATION}" annotation, '
                                     f'node "{node}" can only create mirror pods')
        bound, _ = pod_references(pod)
        if bound != node:
            self._refuse(attributes, f'node "{node}" can only create pods with spec.nodeName '
                                     f'set to itself')
        # What the pod would use were it not a mirror pod (the default
        # service account, which every pod names, aside).
        _, uses = pod_references(dict(pod, metadata=dict(meta, annotations={})))
        uses = [ref for ref in uses if ref != ("serviceaccounts", "default")]
        if uses:
            kind, name = uses[0]
            self._refuse(attributes, f'node "{node}" can not create pods that reference '
                                     f'{kind} "{name}"')

    @staticmethod
    def _refuse(attributes, why):
        raise StatusError.forbidden(attributes.info.resource, attributes.info.group,
                                    attributes.name, why)
