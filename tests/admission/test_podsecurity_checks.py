"""The Pod Security Standards' controls: a failing and a passing pod for each."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.admission.podsecurity.checks import CHECKS, controls, describe, evaluate
from orchd.admission.podsecurity.levels import (
    BASELINE, PRIVILEGED, RESTRICTED, LevelVersion, Policy, label_errors, parse_version)

RESTRICTED_LATEST = LevelVersion(RESTRICTED)
BASELINE_LATEST = LevelVersion(BASELINE)


def conforming():
    """A pod spec that meets the restricted level."""
    return {"securityContext": {"runAsNonRoot": True,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "image": "x", "securityContext": {
                "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}


def container_sc(spec, index=0):
    return spec["containers"][index]["securityContext"]


def setter(path, value, on="container"):
    """A change setting C{path} (dotted, under securityContext) on the container or pod."""
    def change(spec, meta):
        target = container_sc(spec) if on == "container" else spec["securityContext"]
        *parents, last = path.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value
    return change


def spec_field(field, value):
    def change(spec, meta):
        spec[field] = value
    return change


def volume(kind, source=None):
    def change(spec, meta):
        spec["volumes"] = [{"name": "v", kind: source if source is not None else {}}]
    return change


def annotation(key, value):
    def change(spec, meta):
        meta.setdefault("annotations", {})[key] = value
    return change


def host_port(port):
    def change(spec, meta):
        spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": port}]
    return change


AA = "container.apparmor.security.beta.orch.io/c"
#: Baseline controls a stricter restricted control takes the place of.
REPLACED = ("capabilities_baseline", "hostPathVolumes", "seccompProfile_baseline")

#: (control, level, failing change, (reason, detail), passing change)
EXAMPLES = [
    ("hostNamespaces", BASELINE, spec_field("hostPID", True),
     ("host namespaces", "hostPID=true"), spec_field("hostPID", False)),
    ("privileged", BASELINE, setter("privileged", True),
     ("privileged", 'container "c" must not set securityContext.privileged=true'),
     setter("privileged", False)),
    ("capabilities_baseline", BASELINE, setter("capabilities.add", ["SYS_ADMIN"]),
     ("non-default capabilities",
      'container "c" must not include "SYS_ADMIN" in securityContext.capabilities.add'),
     setter("capabilities.add", ["CHOWN"])),
    ("hostPathVolumes", BASELINE, volume("hostPath", {"path": "/"}),
     ("hostPath volumes", 'volume "v"'), volume("nfs", {"server": "s", "path": "/"})),
    ("hostPorts", BASELINE, host_port(8080),
     ("hostPort", 'container "c" uses hostPort 8080'), host_port(0)),
    ("appArmorProfile", BASELINE, annotation(AA, "unconfined"),
     ("forbidden AppArmor profile", f'{AA}="unconfined"'), annotation(AA, "runtime/default")),
    ("appArmorProfile", BASELINE, setter("appArmorProfile.type", "Unconfined", on="pod"),
     ("forbidden AppArmor profile",
      'pod must not set securityContext.appArmorProfile.type to "Unconfined"'),
     setter("appArmorProfile.type", "RuntimeDefault", on="pod")),
    ("seLinuxOptions", BASELINE, setter("seLinuxOptions", {"type": "spc_t", "user": "u"}),
     ("seLinuxOptions", 'container "c" set forbidden securityContext.seLinuxOptions: '
      'type "spc_t"; user may not be set'),
     setter("seLinuxOptions", {"type": "container_t", "level": "s0:c1"})),
    ("procMount", BASELINE, setter("procMount", "Unmasked"),
     ("procMount", 'container "c" must not set securityContext.procMount to "Unmasked"'),
     setter("procMount", "Default")),
    ("seccompProfile_baseline", BASELINE, setter("seccompProfile.type", "Unconfined"),
     ("seccompProfile",
      'container "c" must not set securityContext.seccompProfile.type to "Unconfined"'),
     setter("seccompProfile.type", "Localhost")),
    ("sysctls", BASELINE, setter("sysctls", [{"name": "kernel.msgmax", "value": "1"}], on="pod"),
     ("forbidden sysctls", "kernel.msgmax"),
     setter("sysctls", [{"name": "net.ipv4.tcp_syncookies", "value": "1"}], on="pod")),
    ("windowsHostProcess", BASELINE, setter("windowsOptions.hostProcess", True),
     ("hostProcess",
      'container "c" must not set securityContext.windowsOptions.hostProcess=true'),
     setter("windowsOptions.hostProcess", False)),
    ("allowPrivilegeEscalation", RESTRICTED, setter("allowPrivilegeEscalation", True),
     ("allowPrivilegeEscalation != false",
      'container "c" must set securityContext.allowPrivilegeEscalation=false'),
     setter("allowPrivilegeEscalation", False)),
    ("capabilities_restricted", RESTRICTED, setter("capabilities", {"add": ["CHOWN"]}),
     ("unrestricted capabilities", 'container "c" must set securityContext.capabilities.'
      'drop=["ALL"]; container "c" must not include "CHOWN" in securityContext.'
      "capabilities.add"),
     setter("capabilities", {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]})),
    ("restrictedVolumes", RESTRICTED, volume("nfs", {"server": "s", "path": "/"}),
     ("restricted volume types", 'volume "v" uses restricted volume type "nfs"'),
     volume("configMap", {"name": "m"})),
    ("runAsNonRoot", RESTRICTED, setter("runAsNonRoot", False),
     ("runAsNonRoot != true", 'container "c" must not set securityContext.runAsNonRoot=false'),
     setter("runAsNonRoot", True)),
    ("runAsUser", RESTRICTED, setter("runAsUser", 0, on="pod"),
     ("runAsUser=0", "pod must not set runAsUser=0"), setter("runAsUser", 1000, on="pod")),
    ("seccompProfile_restricted", RESTRICTED, setter("seccompProfile.type", "Unconfined"),
     ("seccompProfile",
      'container "c" must not set securityContext.seccompProfile.type to "Unconfined"'),
     setter("seccompProfile.type", "Localhost")),
]


def apply(change):
    spec, meta = conforming(), {"name": "p"}
    change(spec, meta)
    return meta, spec


class ControlExamplesTests(SynchronousTestCase):
    def test_conforming(self):
        """The base pod passes every level."""
        for level in (PRIVILEGED, BASELINE, RESTRICTED):
            self.assertEqual(evaluate(LevelVersion(level), {}, conforming()), [])

    def test_each_control_fails(self):
        """Each control's failing example fails that control only, with upstream's words."""
        for control, level, fail, expected, _ in EXAMPLES:
            failed = evaluate(LevelVersion(level), *apply(fail))
            self.assertEqual(failed, [(control, *expected)], control)

    def test_each_control_passes(self):
        """Each control's passing example (an allowed value) passes its level and above."""
        for control, level, _, _, allowed in EXAMPLES:
            self.assertEqual(evaluate(LevelVersion(level), *apply(allowed)), [], control)
            if control not in REPLACED:     # restricted allows less there
                self.assertEqual(evaluate(RESTRICTED_LATEST, *apply(allowed)), [], control)

    def test_every_control_has_an_example(self):
        self.assertEqual({c.id for c in CHECKS}, {e[0] for e in EXAMPLES})

    def test_baseline_failures_under_restricted(self):
        """Restricted includes baseline: a baseline failure fails restricted too."""
        for control, level, fail, expected, _ in EXAMPLES:
            if level != BASELINE:
                continue
            failed = evaluate(RESTRICTED_LATEST, *apply(fail))
            if control in REPLACED:
                self.assertEqual(len(failed), 1, control)
            else:
                self.assertEqual(failed, [(control, *expected)], control)

    def test_privileged_allows_everything(self):
        for _, _, fail, _, _ in EXAMPLES:
            self.assertEqual(evaluate(LevelVersion(PRIVILEGED), *apply(fail)), [])

    def test_replaced(self):
        """Restricted capability, volume and seccomp controls replace their baseline ones."""
        ids = [id for id, _ in controls(RESTRICTED_LATEST)]
        for replaced in REPLACED:
            self.assertNotIn(replaced, ids)
        self.assertEqual(ids, sorted(ids))

    def test_empty_pod_restricted(self):
        """An unset pod fails the restricted controls, listed by ID, in upstream's format."""
        spec = {"containers": [{"name": "c", "image": "x"}]}
        self.assertEqual(describe(evaluate(RESTRICTED_LATEST, {}, spec)), (
            "allowPrivilegeEscalation != false (container \"c\" must set securityContext."
            "allowPrivilegeEscalation=false), unrestricted capabilities (container \"c\" must "
            "set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or "
            "container \"c\" must set securityContext.runAsNonRoot=true), seccompProfile (pod "
            "or container \"c\" must set securityContext.seccompProfile.type to "
            "\"RuntimeDefault\" or \"Localhost\")"))

    def test_plurals(self):
        spec = {"containers": [{"name": "a", "image": "x", "securityContext": {"privileged": True}},
                               {"name": "b", "image": "x", "securityContext": {"privileged": True}}],
                "initContainers": [{"name": "i", "image": "x", "ports": [
                    {"containerPort": 1, "hostPort": 1}, {"containerPort": 2, "hostPort": 2}]}]}
        self.assertEqual(describe(evaluate(BASELINE_LATEST, {}, spec)), (
            'hostPort (container "i" uses hostPorts 1, 2), privileged (containers "a", "b" '
            "must not set securityContext.privileged=true)"))

    def test_windows_exempt(self):
        """From v1.25, Linux-only restricted controls skip Windows pods."""
        spec = {"os": {"name": "windows"}, "securityContext": {"runAsNonRoot": True},
                "containers": [{"name": "c", "image": "x"}]}
        self.assertEqual(evaluate(RESTRICTED_LATEST, {}, spec), [])
        self.assertEqual([id for id, _, _ in evaluate(LevelVersion(RESTRICTED, (1, 24)), {}, spec)],
                         ["allowPrivilegeEscalation", "capabilities_restricted",
                          "seccompProfile_restricted"])


