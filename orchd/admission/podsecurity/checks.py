# -*- test-case-name: tests.admission.test_podsecurity_checks -*-
"""
The Pod Security Standards as a table: which control belongs to which
level, and which function judges it at which version.

A level includes the controls of the levels below it; a restricted
control may replace a baseline one it makes stricter (C{replaces}).
A control takes, for a pinned version C{v1.N}, its newest function from
a version no later than that; it does not apply before its first
version. C{latest} takes the newest of all. Results are listed by
control ID, as upstream lists them.
"""

from orchd.admission.podsecurity import baseline as b
from orchd.admission.podsecurity import restricted as r
from orchd.admission.podsecurity.levels import BASELINE, PRIVILEGED, RESTRICTED
from orchd.admission.podsecurity.podspec import mapping

_SAFE_SYSCTLS = frozenset(("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                           "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
                           "net.ipv4.ip_unprivileged_port_start"))
_SAFE_SYSCTLS_1_27 = _SAFE_SYSCTLS | {"net.ipv4.ip_local_reserved_ports"}
_SAFE_SYSCTLS_1_29 = _SAFE_SYSCTLS_1_27 | {
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes"}
_SELINUX_TYPES = frozenset(("", "container_t", "container_init_t", "container_kvm_t"))
_SELINUX_TYPES_1_31 = _SELINUX_TYPES | {"container_engine_t"}


class Check:
    """
    One control.

    @ivar versions: C{((major, minor), function)} pairs, oldest first.
    @ivar replaces: IDs of lower-level controls this one supersedes.
    """

    __slots__ = ("id", "level", "versions", "replaces")

    def __init__(self, id, level, *versions, replaces=()):
        self.id = id
        self.level = level
        self.versions = versions
        self.replaces = replaces

    def at(self, version):
        """The function judging this control at C{version} (None: latest), or None."""
        chosen = None
        for since, function in self.versions:
            if version is None or since <= version:
                chosen = function
        return chosen


CHECKS = tuple(sorted((
    # baseline
    Check("appArmorProfile", BASELINE, ((1, 0), b.app_armor)),
    Check("capabilities_baseline", BASELINE, ((1, 0), b.capabilities_baseline)),
    Check("hostNamespaces", BASELINE, ((1, 0), b.host_namespaces)),
    Check("hostPathVolumes", BASELINE, ((1, 0), b.host_path_volumes)),
    Check("hostPorts", BASELINE, ((1, 0), b.host_ports)),
    Check("privileged", BASELINE, ((1, 0), b.privileged)),
    Check("procMount", BASELINE, ((1, 0), b.proc_mount)),
    Check("seLinuxOptions", BASELINE, ((1, 0), b.se_linux_options(_SELINUX_TYPES)),
          ((1, 31), b.se_linux_options(_SELINUX_TYPES_1_31))),
    Check("seccompProfile_baseline", BASELINE, ((1, 0), b.seccomp_baseline)),
    Check("sysctls", BASELINE, ((1, 0), b.sysctls(_SAFE_SYSCTLS)),
          ((1, 27), b.sysctls(_SAFE_SYSCTLS_1_27)), ((1, 29), b.sysctls(_SAFE_SYSCTLS_1_29))),
    Check("windowsHostProcess", BASELINE, ((1, 0), b.windows_host_process)),
    # restricted
    Check("allowPrivilegeEscalation", RESTRICTED, ((1, 8), r.allow_privilege_escalation),
          ((1, 25), r.unless_windows(r.allow_privilege_escalation))),
    Check("capabilities_restricted", RESTRICTED, ((1, 22), r.capabilities_restricted),
          ((1, 25), r.unless_windows(r.capabilities_restricted)),
          replaces=("capabilities_baseline",)),
    Check("restrictedVolumes", RESTRICTED, ((1, 0), r.restricted_volumes),
          replaces=("hostPathVolumes",)),
    Check("runAsNonRoot", RESTRICTED, ((1, 0), r.run_as_non_root)),
    Check("runAsUser", RESTRICTED, ((1, 23), r.run_as_user)),
    Check("seccompProfile_restricted", RESTRICTED, ((1, 19), r.seccomp_restricted),
          ((1, 25), r.unless_windows(r.seccomp_restricted)),
          replaces=("seccompProfile_baseline",)),
), key=lambda check: check.id))

_INCLUDES = {PRIVILEGED: (), BASELINE: (BASELINE,), RESTRICTED: (BASELINE, RESTRICTED)}


def controls(level_version):
    """C{(id, function)} of each control that applies at a L{LevelVersion}, by ID."""
    version = level_version.version
    active = [(check, check.at(version)) for check in CHECKS
              if check.level in _INCLUDES[level_version.level]]
    active = [(check, function) for check, function in active if function is not None]
    replaced = {old for check, _ in active for old in check.replaces}
    return [(check.id, function) for check, function in active if check.id not in replaced]


def evaluate(level_version, pod_meta, pod_spec):
    """The C{(id, reason, detail)} of each control the pod fails, by control ID."""
    meta, spec = mapping(pod_meta), mapping(pod_spec)
    failed = []
    for id, function in controls(level_version):
        result = function(meta, spec)
        if result is not None:
            failed.append((id,) + tuple(result))
    return failed


def describe(failed):
    """C{reason (detail), ...}: the violations as one text, upstream's format."""
    return ", ".join(f"{reason} ({detail})" if detail else reason
                     for _, reason, detail in failed)
