# -*- test-case-name: tests.api.test_discovery -*-
"""
The discovery documents: C{/version}, C{/api}, C{/apis} and the resource
lists of every group/version, in the legacy and the aggregated format.

kubectl and client-go build their REST mapper from these documents, so every
field they read is spelled and ordered as the upstream API server does. All
functions are pure: they take the enabled L{KindInfo} rows and return
JSON-shaped dicts; serving them is the server's job.
"""

import base64
import hashlib
import platform
import re

from orchd.api.groups import canonical_group
from orchd.api.kinds import SUBRESOURCE_VERBS, subresource_kind

#: [COMPAT] The media type of aggregated discovery; clients match it literally.
AGGREGATED_DISCOVERY_GROUP = "apidiscovery.k8s.io"
AGGREGATED_DISCOVERY_VERSION = "v2"
AGGREGATED_DISCOVERY_KIND = "APIGroupDiscoveryList"
AGGREGATED_MEDIA_TYPE = (
    f"application/json;g={AGGREGATED_DISCOVERY_GROUP};v={AGGREGATED_DISCOVERY_VERSION}"
    f";as={AGGREGATED_DISCOVERY_KIND}"
)

#: The Kubernetes API version this server's specification corresponds to.
MAJOR, MINOR = "1", "36"
GIT_VERSION = f"v{MAJOR}.{MINOR}.0"

# Where each group sorts in /apis, as the upstream aggregator orders groups
# (higher first; ties by name). The order decides which group wins when two
# define the same resource or short name, so it follows upstream.
_GROUP_PRIORITY = {
    "apiregistration.orch.io": 18100,
    "apps": 17800,
    "events.orch.io": 17750,
    "authentication.orch.io": 17700,
    "authorization.orch.io": 17600,
    "autoscaling": 17500,
    "batch": 17400,
    "certificates.orch.io": 17300,
    "networking.orch.io": 17200,
    "policy": 17100,
    "rbac.authorization.orch.io": 17000,
    "storage.orch.io": 16800,
    "admissionregistration.orch.io": 16700,
    "apiextensions.orch.io": 16700,
    "scheduling.orch.io": 16600,
    "coordination.orch.io": 16500,
    "node.orch.io": 16300,
    "discovery.orch.io": 16200,
    "flowcontrol.apiserver.orch.io": 16100,
}

_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?\Z")
_STAGE_RANK = {None: 0, "beta": 1, "alpha": 2}


def version_sort_key(version):
    """
    Sort key putting the most preferred version first, as upstream's
    kube-aware version order: GA before beta before alpha, then higher
    numbers first; names that are not Kubernetes versions go last, by name.
    """
    match = _VERSION_RE.match(version)
    if match is None:
        return (1, 0, 0, 0, version)
    major, stage, minor = match.groups()
    return (0, _STAGE_RANK[stage], -int(major), -int(minor or 0), version)


def _group_sort_key(group):
    # An upstream spelling (--upstream-group-names) sorts right after the
    # group it names, so the served name stays the preferred one.
    served = canonical_group(group)
    return (-_GROUP_PRIORITY.get(served, 0), served != group, group)


def _compute_version_info():
    machine = platform.machine().lower()
    # Go's names for the architecture, as upstream reports it.
    go_arch = {"x86_64": "amd64", "aarch64": "arm64", "i686": "386", "i386": "386"}
    arch = go_arch.get(machine, machine)
    return {
        "major": MAJOR,
        "minor": MINOR,
        "emulationMajor": MAJOR,
        "emulationMinor": MINOR,
        "minCompatibilityMajor": MAJOR,
        "minCompatibilityMinor": str(int(MINOR) - 1),
        "gitVersion": GIT_VERSION,
        "gitCommit": "",
        "gitTreeState": "clean",
        # Upstream's value for builds that do not stamp a date.
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "python" + platform.python_version(),
        "compiler": platform.python_implementation().lower(),
        "platform": f"{platform.system().lower()}/{arch}",
    }


_VERSION_INFO = _compute_version_info()


def version_info():
    """
    The C{/version} object. kubectl parses only C{gitVersion} (as C{v} plus a
    semantic version, for its skew warning); the rest is informative. It is
    computed once at import, so serving it costs a dict copy.
    """
    return dict(_VERSION_INFO)


