# -*- test-case-name: tests.admission.test_defaultclasses -*-
"""
DefaultIngressClass admission: a new Ingress that names no class gets the
cluster's default one.

An IngressClass is the default when its annotation
C{ingressclass.orch.io/is-default-class} is exactly C{"true"}. On create
(upstream C{plugin/pkg/admission/network/defaultingressclass}) an Ingress
with neither C{spec.ingressClassName} nor the older C{orch.io/ingress.class}
annotation gets the default's name; with no default it is left alone. With
several defaults the create is refused (403), as upstream did before it
started choosing the newest: which one was meant is the operator's call.
"""

import orjson
from zope.interface import implementer

from orchd.admission.interfaces import CREATE, IAdmissionPlugin
from orchd.api.errors import StatusError
from orchd.api.kinds import NETWORKING, key_prefix_of

DEFAULT_ANNOTATION = "ingressclass.orch.io/is-default-class"
#: [renamed] The annotation that named a class before C{spec.ingressClassName}.
CLASS_ANNOTATION = "orch.io/ingress.class"


async def default_classes(store, group, resource, annotations):
    """
    The names of the objects of a cluster-scoped resource marked as default.

    @param annotations: keys any one of which, set to exactly C{"true"}, marks a default.
    """
    listed = await store.list(key_prefix_of(group, resource))
    names = []
    for kv in listed.items:
        meta = orjson.loads(kv.value).get("metadata") or {}
        marks = meta.get("annotations")
        if isinstance(marks, dict) and any(marks.get(key) == "true" for key in annotations):
            names.append(meta.get("name"))
    return names


def creates(attributes, group, resource):
    """True for the create of a C{group}/C{resource} object itself (not a subresource)."""
    info = attributes.info
    return ((info.group, info.resource) == (group, resource) and not attributes.subresource
            and attributes.operation == CREATE and isinstance(attributes.obj, dict))


def annotations_of(obj):
    annotations = (obj.get("metadata") or {}).get("annotations")
    return annotations if isinstance(annotations, dict) else {}


def refuse_several(attributes, count, what):
    """Upstream's forbidden internal error when more than one default exists."""
    info = attributes.info
    raise StatusError.forbidden(info.resource, info.group, attributes.name,
                                f"Internal error occurred: {count} {what}")


@implementer(IAdmissionPlugin)
class DefaultIngressClass:
    """
    @param store: where classes are listed from: the watch caches
        (L{orchd.storage.cachedreads.CachedReads}), or an IStore.
    """

    resources = frozenset({(NETWORKING, "ingresses")})
    validates = False

    def __init__(self, store):
        self._store = store

    def admit(self, attributes):
        if not creates(attributes, NETWORKING, "ingresses"):
            return None
        return self._admit_ingress(attributes)

    async def _admit_ingress(self, attributes):
        ingress = attributes.obj
        spec = ingress.get("spec")
        if spec is not None and not isinstance(spec, dict):
            return      # validation refuses it
        if ((spec or {}).get("ingressClassName") is not None
                or CLASS_ANNOTATION in annotations_of(ingress)):
            return
        names = await default_classes(self._store, NETWORKING, "ingressclasses",
                                      (DEFAULT_ANNOTATION,))
        if len(names) > 1:
            refuse_several(attributes, len(names),
                           "default IngressClasses were found, only 1 allowed")
        if names:
            ingress.setdefault("spec", {})["ingressClassName"] = names[0]

    def validate(self, attributes):
        pass
