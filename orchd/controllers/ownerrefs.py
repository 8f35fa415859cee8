# -*- test-case-name: tests.controllers.test_garbagecollector -*-
"""
Owner references and finalizers as the garbage collector reads and edits them.

The collector's graph is made of L{_Node}s, one per object it has seen.  The
functions read and set an object's metadata lists, tolerating malformed
values (a reference without a uid is no reference), so that the
collector's own module is left with what it decides and does.
"""


class _Node:
    """An observed object: where it lives, and the owner references it had."""

    __slots__ = ("uid", "provider", "namespace", "name", "owners", "being_deleted",
                 "deleting_dependents", "deleting_with")

    def __init__(self, uid, provider, namespace, name):
        self.uid = uid
        self.provider = provider
        self.namespace = namespace
        self.name = name
        self.owners = ()
        self.being_deleted = False
        self.deleting_dependents = False
        #: The finalizers the object had when last seen being deleted.
        self.deleting_with = ()

    def reference(self):
        """A minimal object naming this node, for events about it."""
        info = self.provider.info
        meta = {"name": self.name, "uid": self.uid}
        if self.namespace:
            meta["namespace"] = self.namespace
        return {"apiVersion": info.api_version, "kind": info.kind, "metadata": meta}

    def __repr__(self):
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.provider.info.kind} {where}"


def _group(api_version):
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def _owner_references(meta):
    """
    The well-formed owner references of an object (those with a uid), as a
    tuple: most objects have none, and the empty tuple costs the graph nothing.
    """
    refs = meta.get("ownerReferences")
    if not isinstance(refs, list):
        return ()
    return tuple(ref for ref in refs if isinstance(ref, dict) and ref.get("uid"))


def _blocking(ref):
    return ref.get("blockOwnerDeletion") is True


def _finalizers(meta):
    finalizers = meta.get("finalizers")
    return finalizers if isinstance(finalizers, list) else []


def _set_list(meta, field, values):
    """Set a metadata list, leaving the field out when it is empty."""
    if values:
        meta[field] = values
    else:
        meta.pop(field, None)
