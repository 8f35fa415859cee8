# -*- test-case-name: tests.api.test_groups -*-
"""
The upstream spellings of renamed API groups, accepted from typed clients.

[COMPAT] Groups carry C{orch.io} where upstream has C{k8s.io}, and discovery
shows only that spelling. But typed clients (kubectl's C{create role},
C{create priorityclass}, C{certificate approve}, client libraries) write the
upstream group into their request paths and bodies and decode answers only
under it. So a request under C{/apis/<name>.k8s.io/...} is served by the
renamed group: stored and authorized under the C{orch.io} name, answered
with the spelling the client used.
"""

_RENAMED = ".orch.io"
_UPSTREAM = ".k8s.io"
# Groups that keep their upstream spelling everywhere (they are not renamed).
_KEPT = frozenset(("meta.k8s.io", "apidiscovery.k8s.io"))


def canonical_group(group):
    """The served name of C{group}: C{rbac.authorization.k8s.io} -> C{...orch.io}."""
    if group.endswith(_UPSTREAM) and group not in _KEPT:
        return group[:-len(_UPSTREAM)] + _RENAMED
    return group


def canonical_api_version(api_version):
    """C{canonical_group} applied to the group part of an apiVersion."""
    group, sep, version = api_version.rpartition("/")
    return f"{canonical_group(group)}/{version}" if sep else api_version


def in_spelling(obj, api_version):
    """
    A shallow copy of C{obj} (and of its list items) whose apiVersion is
    C{api_version}, for answering in the spelling a client used.
    """
    out = dict(obj)
    out["apiVersion"] = api_version
    items = out.get("items")
    if isinstance(items, list):
        out["items"] = [dict(item, apiVersion=api_version) if "apiVersion" in item else item
                        for item in items]
    return out
