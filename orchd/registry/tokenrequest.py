# -*- test-case-name: tests.registry.test_tokenrequest -*-
"""
TokenRequest: C{POST .../serviceaccounts/<name>/token} answers a bound token.

Follows upstream's C{pkg/registry/core/serviceaccount/storage/token.go}:
the account must exist (404), the lifetime is checked (422), the bound
object must exist (404), be of a kind tokens bind to (400), run as the
account when it is a pod (400) and have the uid given (409). Nothing is
stored. Signing takes a millisecond or two of the reactor; tokens are
requested rarely (once per pod and hour at most), so a thread hand-off
would cost about as much as it saves and makes ordering harder to test.
"""

from zope.interface import implementer

from orchd.api.errors import FieldError, StatusError
from orchd.api.kinds import subresource_kind
from orchd.registry.catalog import IConnector
from orchd.api.meta import rfc3339

DEFAULT_SECONDS = 3600
MIN_SECONDS = 10 * 60
MAX_SECONDS = 1 << 32
#: boundObjectRef kind -> (resource, namespaced, claim key).
_BINDABLE = {"Pod": ("pods", True, "pod"), "Secret": ("secrets", True, "secret"),
             "Node": ("nodes", False, "node")}


def token_request_connector(issuer, audiences):
    """The Catalog's C{connectors} entry: C{{key: factory(catalog)}}."""
    return {("", "serviceaccounts", "token"):
            lambda catalog: TokenRequestConnector(catalog, issuer, audiences)}


@implementer(IConnector)
class TokenRequestConnector:
    """
    @param catalog: where accounts and bound objects are read.
    @param issuer: the L{orchd.auth.serviceaccount.issuer.TokenIssuer}.
    @param audiences: the API audiences, for requests that name none.
    """

    def __init__(self, catalog, issuer, audiences):
        self.catalog = catalog
        self.issuer = issuer
        self.audiences = list(audiences)
        self.clock = catalog.clock
        accounts = catalog.resource("", "serviceaccounts")
        self.info = subresource_kind(accounts.info, "token")

    async def connect(self, ctx, name, obj):
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        errors = []
        if meta.get("name") and meta["name"] != name:
            errors.append(FieldError.invalid("metadata.name", meta["name"],
                                             "must match the service account name if specified"))
        if meta.get("namespace") and meta["namespace"] != ctx.namespace:
            errors.append(FieldError.invalid(
                "metadata.namespace", meta["namespace"],
                "must match the service account namespace if specified"))
        if errors:
            raise self._invalid(name, errors)
        account = await self.catalog.resource("", "serviceaccounts").get(ctx, name)
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            spec = obj["spec"] = {}
        if not spec.get("audiences"):
            spec["audiences"] = list(self.audiences)
        seconds = spec.get("expirationSeconds")
        if seconds is None:
            seconds = spec["expirationSeconds"] = DEFAULT_SECONDS
        meta["name"], meta["namespace"] = name, ctx.namespace
        now = self.clock.seconds()
        meta["creationTimestamp"] = rfc3339(now)
        errors = _validate(spec)
        if errors:
            raise self._invalid("", errors)
        bound = await self._bound(ctx, name, spec.get("boundObjectRef"))
        account_meta = account["metadata"]
        token, expires_at = self.issuer.bound(
            ctx.namespace, name, account_meta["uid"], spec["audiences"], seconds, **bound)
        obj["status"] = {"token": token, "expirationTimestamp": rfc3339(expires_at)}
        return obj

    async def _bound(self, ctx, name, ref):
        """The C{pod}/C{secret}/C{node} arguments of the issuer: C{(name, uid)} each."""
        if not ref:
            return {}
        kind = ref.get("kind") or ""
        group = (ref.get("apiVersion") or "").rpartition("/")[0]
        if group or kind not in _BINDABLE:
            version = (ref.get("apiVersion") or "").rpartition("/")[2]
            raise StatusError.bad_request(
                f"cannot bind token to object of type {group}/{version}, Kind={kind}")
        resource, namespaced, claim = _BINDABLE[kind]
        system = self.catalog.system_context(ctx.namespace if namespaced else "")
        obj = await self.catalog.resource("", resource).get(system, ref.get("name") or "")
        meta = obj["metadata"]
        bound = {claim: (meta["name"], meta["uid"])}
        if kind == "Pod":
            pod_spec = obj.get("spec") or {}
            account = pod_spec.get("serviceAccountName") or pod_spec.get("serviceAccount") or \
                "default"
            if account != name:
                raise StatusError.bad_request(
                    f'cannot bind token for serviceaccount "{name}" to pod running with '
                    f'serviceaccount "{account}"')
            node = await self._node(pod_spec.get("nodeName"))
            if node is not None:
                bound["node"] = node
        if ref.get("uid") and ref["uid"] != meta["uid"]:
            raise StatusError.conflict(
                kind, "", meta["name"],
                f"the UID in the bound object reference ({ref['uid']}) does not match the UID "
                f"in record. The object might have been deleted and then recreated")
        return bound

    async def _node(self, node_name):
        """The node a pod runs on, named in its tokens when it exists (as upstream)."""
        nodes = self.catalog.resource("", "nodes")
        if not node_name or nodes is None:
            return None
        try:
            node = await nodes.get(self.catalog.system_context(), node_name)
        except StatusError:
            return None
        return node["metadata"]["name"], node["metadata"]["uid"]

    def _invalid(self, name, errors):
        return StatusError.invalid(self.info.kind, self.info.group, name, errors)


def _validate(spec):
    errors = []
    seconds = spec.get("expirationSeconds")
    audiences = spec.get("audiences")
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        errors.append(FieldError.invalid("spec.expirationSeconds", str(seconds),
                                         "must be an integer"))
    elif seconds < MIN_SECONDS:
        errors.append(FieldError.invalid("spec.expirationSeconds", seconds,
                                         "may not specify a duration less than 10 minutes"))
    elif seconds > MAX_SECONDS:
        errors.append(FieldError.invalid("spec.expirationSeconds", seconds,
                                         "may not specify a duration larger than 2^32 seconds"))
    if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
        errors.append(FieldError.invalid("spec.audiences", str(audiences),
                                         "must be a list of strings"))
    return errors
