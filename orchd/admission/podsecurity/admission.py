# -*- test-case-name: tests.admission.test_podsecurity -*-
"""
PodSecurity admission: each namespace's labels choose which Pod Security
Standard its pods must meet (C{enforce}), are reported against (C{warn})
and are recorded against (C{audit}).

As upstream (C{pod-security-admission/admission}), on a pod create, or an
update that changes more than container images:

  - C{enforce} refuses a failing pod, 403 C{violates PodSecurity
    "restricted:latest": <reason> (<detail>), ...};
  - C{warn} returns a C{Warning} header C{would violate PodSecurity ...}
    (not when the write is refused anyway);
  - C{audit}: the violations go into the request's audit event as the
    annotation C{pod-security.kubernetes.io/audit-violations}, beside
    C{pod-security.kubernetes.io/enforce-policy} (the level enforced); the
    pod itself is not changed.

Workload objects (Deployments, Jobs, pod templates, ...) get only the
C{warn} check of their pod template. Namespaces whose pod-security labels
are invalid are refused (422); a namespace update that makes C{enforce}
stricter warns about its existing pods that would fail it.
"""

import orjson
from zope.interface import implementer

from orchd.admission.interfaces import CREATE, UPDATE, IAdmissionPlugin
from orchd.admission.podsecurity.checks import describe, evaluate
from orchd.admission.podsecurity.levels import (
    AUDIT_VIOLATIONS, ENFORCE_POLICY, PRIVILEGED, Policy, label_errors)
from orchd.admission.podsecurity.podspec import CONTAINER_LISTS, items, mapping
from orchd.api.errors import StatusError
from orchd.api.kinds import key_prefix_of

#: Where a workload kind keeps its pod template.
TEMPLATES = {
    ("", "podtemplates"): ("template",),
    ("", "replicationcontrollers"): ("spec", "template"),
    ("apps", "deployments"): ("spec", "template"),
    ("apps", "replicasets"): ("spec", "template"),
    ("apps", "statefulsets"): ("spec", "template"),
    ("apps", "daemonsets"): ("spec", "template"),
    ("batch", "jobs"): ("spec", "template"),
    ("batch", "cronjobs"): ("spec", "jobTemplate", "spec", "template"),
}
#: At most this many existing pods are named in a namespace update's warnings.
MAX_POD_WARNINGS = 10


def violation(level_version, meta, spec):
    """C{<reason> (<detail>), ...} of the controls the pod fails, or None."""
    failed = evaluate(level_version, meta, spec)
    return describe(failed) if failed else None


def significant_update(pod, old):
    """
    Whether a pod update can change what the standard says of it: anything in
    the spec but container images, or the AppArmor annotations.
    """
    if _without_images(mapping(pod.get("spec"))) != _without_images(mapping(old.get("spec"))):
        return True
    return _apparmor(pod) != _apparmor(old)


def _without_images(spec):
    spec = dict(spec)
    for field in CONTAINER_LISTS:
        if isinstance(spec.get(field), list):
            spec[field] = [{k: v for k, v in c.items() if k != "image"} for c in items(spec[field])]
    return spec


def _apparmor(pod):
    annotations = mapping(mapping(pod.get("metadata")).get("annotations"))
    return {k: v for k, v in annotations.items() if k.startswith("container.apparmor.")}


def _template(obj, path):
    for field in path:
        obj = mapping(obj).get(field)
    return mapping(obj)