class VersionTests(SynchronousTestCase):
    def ids(self, version, spec):
        return [id for id, _, _ in evaluate(LevelVersion(RESTRICTED, version), {}, spec)]

    def test_pinned(self):
        """Controls added in later releases do not apply to a pinned older version."""
        spec = {"containers": [{"name": "c", "image": "x"}]}
        self.assertEqual(self.ids((1, 18), spec), ["allowPrivilegeEscalation", "runAsNonRoot"])
        self.assertEqual(self.ids((1, 19), spec), ["allowPrivilegeEscalation", "runAsNonRoot",
                                                   "seccompProfile_restricted"])
        self.assertEqual(self.ids((1, 22), spec), self.ids(None, spec))
        self.assertEqual(self.ids((1, 7), spec), ["runAsNonRoot"])

    def test_capabilities_before_1_22(self):
        """Before v1.22 restricted had no drop-ALL rule; baseline's add rule applied."""
        spec = conforming()
        container_sc(spec)["capabilities"] = {"add": ["SYS_ADMIN"]}
        self.assertEqual(self.ids((1, 21), spec), ["capabilities_baseline"])
        self.assertEqual(self.ids((1, 22), spec), ["capabilities_restricted"])

    def test_run_as_user_since_1_23(self):
        spec = conforming()
        spec["securityContext"]["runAsUser"] = 0
        self.assertEqual(self.ids((1, 22), spec), [])
        self.assertEqual(self.ids((1, 23), spec), ["runAsUser"])

    def test_allowed_sets_grow(self):
        """A sysctl and an SELinux type made safe later are refused at older versions."""
        spec = conforming()
        spec["securityContext"]["sysctls"] = [{"name": "net.ipv4.tcp_keepalive_time"}]
        container_sc(spec)["seLinuxOptions"] = {"type": "container_engine_t"}
        self.assertEqual(self.ids((1, 28), spec), ["seLinuxOptions", "sysctls"])
        self.assertEqual(self.ids((1, 30), spec), ["seLinuxOptions"])
        self.assertEqual(self.ids((1, 31), spec), [])


