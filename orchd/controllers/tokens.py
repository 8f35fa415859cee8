# -*- test-case-name: tests.controllers.test_tokens -*-
"""
The token controller: Secrets of type C{orch.io/service-account-token}
hold a long-lived token of the account they name.

A user creates the secret with the account's name in an annotation; this
fills in C{token}, C{ca.crt} and C{namespace} and records the account's
uid (upstream C{pkg/controller/serviceaccount/tokens_controller.go}). A
secret whose account is missing, or has another uid, is deleted: so are
an account's secrets when it is deleted, and an account re-created under
the same name does not inherit the old account's tokens. A deleted secret
is dropped from its account's C{secrets} list.

A secret written together with its account may be seen first; one whose
account is missing is only deleted once it is L{GRACE} seconds old, and
the account's arrival queues its secrets at once.
"""

import base64
import calendar
import copy
import time

from orchd.api.errors import StatusError
from orchd.auth.serviceaccount.issuer import TokenIssuer
from orchd.controllers.base import QueuedController, name_only
from orchd.registry.kinds.configdata import SERVICE_ACCOUNT_TOKEN
from orchd.registry.options import DeleteOptions
from orchd.storage.interfaces import ADDED, DELETED

NAME_ANNOTATION = "orch.io/service-account.name"
UID_ANNOTATION = "orch.io/service-account.uid"
#: Seconds a secret naming a missing account is kept, in case the account follows.
GRACE = 3.0


def _b64(text):
    return base64.b64encode(text.encode("utf-8") if isinstance(text, str) else text).decode()


def _created(obj):
    try:
        return calendar.timegm(time.strptime(obj["metadata"]["creationTimestamp"],
                                             "%Y-%m-%dT%H:%M:%SZ"))
    except (KeyError, TypeError, ValueError):
        return 0


def _token_reference(obj):
    """C{(account name, account uid)} of a token secret, or None for other secrets."""
    if obj.get("type") != SERVICE_ACCOUNT_TOKEN:
        return None
    annotations = obj["metadata"].get("annotations") or {}
    name = annotations.get(NAME_ANNOTATION)
    return (name, annotations.get(UID_ANNOTATION) or "") if name else None


def _keep(obj):
    meta = obj["metadata"]
    return {"type": obj.get("type"),
            "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                         "annotations": {k: v for k, v in (meta.get("annotations") or {}).items()
                                         if k in (NAME_ANNOTATION, UID_ANNOTATION)}}}


