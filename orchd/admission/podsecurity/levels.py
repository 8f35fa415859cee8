# -*- test-case-name: tests.admission.test_podsecurity_checks -*-
"""
The policy a namespace asks for, read from its labels.

Each mode (C{enforce}, C{audit}, C{warn}) has a level label
C{pod-security.orch.io/<mode>} (C{privileged}, C{baseline} or
C{restricted}) and a version label C{pod-security.orch.io/<mode>-version}
(C{latest} or C{v<MAJOR>.<MINOR>}: the standard as it stood in that
release). A missing label means C{privileged} and C{latest}, as upstream's
default admission configuration. Invalid values are refused when the
namespace is written (L{label_errors}); a namespace stored before that
rule is read as upstream does: a bad level as C{restricted}, a bad
version as C{latest}.
"""

import re

from orchd.api.errors import FieldError

PREFIX = "pod-security.orch.io/"
MODES = ("enforce", "audit", "warn")
PRIVILEGED, BASELINE, RESTRICTED = "privileged", "baseline", "restricted"
LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)
LATEST = "latest"
#: The audit annotations of an evaluated pod write, named as upstream's
#: ([COMPAT] audit log readers know these names).
AUDIT_VIOLATIONS = "pod-security.kubernetes.io/audit-violations"
ENFORCE_POLICY = "pod-security.kubernetes.io/enforce-policy"

_VERSION = re.compile(r"^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\Z")


def level_label(mode):
    return PREFIX + mode


def version_label(mode):
    return f"{PREFIX}{mode}-version"


class LevelVersion:
    """
    One level of the standard at one version.

    @ivar version: C{(major, minor)}, or None for the latest.
    """

    __slots__ = ("level", "version")

    def __init__(self, level=PRIVILEGED, version=None):
        self.level = level
        self.version = version

    def __eq__(self, other):
        return (isinstance(other, LevelVersion)
                and (self.level, self.version) == (other.level, other.version))

    def __hash__(self):
        return hash((self.level, self.version))

    def __str__(self):
        if self.version is None:
            return f"{self.level}:{LATEST}"
        return f"{self.level}:v{self.version[0]}.{self.version[1]}"

    def __repr__(self):
        return f"<LevelVersion {self}>"


def parse_level(text):
    """The level named C{text}; ValueError if it names none."""
    if text not in LEVELS:
        raise ValueError(f"must be one of {', '.join(LEVELS)}")
    return text


def parse_version(text):
    """C{(major, minor)} for C{v<MAJOR>.<MINOR>}, None for C{latest}; ValueError otherwise."""
    if text == LATEST:
        return None
    match = _VERSION.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f'must be "{LATEST}" or of the form "v<MAJOR>.<MINOR>"')
    return int(match.group(1)), int(match.group(2))


def label_errors(labels):
    """L{FieldError}s for each invalid pod-security label of a namespace."""
    errors = []
    labels = labels if isinstance(labels, dict) else {}
    for mode in MODES:
        for key, parse in ((level_label(mode), parse_level),
                           (version_label(mode), parse_version)):
            if key not in labels:
                continue
            try:
                parse(labels[key])
            except ValueError as e:
                errors.append(FieldError.invalid(f"metadata.labels[{key}]", labels[key], str(e)))
    return errors


def _read(labels, mode):
    level, version = PRIVILEGED, None
    if level_label(mode) in labels:
        try:
            level = parse_level(labels[level_label(mode)])
        except ValueError:
            level = RESTRICTED
    if version_label(mode) in labels:
        try:
            version = parse_version(labels[version_label(mode)])
        except ValueError:
            version = None
    return LevelVersion(level, version)


class Policy:
    """The three modes of one namespace, each a L{LevelVersion}."""

    __slots__ = MODES

    def __init__(self, enforce=None, audit=None, warn=None):
        self.enforce = enforce or LevelVersion()
        self.audit = audit or LevelVersion()
        self.warn = warn or LevelVersion()

    @classmethod
    def from_labels(cls, labels):
        labels = labels if isinstance(labels, dict) else {}
        return cls(*(_read(labels, mode) for mode in MODES))

    def all_privileged(self):
        return all(getattr(self, mode).level == PRIVILEGED for mode in MODES)
