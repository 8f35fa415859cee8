# -*- test-case-name: tests.controllers.test_history -*-
"""
ControllerRevisions: the template history of DaemonSets and StatefulSets
(upstream's C{pkg/controller/history}, and the DaemonSet controller's
C{snapshot} and C{constructHistory}).

A revision holds what kubectl's C{rollout undo} patches back onto its
owner: C{data} is C{{"spec":{"template":{...,"$patch":"replace"}}}}
(upstream's C{getPatch}), so the strategic merge patch replaces the whole
template. Each is named C{<owner>-<hash>}, labelled with its template's
labels and its hash, controlled by its owner (C{controller: true}, so the
garbage collector removes it with the owner) and numbered: the newest
template has the highest C{revision}; an equal revision found again (a
rollback) is given the next number instead of being created twice.

The hash differs by kind, as upstream's: a DaemonSet's is the pod-template
hash of its template and collision count (C{controller.ComputeHash}, the
value of its pods' C{controller-revision-hash} label); a StatefulSet's is
C{HashControllerRevision}, FNV-1 over the revision's data and the decimal
collision count, and its pods' label carries the revision's name.
"""

import copy
from functools import cmp_to_key

import orjson

from orchd.api.errors import StatusError
from orchd.controllers.controllerref import owner_reference
from orchd.controllers.deploymentutil import safe_encode
from orchd.controllers.podstate import controller_ref, parse_time
from orchd.registry.context import RequestContext

#: [COMPAT] The label of pods (and DaemonSet revisions) naming their revision.
REVISION_LABEL = "controller-revision-hash"
#: [renamed] Upstream's C{controller.kubernetes.io/hash} on StatefulSet revisions.
HASH_LABEL = "controller.orch.io/hash"
_FNV32_OFFSET, _FNV32_PRIME = 0x811C9DC5, 0x01000193
#: Upstream's prefix bound in C{ControllerRevisionName}: names stay under 253 bytes.
_MAX_PREFIX = 223
#: Upstream's C{revisionHistoryLimit} default.
DEFAULT_HISTORY_LIMIT = 10


def fnv32(data):
    """FNV-1 (multiply, then xor), as Go's C{hash/fnv.New32}."""
    value = _FNV32_OFFSET
    for byte in data:
        value = ((value * _FNV32_PRIME) & 0xFFFFFFFF) ^ byte
    return value


def revision_data(template):
    """A revision's C{data} for a pod template (upstream's C{getPatch})."""
    template = copy.deepcopy(template) if isinstance(template, dict) else {}
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


def data_bytes(data):
    """The data as Go's C{json.Marshal} of maps writes it: compact, keys sorted."""
    return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)


def hash_revision(data, probe=None):
    """Upstream's C{HashControllerRevision} of C{data} and the collision count C{probe}."""
    raw = data_bytes(data)
    if probe is not None:
        raw += str(probe).encode()
    return safe_encode(str(fnv32(raw)))


def revision_name(prefix, hash):
    """Upstream's C{ControllerRevisionName}."""
    return f"{prefix[:_MAX_PREFIX]}-{hash}"


def template_of(revision):
    """The pod template a revision holds, without its directive."""
    template = copy.deepcopy(((revision.get("data") or {}).get("spec") or {}).get("template"))
    if not isinstance(template, dict):
        return {}
    template.pop("$patch", None)
    return template


def number(revision):
    value = revision.get("revision")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _compare(a, b):
    """Upstream's C{byRevision}: by number, then creation time, then name."""
    if number(a) != number(b):
        return -1 if number(a) < number(b) else 1
    ta = parse_time(a["metadata"].get("creationTimestamp")) or 0
    tb = parse_time(b["metadata"].get("creationTimestamp")) or 0
    if ta != tb:
        return -1 if ta < tb else 1
    na, nb = a["metadata"]["name"], b["metadata"]["name"]
    return (na > nb) - (na < nb)


def sort_revisions(revisions):
    """The revisions oldest first (upstream's C{SortControllerRevisions})."""
    return sorted(revisions, key=cmp_to_key(_compare))


def next_number(revisions):
    """One more than the highest revision number (1 for no history)."""
    return max((number(r) for r in revisions), default=0) + 1


def _semantic(value):
    """A value with nulls and empty maps and lists dropped: Go's semantic equality."""
    if isinstance(value, dict):
        out = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None and v != {} and v != []}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def equal_data(revision, data):
    """Whether a revision holds C{data}, compared as Go compares values semantically."""
    return _semantic(revision.get("data")) == _semantic(data)


def history_limit(owner):
    value = (owner.get("spec") or {}).get("revisionHistoryLimit")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return DEFAULT_HISTORY_LIMIT