class TokensController(QueuedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    @param issuer: a L{orchd.auth.serviceaccount.issuer.TokenIssuer}.
    @param ca_pem: the CA clients trust for the API server (PEM), put in C{ca.crt}.
    """

    name = "serviceaccount-token"

    def __init__(self, catalog, clock, issuer, ca_pem):
        super().__init__(catalog, clock)
        self._issuer = issuer
        self._ca = _b64(ca_pem) if ca_pem else ""
        #: (namespace, account name) -> names of the token secrets naming it.
        self._by_account = {}
        self._secrets = catalog.resource("", "secrets")
        self._accounts = catalog.resource("", "serviceaccounts")
        self.follow("", "secrets", self._secret_changed, _keep)
        self.follow("", "serviceaccounts", self._account_changed, name_only)

    @classmethod
    def from_environment(cls, env):
        """Signing with the service-account key; C{ca.crt} is what clients trust."""
        issuer_url = env.config.service_account_issuer if env.config is not None else ""
        issuer = TokenIssuer(env.pki.sa_private_key_pem, env.pki.sa_algorithm, issuer_url,
                             env.clock)
        return cls(env.catalog, env.clock, issuer, env.pki.server_ca_pem)

    def _secret_changed(self, type, obj, old):
        meta = obj["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        before = _token_reference(old) if old else None
        if before:
            self._by_account.get((namespace, before[0]), set()).discard(name)
        ref = _token_reference(obj)
        if type == DELETED:
            if ref:
                self._queue.add(("removed", namespace, name) + ref)
            return
        if ref:
            self._by_account.setdefault((namespace, ref[0]), set()).add(name)
            self._queue.add(("secret", namespace, name))

    def _account_changed(self, type, obj, old):
        if type not in (ADDED, DELETED):
            return
        meta = obj["metadata"]
        for name in sorted(self._by_account.get((meta["namespace"], meta["name"]), ())):
            self._queue.add(("secret", meta["namespace"], name))

    async def _sync(self, key):
        if key[0] == "removed":
            await self._remove_reference(*key[1:])
        else:
            await self._sync_secret(key, *key[1:])

    async def _sync_secret(self, key, namespace, name):
        secret = await self.get_or_none(self._secrets, namespace, name)
        if secret is None or secret["metadata"].get("deletionTimestamp"):
            return
        ref = _token_reference(secret)
        if ref is None:
            return
        account_name, uid = ref
        account = await self.get_or_none(self._accounts, namespace, account_name)
        if account is None:
            age = self._clock.seconds() - _created(secret)
            if age < GRACE:
                self._queue.add_after(key, GRACE - age)
                return
        if account is None or (uid and uid != account["metadata"]["uid"]):
            await self._delete(secret)
            return
        await self._fill(secret, account)

    async def _delete(self, secret):
        meta = secret["metadata"]
        try:
            await self._secrets.delete(self._catalog.system_context(meta["namespace"]),
                                       meta["name"], DeleteOptions(uid=meta["uid"]))
        except StatusError as e:
            if e.code in (404, 409):
                return       # gone already, or another secret of that name now
            raise
        self.log.info("Deleted token secret {namespace}/{name}: its service account "
                      "is gone", namespace=meta["namespace"], name=meta["name"])

    async def _fill(self, secret, account):
        meta, account_meta = secret["metadata"], account["metadata"]
        data = secret.get("data") or {}
        needs_ca = bool(self._ca) and data.get("ca.crt") != self._ca
        needs_namespace = not data.get("namespace")
        needs_token = not data.get("token")
        annotations = meta.get("annotations") or {}
        if not (needs_ca or needs_namespace or needs_token) and \
                annotations.get(UID_ANNOTATION) == account_meta["uid"]:
            return
        updated = copy.deepcopy(secret)
        data = updated.setdefault("data", {})
        if needs_ca:
            data["ca.crt"] = self._ca
        if needs_namespace:
            data["namespace"] = _b64(meta["namespace"])
        if needs_token:
            data["token"] = _b64(self._issuer.legacy(meta["namespace"], account_meta["name"],
                                                     account_meta["uid"], meta["name"]))
        updated["metadata"].setdefault("annotations", {}).update({
            NAME_ANNOTATION: account_meta["name"], UID_ANNOTATION: account_meta["uid"]})
        try:
            await self._secrets.update(self._catalog.system_context(meta["namespace"]),
                                       meta["name"], updated)
        except StatusError as e:
            if e.code == 404:
                return
            raise      # a conflict: the queue tries again with the newer secret
        if needs_token:
            self.log.info("Filled token secret {namespace}/{name}",
                          namespace=meta["namespace"], name=meta["name"])

    async def _remove_reference(self, namespace, secret_name, account_name, uid):
        account = await self.get_or_none(self._accounts, namespace, account_name)
        if account is None or (uid and uid != account["metadata"]["uid"]):
            return
        secrets = account.get("secrets") or []
        kept = [ref for ref in secrets
                if not (isinstance(ref, dict) and ref.get("name") == secret_name)]
        if kept == secrets:
            return
        account = copy.deepcopy(account)
        account["secrets"] = kept
        try:
            await self._accounts.update(self._catalog.system_context(namespace), account_name,
                                        account)
        except StatusError as e:
            if e.code == 404:
                return
            raise
        self.log.info("Dropped deleted secret {secret} from service account "
                      "{namespace}/{name}", secret=secret_name, namespace=namespace,
                      name=account_name)
