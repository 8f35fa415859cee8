# -*- test-case-name: tests.admission.webhook.test_review -*-
"""
The C{AdmissionReview} a webhook is sent, and what its answer means
(upstream's C{webhook/request} and C{webhook/errors}).

The review's version is the first of the webhook's
C{admissionReviewVersions} this server speaks (v1 preferred); its group is
C{admission.orch.io}, or C{admission.k8s.io} when the server runs with
upstream group names. Answers are accepted in either spelling of the
group, but must be the version that was sent and carry the request's uid.
"""

import base64
import binascii

import orjson

from orchd.api.bounded import parse_json
from orchd.api.errors import StatusError
from orchd.api.groups import upstream_group

GROUP = "admission.orch.io"
UPSTREAM_GROUP = "admission.k8s.io"
VERSIONS = ("v1", "v1beta1")
_OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions",
                 "DELETE": "DeleteOptions"}


class CallError(Exception):
    """A webhook that could not be called or gave no usable answer; the text says why."""


def review_version(webhook):
    """The review version to send: v1 if the webhook takes it, else v1beta1, else None."""
    for version in VERSIONS:
        if version in webhook.review_versions:
            return version
    return None


def user_info(user):
    """The review's C{userInfo}."""
    info = {"username": user.name, "groups": list(user.groups)}
    if user.uid:
        info["uid"] = user.uid
    if user.extra:
        info["extra"] = {key: list(values) for key, values in user.extra.items()}
    return info


def review_request(attributes, uid, matched_version, upstream_group_names=False):
    """
    The review's C{request}: the write as a webhook sees it.

    @param matched_version: the version of the resource the webhook's
        rules matched (another served version under matchPolicy
        Equivalent): C{kind} and C{resource} name it, C{requestKind} and
        C{requestResource} the version the client wrote.
    @param upstream_group_names: name a renamed group (and the objects'
        apiVersion) in its upstream spelling, as C{--upstream-group-names}
        has the server speak to webhooks written for upstream.
    """
    info = attributes.info
    group = (upstream_group_names and upstream_group(info.group)) or info.group
    request_kind = {"group": group, "version": info.version, "kind": info.kind}
    request_resource = {"group": group, "version": info.version, "resource": info.resource}
    if matched_version == info.version:
        kind, resource = request_kind, request_resource
    else:
        kind = dict(request_kind, version=matched_version)
        resource = dict(request_resource, version=matched_version)
    request = {
        "uid": uid, "kind": kind, "resource": resource,
        "requestKind": request_kind, "requestResource": request_resource,
        "name": attributes.name, "operation": attributes.operation,
        "userInfo": user_info(attributes.user),
        "object": _sent(attributes.obj, info, group, matched_version),
        "oldObject": _sent(attributes.old, info, group, matched_version),
        "dryRun": bool(attributes.dry_run),
    }
    if attributes.subresource:
        request["subResource"] = request["requestSubResource"] = attributes.subresource
    if attributes.namespace:
        request["namespace"] = attributes.namespace
    options_kind = _OPTIONS_KIND.get(attributes.operation)
    if options_kind:
        options = {"apiVersion": "meta.k8s.io/v1", "kind": options_kind}
        if attributes.dry_run:
            options["dryRun"] = ["All"]
        request["options"] = options
    return request


def _sent(obj, info, group, version):
    """
    The object as sent: in the matched version's apiVersion, its group as
    the review spells it (objects are the same shape in every version).
    """
    if obj is None or (version == info.version and group == info.group) \
            or not isinstance(obj, dict):
        return obj
    sent = dict(obj)
    sent["apiVersion"] = f"{group}/{version}" if group else version
    return sent


def review_body(request, version, upstream_group_names=False):
    """The encoded C{AdmissionReview}."""
    group = UPSTREAM_GROUP if upstream_group_names else GROUP
    return orjson.dumps({"apiVersion": f"{group}/{version}", "kind": "AdmissionReview",
                         "request": request})