class LabelTests(SynchronousTestCase):
    def test_defaults(self):
        policy = Policy.from_labels({})
        self.assertTrue(policy.all_privileged())
        self.assertEqual(str(policy.enforce), "privileged:latest")

    def test_read(self):
        policy = Policy.from_labels({"pod-security.orch.io/enforce": "baseline",
                                     "pod-security.orch.io/enforce-version": "v1.24",
                                     "pod-security.orch.io/warn": "restricted"})
        self.assertEqual(str(policy.enforce), "baseline:v1.24")
        self.assertEqual(str(policy.warn), "restricted:latest")
        self.assertEqual(str(policy.audit), "privileged:latest")

    def test_invalid_stored_values(self):
        """Invalid stored labels are read as upstream: restricted, latest."""
        policy = Policy.from_labels({"pod-security.orch.io/enforce": "strict",
                                     "pod-security.orch.io/enforce-version": "1.24"})
        self.assertEqual(str(policy.enforce), "restricted:latest")

    def test_versions(self):
        self.assertEqual(parse_version("latest"), None)
        self.assertEqual(parse_version("v1.25"), (1, 25))
        for bad in ("1.25", "v1", "v1.025", "v1.x", "Latest", ""):
            self.assertRaises(ValueError, parse_version, bad)

    def test_label_errors(self):
        errors = label_errors({"pod-security.orch.io/audit": "Baseline",
                               "pod-security.orch.io/warn-version": "v1.2.3",
                               "pod-security.orch.io/enforce": "restricted", "other": "x"})
        self.assertEqual(sorted(e.field for e in errors), [
            "metadata.labels[pod-security.orch.io/audit]",
            "metadata.labels[pod-security.orch.io/warn-version]"])