@implementer(IAdmissionPlugin)
class PodSecurity:
    """
    @param store: the L{orchd.storage.interfaces.IStore} namespaces and pods are read from.
    """

    resources = frozenset({("", "namespaces"), ("", "pods"), *TEMPLATES})
    mutates = False

    def __init__(self, store):
        self._store = store
        self._namespaces = key_prefix_of("", "namespaces")
        self._pods = key_prefix_of("", "pods")

    async def _policy(self, namespace):
        kv = await self._store.get(f"{self._namespaces}{namespace}") if namespace else None
        labels = mapping(orjson.loads(kv.value).get("metadata")).get("labels") if kv else None
        return Policy.from_labels(labels)

    def _pod_write(self, attributes):
        """The pod of a create or significant update to evaluate, else None."""
        info, pod = attributes.info, attributes.obj
        if ((info.group, info.resource) != ("", "pods") or attributes.subresource
                or attributes.operation not in (CREATE, UPDATE) or not isinstance(pod, dict)):
            return None
        if attributes.operation == UPDATE and not significant_update(pod, attributes.old or {}):
            return None
        return pod

    def admit(self, attributes):
        """Pod security changes nothing; its audit result is an audit annotation."""

    def validate(self, attributes):
        info = attributes.info
        if (info.group, info.resource) == ("", "namespaces"):
            return self._validate_namespace(attributes)
        if (info.group, info.resource) in TEMPLATES:
            return self._validate_template(attributes, TEMPLATES[info.group, info.resource])
        if (pod := self._pod_write(attributes)) is not None:
            return self._validate_pod(attributes, pod)
        return None

    async def _validate_pod(self, attributes, pod):
        policy = await self._policy(attributes.namespace)
        if policy.all_privileged():
            return
        meta, spec = pod.get("metadata"), pod.get("spec")
        attributes.add_audit_annotation(ENFORCE_POLICY, str(policy.enforce))
        audit = violation(policy.audit, meta, spec)
        if audit is not None:
            attributes.add_audit_annotation(
                AUDIT_VIOLATIONS, f'would violate PodSecurity "{policy.audit}": {audit}')
        text = violation(policy.enforce, meta, spec)
        if text is not None:
            raise StatusError.forbidden("pods", "", attributes.name,
                                        f'violates PodSecurity "{policy.enforce}": {text}')
        _warn(attributes, policy, meta, spec)

    async def _validate_template(self, attributes, path):
        if attributes.subresource or attributes.operation not in (CREATE, UPDATE) \
                or not isinstance(attributes.obj, dict):
            return
        template = _template(attributes.obj, path)
        if attributes.operation == UPDATE and template == _template(attributes.old, path):
            return
        policy = await self._policy(attributes.namespace)
        if policy.warn.level != PRIVILEGED and template:
            _warn(attributes, policy, template.get("metadata"), template.get("spec"))

    async def _validate_namespace(self, attributes):
        namespace = attributes.obj
        if attributes.operation not in (CREATE, UPDATE) or not isinstance(namespace, dict):
            return
        if attributes.subresource:
            return
        labels = mapping(mapping(namespace.get("metadata")).get("labels"))
        stored = mapping(mapping(mapping(attributes.old).get("metadata")).get("labels"))
        # A value stored before this rule does not block other changes.
        errors = label_errors({k: v for k, v in labels.items()
                               if k not in stored or stored[k] != v})
        if errors:
            raise StatusError.invalid("Namespace", "", attributes.name, errors)
        if attributes.operation == UPDATE:
            old, new = Policy.from_labels(stored), Policy.from_labels(labels)
            if new.enforce != old.enforce and new.enforce.level != PRIVILEGED:
                await self._warn_existing(attributes, new.enforce)

    async def _warn_existing(self, attributes, enforce):
        """Warn of the namespace's pods that its new enforce level would refuse."""
        listed = await self._store.list(f"{self._pods}{attributes.name}/")
        failing = []
        for kv in listed.items:
            pod = orjson.loads(kv.value)
            failed = evaluate(enforce, pod.get("metadata"), pod.get("spec"))
            if failed:
                name = mapping(pod.get("metadata")).get("name", "")
                failing.append(f"{name}: {', '.join(reason for _, reason, _ in failed)}")
        if failing:
            attributes.warn(f'existing pods in namespace "{attributes.name}" violate the new '
                            f'PodSecurity enforce level "{enforce}"')
            for text in failing[:MAX_POD_WARNINGS]:
                attributes.warn(text)


def _warn(attributes, policy, meta, spec):
    if policy.warn.level == PRIVILEGED:
        return
    text = violation(policy.warn, meta, spec)
    if text is not None:
        attributes.warn(f'would violate PodSecurity "{policy.warn}": {text}')