class Answer:
    """
    A webhook's decoded C{response}.

    @ivar patch: the JSON patch operations (a list) or None.
    """

    __slots__ = ("allowed", "status", "patch", "warnings", "audit_annotations")

    def __init__(self, allowed, status, patch, warnings, audit_annotations):
        self.allowed = allowed
        self.status = status
        self.patch = patch
        self.warnings = warnings
        self.audit_annotations = audit_annotations


def parse_answer(content, uid, version, mutating):
    """
    The L{Answer} in a webhook's response body.

    @raise CallError: upstream's reasons for an answer that cannot be used.
    """
    try:
        review = parse_json(content)
    except ValueError as error:
        raise CallError(f"received invalid webhook response: {error}") from None
    if not isinstance(review, dict):
        raise CallError("received invalid webhook response: not an AdmissionReview object")
    api_version, kind = review.get("apiVersion"), review.get("kind")
    if (kind != "AdmissionReview" or api_version not in
            (f"{GROUP}/{version}", f"{UPSTREAM_GROUP}/{version}")):
        raise CallError(f"expected webhook response of {GROUP}/{version}, Kind=AdmissionReview, "
                        f"got {api_version}, Kind={kind}")
    response = review.get("response")
    if not isinstance(response, dict):
        raise CallError("webhook response was absent")
    got = response.get("uid")
    if version == "v1" and got != uid:
        raise CallError(f"expected response.uid={uid!r}, got {got!r}")
    allowed = response.get("allowed")
    if not isinstance(allowed, bool):
        raise CallError("received invalid webhook response: response.allowed is not a boolean")
    status = response.get("status")
    if status is not None and not isinstance(status, dict):
        raise CallError("received invalid webhook response: response.status is not an object")
    patch, patch_type = response.get("patch"), response.get("patchType")
    if patch and not patch_type:
        raise CallError("webhook returned response.patch but not response.patchType")
    if patch_type and not patch:
        raise CallError("webhook returned response.patchType but not response.patch")
    operations = None
    if patch:
        if not mutating:
            raise CallError("validating webhooks may not return patches")
        if patch_type != "JSONPatch":
            raise CallError(f"webhook returned invalid response.patchType of {patch_type!r}")
        try:
            operations = parse_json(base64.b64decode(patch, validate=True))
        except (binascii.Error, ValueError, TypeError) as error:
            raise CallError(f"received invalid webhook response: response.patch: {error}") \
                from None
        if not isinstance(operations, list):
            raise CallError("received invalid webhook response: response.patch is not a "
                            "JSON patch")
    warnings = response.get("warnings") or []
    if not isinstance(warnings, list):
        warnings = []
    annotations = response.get("auditAnnotations") or {}
    if not isinstance(annotations, dict):
        annotations = {}
    return Answer(allowed, status or {}, operations,
                  [w for w in warnings if isinstance(w, str)],
                  {k: v for k, v in annotations.items() if isinstance(v, str)})


def denial(name, status):
    """Upstream's C{ToStatusErr}: the webhook's Status, its message prefixed, at least 400."""
    code = status.get("code")
    if not isinstance(code, int) or isinstance(code, bool) or not 400 <= code <= 599:
        code = 400
    denied_by = f"admission webhook {quoted(name)} denied the request"
    message, reason = status.get("message"), status.get("reason")
    if isinstance(message, str) and message:
        text = f"{denied_by}: {message}"
    elif isinstance(reason, str) and reason:
        text = f"{denied_by}: {reason}"
    else:
        text = f"{denied_by} without explanation"
    details = status.get("details")
    return StatusError(code, reason if isinstance(reason, str) else "", text,
                       details if isinstance(details, dict) else None)


def quoted(name):
    """Go's C{%q} of a webhook name (names are DNS subdomains: no escapes needed)."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def call_failure(name, reason):
    """Upstream's C{ErrCallingWebhook} under failurePolicy Fail: a 500."""
    return StatusError.internal(f"failed calling webhook {quoted(name)}: {reason}")


def dry_run_unsupported(name):
    """Upstream's refusal to send a dry run to a webhook with side effects."""
    return StatusError.bad_request(f"admission webhook {quoted(name)} does not support dry run")
