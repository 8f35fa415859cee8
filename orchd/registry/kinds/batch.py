# -*- test-case-name: tests.registry.test_batch -*-
"""
Jobs and CronJobs (C{batch/v1}): upstream's defaults (kk
C{pkg/apis/batch/v1/defaults.go}), a Job's generated selector, and the
checks users meet, with upstream's messages.

Unless C{manualSelector} is set, a new Job selects its own pods by its
uid: the template gets the labels C{batch.orch.io/controller-uid},
C{batch.orch.io/job-name} (upstream C{batch.kubernetes.io/...}) and the
legacy C{controller-uid} and C{job-name}, and the selector is
C{matchLabels: {batch.orch.io/controller-uid: <uid>}} (kk
C{pkg/registry/batch/job/strategy.go generateSelector}).
"""

from zope.interface import implementer

from orchd.api.cron import parse_schedule
from orchd.api.errors import FieldError
from orchd.registry.kinds.podspec import (
    canonical_pod_resources, default_pod_template, pod_spec_errors, template_selector_errors,
)
from orchd.registry.kinds.workloads import (
    TemplatedStrategy, label_selector_errors, nonnegative_errors, selector_of,
)
from orchd.registry.strategy import IStrategy, immutable_field

CONTROLLER_UID = "batch.orch.io/controller-uid"
JOB_NAME = "batch.orch.io/job-name"
LEGACY_CONTROLLER_UID = "controller-uid"
LEGACY_JOB_NAME = "job-name"
_INT32_MAX = 2 ** 31 - 1
_COMPLETION_MODES = ("NonIndexed", "Indexed")
_REPLACEMENT_POLICIES = ("TerminatingOrFailed", "Failed")
_JOB_RESTART_POLICIES = ("OnFailure", "Never")
_CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")


def generate_selector(job):
    """
    Upstream's C{generateSelector}: labels naming the Job and its uid on the
    template (kept when already set), and a selector on the uid.
    """
    meta, spec = job["metadata"], job["spec"]
    template = spec.get("template")
    if template is None:
        template = spec["template"] = {}
    if not isinstance(template, dict):
        return
    template_meta = template.get("metadata")
    if template_meta is None:
        template_meta = template["metadata"] = {}
    labels = template_meta.get("labels")
    if labels is None:
        labels = template_meta["labels"] = {}
    if not isinstance(labels, dict):
        return
    for key in (LEGACY_JOB_NAME, JOB_NAME):
        labels.setdefault(key, meta.get("name", ""))
    for key in (LEGACY_CONTROLLER_UID, CONTROLLER_UID):
        labels.setdefault(key, meta.get("uid", ""))
    selector = spec.get("selector")
    if selector is None:
        selector = spec["selector"] = {}
    if isinstance(selector, dict):
        match = selector.get("matchLabels")
        if match is None:
            match = selector["matchLabels"] = {}
        if isinstance(match, dict):
            match.setdefault(CONTROLLER_UID, meta.get("uid", ""))


def _job_template_errors(spec, path):
    """A Job's pod template: restart policy OnFailure or Never, and the pod spec checks."""
    template = spec.get("template")
    if not isinstance(template, dict):
        return [FieldError.required(path)]
    pod_spec = template.get("spec")
    errors = pod_spec_errors(pod_spec, f"{path}.spec", require_image=False)
    if isinstance(pod_spec, dict):
        policy = pod_spec.get("restartPolicy")
        if policy in ("Always", "", None):
            errors.append(FieldError.required(f"{path}.spec.restartPolicy",
                                              'valid values: "OnFailure", "Never"'))
        elif policy not in _JOB_RESTART_POLICIES:
            errors.append(FieldError.not_supported(f"{path}.spec.restartPolicy", policy,
                                                   _JOB_RESTART_POLICIES))
    return errors


