# -*- test-case-name: tests.registry.test_kinds -*-
"""
CertificateSigningRequests: who asked is recorded by the server, the request
never changes, and approval is its own subresource.

The requesting user's name, uid, groups and extra are written over whatever
the body says, so a signer can trust them. Approved and Denied change only
through C{approval}; the issued certificate (which, once there, never
changes) and other conditions such as a signer's Failed only through
C{status}.
"""

import base64
import binascii

from zope.interface import implementer

from orchd.api.errors import FieldError
from orchd.registry.strategy import DefaultStrategy, IStrategy, immutable_field

_CONDITION_TYPES = ("Approved", "Denied", "Failed")
_CONDITION_STATUSES = ("True", "False", "Unknown")
_APPROVAL_TYPES = ("Approved", "Denied")


@implementer(IStrategy)
class CertificateSigningRequestStrategy(DefaultStrategy):
    def prepare_for_create(self, ctx, obj):
        spec = obj.setdefault("spec", {}) if isinstance(obj.get("spec"), dict) else {}
        obj["spec"] = spec
        user = ctx.user
        spec["username"] = user.name
        spec["groups"] = list(user.groups)
        for field, value in (("uid", user.uid), ("extra", user.extra)):
            if value:
                spec[field] = value
            else:
                spec.pop(field, None)

    def prepare_for_update(self, ctx, obj, old):
        obj["spec"] = old.get("spec", {})

    def subresource_update(self, subresource, obj, old):
        if subresource == "approval":
            conditions = (obj.get("status") or {}).get("conditions")
            status = old.setdefault("status", {})
            if conditions:
                status["conditions"] = conditions
            else:
                status.pop("conditions", None)
            return old
        if subresource == "status":
            # A signer writes the certificate and other conditions (Failed);
            # Approved and Denied stay as the approval subresource left them.
            written = obj.get("status") or {}
            status = old.setdefault("status", {})
            if written.get("certificate"):
                status["certificate"] = written["certificate"]
            conditions = [c for c in status.get("conditions") or []
                          if c.get("type") in _APPROVAL_TYPES]
            conditions += [c for c in written.get("conditions") or []
                           if isinstance(c, dict) and c.get("type") not in _APPROVAL_TYPES]
            if conditions:
                status["conditions"] = conditions
            else:
                status.pop("conditions", None)
            return old
        return super().subresource_update(subresource, obj, old)

    def validate(self, ctx, obj):
        errors = []
        spec = obj.get("spec") or {}
        request = spec.get("request")
        if not request:
            errors.append(FieldError.required("spec.request"))
        else:
            try:
                pem = base64.b64decode(request, validate=True)
            except (binascii.Error, ValueError, TypeError):
                pem = b""
            if b"-----BEGIN CERTIFICATE REQUEST-----" not in pem:
                errors.append(FieldError.invalid(
                    "spec.request", "<request>", "not a PEM certificate request"))
        if not spec.get("signerName"):
            errors.append(FieldError.required("spec.signerName"))
        if not spec.get("usages"):
            errors.append(FieldError.required("spec.usages"))
        errors += _condition_errors((obj.get("status") or {}).get("conditions") or [])
        return errors

    def validate_update(self, ctx, obj, old):
        errors = self.validate(ctx, obj)
        changed = immutable_field(obj.get("spec"), old.get("spec"), "spec")
        if changed:
            errors.append(changed)
        issued = (old.get("status") or {}).get("certificate")
        if issued and (obj.get("status") or {}).get("certificate") != issued:
            errors.append(FieldError.forbidden(
                "status.certificate", "updates may not modify existing certificate content"))
        return errors


def _condition_errors(conditions):
    errors, seen = [], set()
    for index, condition in enumerate(conditions):
        path = f"status.conditions[{index}]"
        kind = condition.get("type")
        if kind not in _CONDITION_TYPES:
            errors.append(FieldError.not_supported(f"{path}.type", kind, _CONDITION_TYPES))
        elif kind in seen:
            errors.append(FieldError.duplicate(f"{path}.type", kind))
        seen.add(kind)
        if condition.get("status") not in _CONDITION_STATUSES:
            errors.append(FieldError.not_supported(
                f"{path}.status", condition.get("status"), _CONDITION_STATUSES))
    if "Approved" in seen and "Denied" in seen:
        errors.append(FieldError.invalid("status.conditions", "Approved",
                                         "Approved and Denied conditions are mutually exclusive"))
    return errors