def api_versions(server_address):
    """The legacy C{/api} document: the core group has only C{v1}."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address},
        ],
    }


def _versions_by_group(kinds):
    """Named groups in discovery order, each with its versions, preferred first."""
    groups = {}
    for info in kinds:
        if info.group:
            groups.setdefault(info.group, set()).add(info.version)
    return {
        group: sorted(groups[group], key=version_sort_key)
        for group in sorted(groups, key=_group_sort_key)
    }


def _group_entry(group, versions):
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": dict(entries[0])}


def api_group_list(kinds):
    """The legacy C{/apis} document: every named group with enabled versions."""
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group_entry(g, vs) for g, vs in _versions_by_group(kinds).items()],
    }


def api_group(kinds, group):
    """The C{/apis/<group>} document, or C{None} when no version of it is enabled."""
    versions = _versions_by_group(kinds).get(group)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, versions)}


def storage_version_hash(info):
    """
    The opaque C{storageVersionHash} of a stored resource, computed as upstream
    does (base64 of the first 8 bytes of SHA-256 of C{group/version/kind}).

    All served versions of one resource share one storage, so the hash names
    the version objects are stored in (C{info.storage_version}), not the one
    being listed. Clients only compare it. Both spellings of a renamed
    group name one storage, so they share the hash of the served name.
    """
    if not info.stored:
        return None
    digest = hashlib.sha256(f"{canonical_group(info.group)}/{info.storage_version}/{info.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode("ascii")


def _kinds_of(kinds, group, version):
    return sorted(
        (k for k in kinds if k.group == group and k.version == version),
        key=lambda k: k.resource,
    )


def _resource_entry(info):
    entry = {
        "name": info.resource,
        "singularName": info.singular,
        "namespaced": info.namespaced,
        "kind": info.kind,
        "verbs": sorted(info.verbs),
    }
    if info.short_names:
        entry["shortNames"] = list(info.short_names)
    if info.categories:
        entry["categories"] = list(info.categories)
    hash_ = storage_version_hash(info)
    if hash_:
        entry["storageVersionHash"] = hash_
    return entry


def _subresource_entries(info):
    for sub in sorted(info.subresources):
        entry = {
            "name": f"{info.resource}/{sub}",
            "singularName": "",
            "namespaced": info.namespaced,
            "kind": info.kind,
            "verbs": sorted(SUBRESOURCE_VERBS[sub]),
        }
        own = subresource_kind(info, sub)
        if own is not info:
            entry["kind"] = own.kind
            # Named only when they differ from the list's (pods/eviction: policy/v1).
            if (own.group, own.version) != (info.group, info.version):
                entry.update(group=own.group, version=own.version)
        yield entry


def api_resource_list(kinds, group, version):
    """
    The C{/api/v1} or C{/apis/<group>/<version>} document, or C{None} when
    that group/version has no enabled kind.

    Resources and their subresources are sorted by name, as upstream lists them.
    """
    selected = _kinds_of(kinds, group, version)
    if not selected:
        return None
    resources = []
    for info in selected:
        resources.append(_resource_entry(info))
        resources.extend(_subresource_entries(info))
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def _gvk(info):
    return {"group": info.group, "version": info.version, "kind": info.kind}


def _discovery_resource(info):
    resource = {
        "resource": info.resource,
        "responseKind": _gvk(info),
        "scope": "Namespaced" if info.namespaced else "Cluster",
        "singularResource": info.singular,
        "verbs": sorted(info.verbs),
    }
    if info.short_names:
        resource["shortNames"] = list(info.short_names)
    if info.categories:
        resource["categories"] = list(info.categories)
    if info.subresources:
        resource["subresources"] = [
            {"subresource": sub, "responseKind": _gvk(subresource_kind(info, sub)),
             "verbs": sorted(SUBRESOURCE_VERBS[sub])}
            for sub in sorted(info.subresources)
        ]
    return resource


def _group_discovery(kinds, group, versions):
    return {
        "metadata": {"name": group},
        "versions": [
            {
                "version": version,
                "resources": [_discovery_resource(k) for k in _kinds_of(kinds, group, version)],
                "freshness": "Current",
            }
            for version in versions
        ],
    }


def aggregated_discovery(kinds, core):
    """
    The aggregated discovery document (C{APIGroupDiscoveryList}): for C{/api}
    when C{core} is true (one item, the core group named C{""}), else for
    C{/apis} (every named group). Versions come preferred first, which is how
    clients tell the preferred version. With it, client-go needs two requests
    instead of one per group/version.
    """
    if core:
        versions = sorted({k.version for k in kinds if not k.group}, key=version_sort_key)
        items = [_group_discovery(kinds, "", versions)] if versions else []
    else:
        items = [_group_discovery(kinds, g, vs) for g, vs in _versions_by_group(kinds).items()]
    return {
        "kind": AGGREGATED_DISCOVERY_KIND,
        "apiVersion": f"{AGGREGATED_DISCOVERY_GROUP}/{AGGREGATED_DISCOVERY_VERSION}",
        "metadata": {},
        "items": items,
    }
