# -*- test-case-name: tests.registry.test_reviews -*-
"""
The review kinds: questions answered in the created object's status.

Access reviews ask the server's authorizer whether a user may do
something, rules reviews what a user may do in a namespace, the self
review who the caller is, and token reviews whom a bearer token names.
Nothing is stored; a create answers 201 with the object and its status.
"""

from orchd.api.errors import FieldError, StatusError
from orchd.api.kinds import AUTHENTICATION, AUTHORIZATION
from orchd.auth.attributes import Attributes
from orchd.auth.authz.ask import ask
from orchd.auth.interfaces import Decision
from orchd.auth.user import UserInfo

_RESOURCE_FIELDS = ("namespace", "verb", "group", "version", "resource", "subresource", "name")


class _Review:
    """What the create handler needs of a provider: C{info}, C{clock}, C{create}."""

    def __init__(self, info, authorizer, clock):
        self.info = info
        self.authorizer = authorizer
        self.clock = clock

    async def create(self, ctx, obj):
        errors = []
        if _has_metadata(obj):
            errors.append(FieldError.invalid("metadata", _shown(obj.get("metadata")),
                                             "must be empty"))
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        obj["status"] = await self.answer(ctx, spec, errors)
        return obj

    def invalid(self, errors):
        return StatusError.invalid(self.info.kind, self.info.group, "", errors)


class AccessReview(_Review):
    """SubjectAccessReview, LocalSubjectAccessReview and SelfSubjectAccessReview."""

    async def answer(self, ctx, spec, errors):
        kind = self.info.kind
        resource = spec.get("resourceAttributes")
        non_resource = spec.get("nonResourceAttributes")
        if resource is not None and non_resource is not None:
            errors.append(FieldError.invalid("spec.nonResourceAttributes", _shown(non_resource),
                                             "cannot be specified in combination with "
                                             "resourceAttributes"))
        elif resource is None and non_resource is None:
            errors.append(FieldError.invalid("spec.resourceAttributes", None,
                                             "exactly one of nonResourceAttributes or "
                                             "resourceAttributes must be specified"))
        if kind == "SelfSubjectAccessReview":
            user = ctx.user
        else:
            user = self._subject(spec, errors)
        if errors:
            raise self.invalid(errors)
        if resource is not None:
            attributes = _resource_attributes(user, resource)
            if kind == "LocalSubjectAccessReview":
                if not attributes.namespace:
                    attributes.namespace = resource["namespace"] = ctx.namespace
                elif attributes.namespace != ctx.namespace:
                    raise StatusError.bad_request(
                        f"spec.resourceAttributes.namespace must match namespace: "
                        f"{ctx.namespace}")
        else:
            attributes = Attributes(user, _text(non_resource, "verb"), is_resource_request=False,
                                    path=_text(non_resource, "path"))
        decision, reason, error = await ask(self.authorizer, attributes)
        status = {"allowed": decision is Decision.ALLOW}
        if decision is Decision.DENY:
            status["denied"] = True
        if reason:
            status["reason"] = reason
        if error:
            status["evaluationError"] = error
        return status

    def _subject(self, spec, errors):
        # v1beta1 names the groups field "group".
        groups = spec.get("groups" if self.info.version != "v1beta1" else "group") or []
        name = _text(spec, "user")
        if not name and not groups:
            errors.append(FieldError.invalid("spec.user", name,
                                             "at least one of user or group must be specified"))
        extra = spec.get("extra") if isinstance(spec.get("extra"), dict) else {}
        return UserInfo(name, [g for g in groups if isinstance(g, str)], _text(spec, "uid"),
                        {k: list(v) for k, v in extra.items() if isinstance(v, list)})


class RulesReview(_Review):
    """SelfSubjectRulesReview: what the caller may do in one namespace."""

    async def answer(self, ctx, spec, errors):
        if errors:
            raise self.invalid(errors)
        namespace = _text(spec, "namespace")
        if not namespace:
            raise StatusError.bad_request("no namespace on request")
        resource_rules, non_resource_rules, incomplete = self.authorizer.rules_for(
            ctx.user, namespace)
        return {"resourceRules": resource_rules, "nonResourceRules": non_resource_rules,
                "incomplete": incomplete}


class TokenReview(_Review):
    """TokenReview: who a bearer token names, asked of the request authenticators."""

    def __init__(self, info, authorizer, clock, tokens):
        super().__init__(info, authorizer, clock)
        self.tokens = tokens

    async def answer(self, ctx, spec, errors):
        if errors:
            raise self.invalid(errors)
        token = _text(spec, "token")
        if not token:
            # Upstream answers 400 here, not 422.
            raise StatusError.bad_request("token is required for TokenReview in authentication")
        audiences = spec.get("audiences") if isinstance(spec.get("audiences"), list) else []
        audiences = [a for a in audiences if isinstance(a, str)]
        if self.tokens is None:
            user, accepted, error = None, (), "no token authenticators are configured"
        else:
            user, accepted, error = await self.tokens.review(token, audiences)
        if user is None:
            return {"authenticated": False, "error": error}
        return {"authenticated": True, "user": user.to_dict(), "audiences": list(accepted)}


class SelfReview(_Review):
    """SelfSubjectReview: who the server takes the caller for (C{kubectl auth whoami})."""

    async def answer(self, ctx, spec, errors):
        if errors:
            raise self.invalid(errors)
        return {"userInfo": ctx.user.to_dict()}


_REVIEWS = {
    (AUTHORIZATION, "subjectaccessreviews"): AccessReview,
    (AUTHORIZATION, "localsubjectaccessreviews"): AccessReview,
    (AUTHORIZATION, "selfsubjectaccessreviews"): AccessReview,
    (AUTHORIZATION, "selfsubjectrulesreviews"): RulesReview,
    (AUTHENTICATION, "selfsubjectreviews"): SelfReview,
}


def review_providers(authorizer, clock, tokens=None):
    """
    The Catalog's C{virtual} table: C{(group, resource) -> factory(info)}.

    @param tokens: the L{orchd.auth.authn.bearer.TokenAuthenticators} of
        request authentication, which TokenReviews ask.
    """
    providers = {key: (lambda info, cls=cls: cls(info, authorizer, clock))
                 for key, cls in _REVIEWS.items()}
    providers[(AUTHENTICATION, "tokenreviews")] = (
        lambda info: TokenReview(info, authorizer, clock, tokens))
    return providers


def _resource_attributes(user, resource):
    values = {field: _text(resource, field) for field in _RESOURCE_FIELDS}
    return Attributes(user, values["verb"], namespace=values["namespace"],
                      api_group=values["group"], api_version=values["version"],
                      resource=values["resource"], subresource=values["subresource"],
                      name=values["name"])


def _text(mapping, field):
    value = mapping.get(field) if isinstance(mapping, dict) else None
    return value if isinstance(value, str) else ""


def _has_metadata(obj):
    """Reviews take no metadata; clients send C{creationTimestamp: null}, which is none."""
    meta = obj.get("metadata")
    return isinstance(meta, dict) and any(v not in (None, "", {}, []) for v in meta.values())


def _shown(value):
    return value if isinstance(value, (str, int, bool)) or value is None else str(value)