def stale_revisions(revisions, live, limit):
    """
    The revisions to delete: the oldest of those no live pod uses (C{live},
    names) beyond C{limit} (upstream's C{truncateHistory} and
    C{cleanupHistory}).
    """
    unused = [r for r in sort_revisions(revisions) if r["metadata"]["name"] not in live]
    excess = len(unused) - limit
    return unused[:excess] if excess > 0 else []


def new_revision(owner, api_version, kind, template, revision, hash, extra_labels):
    """
    A ControllerRevision of C{owner}'s C{template} named C{<owner>-<hash>},
    with the template's labels plus C{extra_labels}, the owner's annotations
    (kubectl's change-cause among them) and a controller reference.
    """
    meta = owner["metadata"]
    labels = dict(((template or {}).get("metadata") or {}).get("labels") or {})
    labels.update(extra_labels)
    revision_meta = {"name": revision_name(meta["name"], hash),
                     "namespace": meta.get("namespace", ""), "labels": labels,
                     "ownerReferences": [owner_reference(api_version, kind, owner)]}
    annotations = meta.get("annotations")
    if annotations:
        revision_meta["annotations"] = dict(annotations)
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": revision_meta,
            "data": revision_data(template), "revision": revision}


class RevisionIndex:
    """
    A controllerrevisions informer's objects indexed by their controller's
    uid, and the orphans by namespace, so an owner's sync reads its own.
    """

    def __init__(self):
        self._owned = {}
        self._orphans = {}

    def changed(self, type, obj, old, deleted):
        """Follow one informer change; returns the uid of the controller, if any."""
        if old is not None:
            self._bucket(old).pop(old["metadata"]["name"], None)
        if deleted:
            ref = controller_ref(obj["metadata"])
            return ref["uid"] if ref else None
        self._bucket(obj)[obj["metadata"]["name"]] = obj
        ref = controller_ref(obj["metadata"])
        return ref["uid"] if ref else None

    def _bucket(self, obj):
        meta = obj["metadata"]
        ref = controller_ref(meta)
        if ref is not None:
            return self._owned.setdefault(ref["uid"], {})
        return self._orphans.setdefault(meta.get("namespace", ""), {})

    def candidates(self, owner):
        """The owner's revisions and the orphans of its namespace, by name."""
        meta = owner["metadata"]
        found = dict(self._orphans.get(meta.get("namespace", ""), {}))
        found.update(self._owned.get(meta["uid"], {}))
        return [found[name] for name in sorted(found)]


class History:
    """
    Revision writes for one kind of owner, through the controllerrevisions
    registry.

    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param manager: the field manager of the writes.
    """

    def __init__(self, catalog, manager):
        self._catalog = catalog
        self.provider = catalog.resource("apps", "controllerrevisions")
        self._manager = manager

    def context(self, namespace):
        return RequestContext(self._catalog.system_context().user, namespace,
                              field_manager=self._manager)

    async def create(self, revision):
        """
        Create C{revision}; returns it, or the stored one of that name when
        it holds the same data (created by an earlier sync).

        @raise StatusError: 409 AlreadyExists when another revision has the
            name (a hash collision: the caller bumps its collision count).
        """
        namespace = revision["metadata"]["namespace"]
        try:
            return await self.provider.create(self.context(namespace), revision)
        except StatusError as e:
            if e.code != 409:
                raise
            existing = await self.provider.find(self.context(namespace),
                                                revision["metadata"]["name"])
            if existing is not None and equal_data(existing, revision["data"]):
                return existing
            raise

    async def renumber(self, revision, value):
        """Give C{revision} the number C{value} (a rollback to it); returns it as stored."""
        if number(revision) == value:
            return revision
        uid = revision["metadata"].get("uid")

        def change(current):
            if current["metadata"].get("uid") != uid:
                raise StatusError.conflict("controllerrevisions", "apps",
                                           current["metadata"]["name"],
                                           "the revision was replaced")
            current["revision"] = value
            current["metadata"].pop("resourceVersion", None)
            return current

        meta = revision["metadata"]
        return await self.provider.patch(self.context(meta.get("namespace", "")),
                                         meta["name"], change)

    async def relabel(self, revision, labels):
        """Add C{labels} to a revision (an older one without its hash label)."""
        def change(current):
            current["metadata"].setdefault("labels", {}).update(labels)
            current["metadata"].pop("resourceVersion", None)
            return current

        meta = revision["metadata"]
        return await self.provider.patch(self.context(meta.get("namespace", "")),
                                         meta["name"], change)

    async def delete(self, revision):
        """Delete a revision; one already gone is no error."""
        meta = revision["metadata"]
        try:
            await self.provider.delete(self.context(meta.get("namespace", "")), meta["name"])
        except StatusError as e:
            if e.code != 404:
                raise
