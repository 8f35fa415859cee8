# -*- test-case-name: tests.admission.test_podsecurity_checks -*-
"""
The baseline controls: no known privilege escalation.

Each function takes a pod's metadata and spec and returns None when the
pod passes, else C{(reason, detail)}: the control's short name and what
exactly is wrong, phrased as upstream (C{policy/check_*.go}). Controls
whose allowed values grew between releases are made by a function of
the allowed set; L{orchd.admission.podsecurity.checks} pins each to its
versions.
"""

from orchd.admission.podsecurity.podspec import (
    bad_setters, containers, containers_phrase, items, mapping, name_of, pluralize, quote,
    security, setters)

#: Capabilities a container runtime grants by default; adding others is privileged.
DEFAULT_CAPABILITIES = frozenset((
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"))
APPARMOR_PREFIX = "container.apparmor.security.beta.orch.io/"


def host_namespaces(meta, spec):
    used = [field for field in ("hostIPC", "hostNetwork", "hostPID") if spec.get(field) is True]
    if used:
        return "host namespaces", ", ".join(f"{field}=true" for field in used)


def privileged(meta, spec):
    names = [name_of(c) for c in containers(spec) if security(c).get("privileged") is True]
    if names:
        return "privileged", f"{containers_phrase(names)} must not set securityContext.privileged=true"


def capabilities_baseline(meta, spec):
    names, added = [], set()
    for container in containers(spec):
        extra = {str(cap) for cap in _added(container)} - DEFAULT_CAPABILITIES
        if extra:
            names.append(name_of(container))
            added |= extra
    if names:
        return "non-default capabilities", (
            f"{containers_phrase(names)} must not include {quote(sorted(added))} "
            "in securityContext.capabilities.add")


def _added(container):
    add = mapping(security(container).get("capabilities")).get("add")
    return add if isinstance(add, list) else []


def host_path_volumes(meta, spec):
    names = [name_of(v) for v in items(spec.get("volumes")) if "hostPath" in v]
    if names:
        return "hostPath volumes", f'{pluralize("volume", "volumes", len(names))} {quote(names)}'


def host_ports(meta, spec):
    names, ports = [], set()
    for container in containers(spec):
        used = {p.get("hostPort") for p in items(container.get("ports")) if p.get("hostPort")}
        if used:
            names.append(name_of(container))
            ports |= used
    if names:
        listed = ", ".join(str(p) for p in sorted(ports, key=str))
        return "hostPort", (f'{containers_phrase(names)} {pluralize("uses", "use", len(names))} '
                            f'{pluralize("hostPort", "hostPorts", len(ports))} {listed}')


def app_armor(meta, spec):
    bad = [f"{key}={quote([value])}"
           for key, value in sorted(mapping(meta.get("annotations")).items())
           if key.startswith(APPARMOR_PREFIX) and not _allowed_apparmor(value)]
    pod, names = bad_setters(spec, lambda sc: mapping(sc.get("appArmorProfile")).get("type")
                             == "Unconfined")
    if pod or names:
        bad.append(f'{setters(pod, names)} must not set securityContext.appArmorProfile.type '
                   'to "Unconfined"')
    if bad:
        return (pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", len(bad)),
                "; ".join(bad))


def _allowed_apparmor(value):
    return value in ("", "runtime/default") or (isinstance(value, str)
                                                and value.startswith("localhost/"))


def se_linux_options(allowed_types):
    """The seLinuxOptions control allowing the SELinux types C{allowed_types}."""
    def check(meta, spec):
        types, user, role = set(), False, False

        def bad(sc):
            nonlocal user, role
            options = mapping(sc.get("seLinuxOptions"))
            kind = options.get("type") or ""
            wrong = kind not in allowed_types
            if wrong:
                types.add(kind)
            user, role = user or bool(options.get("user")), role or bool(options.get("role"))
            return wrong or bool(options.get("user")) or bool(options.get("role"))
        pod, names = bad_setters(spec, bad)
        if pod or names:
            found = []
            if types:
                found.append(f'{pluralize("type", "types", len(types))} {quote(sorted(types))}')
            found += [f"{field} may not be set" for field, set_ in (("user", user),
                                                                      ("role", role)) if set_]
            return "seLinuxOptions", (f"{setters(pod, names)} set forbidden "
                                      f"securityContext.seLinuxOptions: {'; '.join(found)}")
    return check


def proc_mount(meta, spec):
    names, values = [], set()
    for container in containers(spec):
        mount = security(container).get("procMount")
        if mount not in (None, "", "Default"):
            names.append(name_of(container))
            values.add(str(mount))
    if names:
        return "procMount", (f"{containers_phrase(names)} must not set "
                             f"securityContext.procMount to {quote(sorted(values))}")


def seccomp_baseline(meta, spec):
    pod, names = bad_setters(spec, lambda sc: mapping(sc.get("seccompProfile")).get("type")
                             == "Unconfined")
    if pod or names:
        return "seccompProfile", (f"{setters(pod, names)} must not set "
                                  'securityContext.seccompProfile.type to "Unconfined"')


def sysctls(allowed):
    """The sysctls control allowing the (namespaced, isolated) sysctls C{allowed}."""
    def check(meta, spec):
        names = [str(s.get("name")) for s in items(security(spec).get("sysctls"))
                 if s.get("name") not in allowed]
        if names:
            return "forbidden sysctls", ", ".join(names)
    return check


def windows_host_process(meta, spec):
    pod, names = bad_setters(spec, lambda sc: mapping(sc.get("windowsOptions")).get(
        "hostProcess") is True)
    if pod or names:
        return "hostProcess", (f"{setters(pod, names)} must not set "
                               "securityContext.windowsOptions.hostProcess=true")
