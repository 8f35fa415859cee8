# -*- test-case-name: tests.admission.test_podsecurity_checks -*-
"""
The restricted controls: current pod hardening best practice.

Same shape as L{orchd.admission.podsecurity.baseline}. Several of these
do not apply to Windows pods from v1.25 on (L{unless_windows}), where the
Linux-only fields mean nothing.
"""

from orchd.admission.podsecurity.podspec import (
    containers, containers_phrase, is_windows, items, mapping, name_of, pluralize, quote,
    security, setters, unset_or)

#: Volume sources that expose nothing of the node.
ALLOWED_VOLUME_TYPES = frozenset((
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret"))


def unless_windows(check):
    """C{check}, passing every pod that declares C{spec.os.name: windows}."""
    def windows_exempt(meta, spec):
        return None if is_windows(spec) else check(meta, spec)
    windows_exempt.__name__ = check.__name__
    return windows_exempt


def allow_privilege_escalation(meta, spec):
    names = [name_of(c) for c in containers(spec)
             if security(c).get("allowPrivilegeEscalation") is not False]
    if names:
        return "allowPrivilegeEscalation != false", (
            f"{containers_phrase(names)} must set securityContext.allowPrivilegeEscalation=false")


def run_as_non_root(meta, spec):
    (pod, names), unset = unset_or(spec, lambda sc: _bool(sc.get("runAsNonRoot")),
                                   lambda value: value is True)
    if pod or names:
        return "runAsNonRoot != true", (f"{setters(pod, names)} must not set "
                                        "securityContext.runAsNonRoot=false")
    if unset:
        return "runAsNonRoot != true", (f"pod or {containers_phrase(unset)} must set "
                                        "securityContext.runAsNonRoot=true")


def _bool(value):
    return value if isinstance(value, bool) else None


def run_as_user(meta, spec):
    pod = security(spec).get("runAsUser") == 0
    names = [name_of(c) for c in containers(spec) if security(c).get("runAsUser") == 0]
    if pod or names:
        return "runAsUser=0", f"{setters(pod, names)} must not set runAsUser=0"


def seccomp_restricted(meta, spec):
    values = set()

    def profile(sc):
        if sc.get("seccompProfile") is None:
            return None
        return str(mapping(sc["seccompProfile"]).get("type") or "")

    def good(kind):
        if kind in ("RuntimeDefault", "Localhost"):
            return True
        values.add(kind)
        return False
    (pod, names), unset = unset_or(spec, profile, good)
    if pod or names:
        return "seccompProfile", (f"{setters(pod, names)} must not set "
                                  f"securityContext.seccompProfile.type to {quote(sorted(values))}")
    if unset:
        return "seccompProfile", (f"pod or {containers_phrase(unset)} must set "
                                  'securityContext.seccompProfile.type to "RuntimeDefault" or '
                                  '"Localhost"')


def capabilities_restricted(meta, spec):
    missing_drop, adding, added = [], [], set()
    for container in containers(spec):
        capabilities = mapping(security(container).get("capabilities"))
        if "ALL" not in _strings(capabilities.get("drop")):
            missing_drop.append(name_of(container))
        extra = {cap for cap in _strings(capabilities.get("add")) if cap != "NET_BIND_SERVICE"}
        if extra:
            adding.append(name_of(container))
            added |= extra
    details = []
    if missing_drop:
        details.append(f'{containers_phrase(missing_drop)} must set '
                       'securityContext.capabilities.drop=["ALL"]')
    if adding:
        details.append(f"{containers_phrase(adding)} must not include {quote(sorted(added))} "
                       "in securityContext.capabilities.add")
    if details:
        return "unrestricted capabilities", "; ".join(details)


def _strings(value):
    return [str(v) for v in value] if isinstance(value, list) else []


def restricted_volumes(meta, spec):
    names, kinds = [], set()
    for volume in items(spec.get("volumes")):
        bad = sorted(key for key in volume if key != "name" and key not in ALLOWED_VOLUME_TYPES)
        if bad:
            names.append(name_of(volume))
            kinds.update(bad)
    if names:
        return "restricted volume types", (
            f'{pluralize("volume", "volumes", len(names))} {quote(names)} '
            f'{pluralize("uses", "use", len(names))} '
            f'{pluralize("restricted volume type", "restricted volume types", len(kinds))} '
            f"{quote(sorted(kinds))}")