def job_spec_errors(spec, path="spec", template=False):
    """
    Upstream's C{validateJobSpec}: counts not negative, completion mode, and
    the template; a Job's own spec (not a CronJob's template) must select.
    """
    errors = []
    for field in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit",
                  "ttlSecondsAfterFinished"):
        errors += nonnegative_errors(spec, field, f"{path}.{field}")
    mode = spec.get("completionMode")
    if mode is not None and mode not in _COMPLETION_MODES:
        errors.append(FieldError.not_supported(f"{path}.completionMode", mode,
                                               _COMPLETION_MODES))
    if mode == "Indexed" and spec.get("completions") is None:
        errors.append(FieldError.required(f"{path}.completions",
                                          "when completion mode is Indexed"))
    policy = spec.get("podReplacementPolicy")
    if policy is not None and policy not in _REPLACEMENT_POLICIES:
        errors.append(FieldError.not_supported(f"{path}.podReplacementPolicy", policy,
                                               _REPLACEMENT_POLICIES))
    if not template:
        selector = spec.get("selector")
        if selector is None:
            errors.append(FieldError.required(f"{path}.selector"))
        else:
            selector_errors = label_selector_errors(selector, f"{path}.selector")
            errors += selector_errors
            parsed = None if selector_errors else selector_of(selector)
            if parsed is not None and isinstance(spec.get("template"), dict):
                errors += template_selector_errors(parsed, spec["template"], f"{path}.template")
    return errors + _job_template_errors(spec, f"{path}.template")


def generated_selector_errors(job, prefixed=True):
    """
    Upstream's C{validateGeneratedSelector}: the template of a Job whose
    selector was generated carries the generated labels, and the selector
    picks exactly them.

    @param prefixed: check the C{batch.orch.io/} labels too (not on an
        update of a Job made before they existed).
    """
    spec = job.get("spec") or {}
    selector = spec.get("selector")
    if spec.get("manualSelector") is True or selector is None:
        return []
    meta = job.get("metadata") or {}
    template = spec.get("template") if isinstance(spec.get("template"), dict) else {}
    labels = (template.get("metadata") or {}).get("labels")
    labels = labels if isinstance(labels, dict) else {}
    uid, name = meta.get("uid", ""), meta.get("name", "")
    expected = {LEGACY_CONTROLLER_UID: uid, LEGACY_JOB_NAME: name}
    if prefixed:
        expected.update({CONTROLLER_UID: uid, JOB_NAME: name})
    errors = []
    for key, wanted in expected.items():
        path = f"spec.template.metadata.labels[{key}]"
        if key not in labels:
            errors.append(FieldError.required(path, wanted))
        elif labels[key] != wanted:
            errors.append(FieldError.invalid(path, labels, f"must be '{wanted}'"))
    parsed = selector_of(selector) if isinstance(selector, dict) else None
    if parsed is not None and not parsed.matches(expected):
        errors.append(FieldError.invalid("spec.selector", selector,
                                         "`selector` not auto-generated"))
    return errors


def _labels_from_template(job):
    """A Job without labels takes its template's (upstream's C{SetDefaults_Job})."""
    spec = job.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    labels = (template.get("metadata") or {}).get("labels") if isinstance(template, dict) \
        else None
    meta = job["metadata"]
    if isinstance(labels, dict) and not meta.get("labels"):
        meta["labels"] = dict(labels)


