# -*- test-case-name: tests.api.test_groups,tests.server.test_upstream_names -*-
"""
The upstream spellings of renamed API groups, accepted from typed clients.

[COMPAT] Groups carry C{orch.io} where upstream has C{k8s.io}, and discovery
shows only that spelling. But typed clients (kubectl's C{create role},
C{create priorityclass}, C{certificate approve}, client libraries) write the
upstream group into their request paths and bodies and decode answers only
under it. So a request under C{/apis/<name>.k8s.io/...} is served by the
renamed group: stored and authorized under the C{orch.io} name, answered
with the spelling the client used.

With C{--upstream-group-names}, discovery and OpenAPI also list each
renamed group under its upstream spelling (L{with_upstream_names}), for
tools that look a group up by that name before calling it (C{kubectl apply}
of an unmodified manifest, operator frameworks).
"""

from orchd.api.kinds import KindInfo

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


def upstream_group(group):
    """
    The upstream spelling of a renamed group (C{rbac.authorization.orch.io}
    -> C{rbac.authorization.k8s.io}), or C{None} for a group that is not
    renamed (the core group, C{apps}, a custom resource's own group).
    """
    if group.endswith(_RENAMED):
        return group[:-len(_RENAMED)] + _UPSTREAM
    return None


def is_upstream_spelling(group):
    """True for a group named in its upstream spelling, served by its renamed group."""
    return canonical_group(group) != group


_ALIAS = "groups.upstream_alias"


def upstream_alias(info):
    """
    The L{KindInfo} of C{info} as its group's upstream spelling names it,
    or C{None} when its group is not renamed.

    The alias has every facet of C{info} (schema, printer, verbs, storage)
    but its group, so that discovery and OpenAPI describe both names from
    one row; and no short names or categories: clients resolve those to
    the served name anyway, and kubectl warns on every short name two
    groups share ("could also match lower priority resource"), or lists a
    category's resources twice. It is built once and kept with C{info}, so
    that documents cached by kind set stay cached.
    """
    upstream = upstream_group(info.group)
    if upstream is None:
        return None
    alias = info.derived.get(_ALIAS)
    if alias is None:
        alias = KindInfo.__new__(KindInfo)
        for slot in KindInfo.__slots__:
            setattr(alias, slot, getattr(info, slot))
        alias.group = upstream
        alias.short_names = alias.categories = ()
        alias.subresource_kinds = {
            sub: (upstream_group(group) or group, version, kind)
            for sub, (group, version, kind) in info.subresource_kinds.items()
        }
        alias.derived = {}
        info.derived[_ALIAS] = alias
    return alias


def with_upstream_names(kinds):
    """
    C{kinds}, then the upstream-spelled alias (L{upstream_alias}) of each
    kind of a renamed group: what discovery and OpenAPI describe under
    C{--upstream-group-names}. The served names come first, so they stay
    the preferred ones wherever order decides.
    """
    kinds = list(kinds)
    aliases = [alias for alias in map(upstream_alias, kinds) if alias is not None]
    return kinds + aliases