@implementer(IStrategy)
class JobStrategy(TemplatedStrategy):
    """
    Jobs: defaults, the generated selector on create, and the checks. An
    update may not change the selector, the completion mode, the
    completions (but for an Indexed Job scaled elastically), nor the
    template of a Job that is running or has run.
    """

    kind = "Job"
    scalable = False

    def prepare_for_create(self, ctx, obj):
        super().prepare_for_create(ctx, obj)
        spec = obj.get("spec")
        if isinstance(spec, dict) and spec.get("manualSelector") is not True:
            generate_selector(obj)

    def set_defaults(self, obj, spec):
        super().set_defaults(obj, spec)
        if spec.get("completions") is None and spec.get("parallelism") is None:
            spec["completions"] = 1
            spec["parallelism"] = 1
        if spec.get("parallelism") is None:
            spec["parallelism"] = 1
        if spec.get("backoffLimit") is None:
            spec["backoffLimit"] = _INT32_MAX if spec.get("backoffLimitPerIndex") is not None \
                else 6
        _labels_from_template(obj)
        if spec.get("completionMode") is None:
            spec["completionMode"] = "NonIndexed"
        if spec.get("suspend") is None:
            spec["suspend"] = False
        if spec.get("podReplacementPolicy") is None:
            spec["podReplacementPolicy"] = "Failed" if spec.get("podFailurePolicy") is not None \
                else "TerminatingOrFailed"
        if spec.get("manualSelector") is None:
            spec["manualSelector"] = False

    def subresource_update(self, subresource, obj, old):
        # Upstream defaults every object it decodes, status writes too: this
        # is how a Job made without labels gets its template's (generated) ones.
        old = super().subresource_update(subresource, obj, old)
        _labels_from_template(old)
        return old

    def validate(self, ctx, obj):
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [FieldError.type_invalid("spec", spec, "must be of type object")]
        return generated_selector_errors(obj) + job_spec_errors(spec)

    def validate_spec_update(self, ctx, obj, old):
        spec, old_spec = obj.get("spec"), old.get("spec") or {}
        if not isinstance(spec, dict) or not isinstance(old_spec, dict):
            return self.validate(ctx, obj)
        old_labels = ((old_spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        prefixed = CONTROLLER_UID in old_labels and JOB_NAME in old_labels
        errors = generated_selector_errors(obj, prefixed) + job_spec_errors(spec)
        for field in ("selector", "completionMode", "podFailurePolicy", "backoffLimitPerIndex"):
            changed = immutable_field(spec.get(field), old_spec.get(field), f"spec.{field}")
            if changed:
                errors.append(changed)
        elastic = (spec.get("completionMode") == "Indexed"
                   and spec.get("completions") == spec.get("parallelism")
                   and old_spec.get("completions") == old_spec.get("parallelism"))
        if not elastic:
            changed = immutable_field(spec.get("completions"), old_spec.get("completions"),
                                      "spec.completions")
            if changed:
                errors.append(changed)
        never_started = old_spec.get("suspend") is True \
            and not (old.get("status") or {}).get("startTime")
        if not never_started:
            changed = immutable_field(spec.get("template"), old_spec.get("template"),
                                      "spec.template")
            if changed:
                errors.append(changed)
        return errors


@implementer(IStrategy)
class CronJobStrategy(TemplatedStrategy):
    """CronJobs: defaults, the schedule in cron syntax, and the Job template's checks."""

    kind = "CronJob"
    scalable = False

    def set_defaults(self, obj, spec):
        if not spec.get("concurrencyPolicy"):
            spec["concurrencyPolicy"] = "Allow"
        if spec.get("suspend") is None:
            spec["suspend"] = False
        if spec.get("successfulJobsHistoryLimit") is None:
            spec["successfulJobsHistoryLimit"] = 3
        if spec.get("failedJobsHistoryLimit") is None:
            spec["failedJobsHistoryLimit"] = 1
        job_template = spec.get("jobTemplate")
        job_spec = job_template.get("spec") if isinstance(job_template, dict) else None
        if isinstance(job_spec, dict):
            template = job_spec.get("template")
            default_pod_template(template)
            if isinstance(template, dict):
                canonical_pod_resources(template.get("spec"), self.kind)

    def spec_errors(self, spec):
        errors = []
        schedule = spec.get("schedule")
        if not schedule:
            errors.append(FieldError.required("spec.schedule"))
        elif not isinstance(schedule, str):
            errors.append(FieldError.type_invalid("spec.schedule", schedule,
                                                  "must be of type string"))
        else:
            try:
                parse_schedule(schedule)
            except ValueError as e:
                errors.append(FieldError.invalid("spec.schedule", schedule, str(e)))
            if "TZ" in schedule:
                errors.append(FieldError.invalid(
                    "spec.schedule", schedule,
                    "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
        policy = spec.get("concurrencyPolicy")
        if policy not in _CONCURRENCY_POLICIES:
            errors.append(FieldError.not_supported("spec.concurrencyPolicy", policy,
                                                   _CONCURRENCY_POLICIES))
        for field in ("startingDeadlineSeconds", "successfulJobsHistoryLimit",
                      "failedJobsHistoryLimit"):
            errors += nonnegative_errors(spec, field, f"spec.{field}")
        job_template = spec.get("jobTemplate")
        job_spec = job_template.get("spec") if isinstance(job_template, dict) else None
        if not isinstance(job_spec, dict):
            return errors + [FieldError.required("spec.jobTemplate.spec.template")]
        path = "spec.jobTemplate.spec"
        if job_spec.get("selector") is not None:
            errors.append(FieldError.invalid(f"{path}.selector", job_spec["selector"],
                                             "`selector` will be auto-generated"))
        if job_spec.get("manualSelector") is True:
            errors.append(FieldError.not_supported(f"{path}.manualSelector", True,
                                                   ["nil", "false"]))
        return errors + job_spec_errors(job_spec, path, template=True)

