# -*- test-case-name: tests.admission.webhook.test_plugin,tests.integration.test_admission_webhooks -*-
"""
The admission plugin that calls the webhooks of the validating and
mutating webhook configurations (upstream's C{webhook/mutating} and
C{webhook/validating} dispatchers).

It follows the configurations through informers over the watch caches:
a write reads nothing from the store to learn that no webhook exists,
and with none configured its methods return at once. It runs last in the
chain: its C{admit} calls the mutating webhooks in order (configurations
by name, then webhooks in their order) after the built-in mutating
plugins, with one reinvocation of C{IfNeeded} webhooks when a later one
changed the object; its C{validate} calls the validating webhooks in
parallel once the kind's validation passed, any denial winning.
Deletions only go through C{validate}, so the mutating webhooks that
match a deletion are called there, before the validating ones.

Requests on the admission configuration kinds themselves are never sent
to webhooks (a broken webhook could otherwise lock itself in).
"""

import uuid
from time import perf_counter

import orjson
from twisted.application.service import Service
from twisted.internet.defer import Deferred, DeferredList
from twisted.logger import Logger
from zope.interface import implementer

from orchd.admission.interfaces import DELETE, IAdmissionPlugin
from orchd.admission.webhook.caller import WebhookCaller
from orchd.admission.webhook.conditions import ConditionError, cel_variables
from orchd.admission.webhook.matching import compile_configuration, namespace_labels_source
from orchd.admission.webhook.review import (
    CallError, call_failure, denial, dry_run_unsupported, parse_answer, review_body,
    review_request, review_version,
)
from orchd.api.errors import StatusError
from orchd.api.kinds import ADMISSION, key_prefix_of
from orchd.api.patch import apply_json_patch
from orchd.storage.informer import Informer
from orchd.storage.interfaces import ADDED, DELETED

VALIDATING = "validatingwebhookconfigurations"
MUTATING = "mutatingwebhookconfigurations"
#: The kinds whose writes are never sent to webhooks.
EXEMPT = frozenset((VALIDATING, MUTATING, "validatingadmissionpolicies",
                    "validatingadmissionpolicybindings", "mutatingadmissionpolicies",
                    "mutatingadmissionpolicybindings"))


def _exempt(attributes):
    info = attributes.info
    return info.group == ADMISSION and info.resource in EXEMPT


@implementer(IAdmissionPlugin)
class WebhookAdmission(Service):
    """
    @param reads: where the configurations are listed and watched (the
        watch caches, L{orchd.storage.cachedreads.CachedReads}, or an IStore).
    @param caller: the L{orchd.admission.webhook.caller.IWebhookCaller}.
    @param equivalents: C{(group, resource) -> versions served}, for
        matchPolicy Equivalent.
    @param upstream_group_names: send reviews as C{admission.k8s.io}
        (the server's C{--upstream-group-names}).
    @ivar started: fires once both configuration kinds are listed.
    """

    name = "admission-webhooks"
    log = Logger()

    def __init__(self, reads, caller, equivalents=None, upstream_group_names=False):
        self._reads = reads
        self._caller = caller
        self._equivalents = equivalents or (lambda group, resource: ())
        self._upstream_group_names = upstream_group_names
        self._informers = [
            Informer(reads, key_prefix_of(ADMISSION, VALIDATING),
                     lambda type, obj, old: self._changed(False, type, obj)),
            Informer(reads, key_prefix_of(ADMISSION, MUTATING),
                     lambda type, obj, old: self._changed(True, type, obj)),
        ]
        #: C{{(mutating, configuration name): [Webhook]}}, compiled once per change.
        self._compiled = {}
        self._validating = ()
        self._mutating = ()
        self._synced = True
        self.started = None

    # -- following the configurations --------------------------------------

    def startService(self):
        super().startService()
        # Until both kinds are listed a write waits, rather than pass
        # webhooks it has not heard of yet.
        self._synced = False
        self.started = Deferred.fromCoroutine(self._start())
        self.started.addErrback(
            lambda f: self.log.failure("Admission webhooks failed to start", f))

    async def _start(self):
        try:
            for informer in self._informers:
                await informer.start()
        finally:
            # Also after a failure (logged): writes must not wait for ever.
            self._synced = True

    async def _when_synced(self, method, attributes):
        await self.started
        result = method(attributes)
        if result is not None:
            await result

    def stopService(self):
        for informer in self._informers:
            informer.stop()
        close = getattr(self._caller, "close", None)
        super().stopService()
        return close() if close is not None else None

    def _changed(self, mutating, type, obj):
        """Compile the configuration that changed (only it: CEL compiles are not free)."""
        key = (mutating, (obj.get("metadata") or {}).get("name", ""))
        self._compiled.pop(key, None)
        try:
            if type != DELETED:
                self._compiled[key] = compile_configuration(obj, mutating)
        finally:        # a failure is the informer's to log
            self._assemble()

    def _assemble(self):
        """The webhooks a write reads: validating ones, and mutating ones in calling order."""
        self._validating = tuple(hook for (mutating, _), hooks in self._compiled.items()
                                 if not mutating for hook in hooks)
        self._mutating = tuple(sorted(
            (hook for (mutating, _), hooks in self._compiled.items() if mutating
             for hook in hooks), key=lambda hook: hook.key))

    def configure(self, validating=(), mutating=()):
        """Use these configuration objects (tests without informers)."""
        self._compiled = {}
        for objects, kind in ((validating, False), (mutating, True)):
            for obj in objects:
                self._changed(kind, ADDED, obj)

    # -- IAdmissionPlugin ----------------------------------------------------

    def admit(self, attributes):
        if not self._synced:
            return self._when_synced(self.admit, attributes)
        if not self._mutating or attributes.operation == DELETE or _exempt(attributes):
            return None
        return self._mutate_all(attributes)

    def validate(self, attributes):
        if _exempt(attributes):
            return None
        if not self._synced:
            return self._when_synced(self.validate, attributes)
        if attributes.operation == DELETE and self._mutating:
            return self._validate_all(attributes, self._mutating)
        if not self._validating:
            return None
        return self._validate_all(attributes, ())

    # -- mutating ------------------------------------------------------------

    async def _mutate_all(self, attributes):
        started = perf_counter()
        try:
            await self._mutate_each(attributes)
        finally:
            attributes.webhook_time(perf_counter() - started)

    async def _mutate_each(self, attributes):
        changes = 0
        called_at = {}
        for hook in self._mutating:
            outcome = await self._call(hook, attributes)
            if outcome is None:
                continue
            if outcome:
                changes += 1
            called_at[hook.uid] = changes
        if not called_at:
            return
        for hook in self._mutating:
            if hook.reinvoke and hook.uid in called_at and called_at[hook.uid] < changes:
                if await self._call(hook, attributes):
                    changes += 1

    # -- validating ----------------------------------------------------------

    async def _validate_all(self, attributes, mutating):
        # Left out of the request's SLI latency: the wall time of the calls
        # (the validating ones run side by side), as upstream's tracker.
        started = perf_counter()
        try:
            await self._validate_each(attributes, mutating)
        finally:
            attributes.webhook_time(perf_counter() - started)

    async def _validate_each(self, attributes, mutating):
        for hook in mutating:
            await self._call(hook, attributes)
        if not self._validating:
            return
        calls = [Deferred.fromCoroutine(self._call(hook, attributes))
                 for hook in self._validating]
        results = await DeferredList(calls, consumeErrors=True)
        failures = [result for ok, result in results if not ok]
        if failures:
            # A denial wins over another webhook's failure to answer.
            denials = [f for f in failures
                       if isinstance(f.value, StatusError) and f.value.code != 500]
            (denials or failures)[0].raiseException()

    # -- one webhook ---------------------------------------------------------

    async def _call(self, hook, attributes):
        """
        Call C{hook} if it matches the write.

        @return: None if it was not called, else whether it changed the object.
        @raise StatusError: its denial, or its failure under failurePolicy Fail.
        """
        matched = hook.matching_rule(attributes, self._equivalents)
        if matched is None or not hook.object_matches(attributes):
            return None
        if not await self._namespace_matches(hook, attributes):
            return None
        _, version = matched
        uid = str(uuid.uuid4())
        request = review_request(attributes, uid, version, self._upstream_group_names)
        try:
            if hook.broken:
                raise CallError(hook.broken)
            if hook.conditions:
                variables = cel_variables(request.get("object"), request.get("oldObject"),
                                          _without_objects(request))
                for _, condition in hook.conditions:
                    if not condition.evaluate(variables):
                        return None
        except (CallError, ConditionError) as error:
            return self._failed(hook, f"failed to evaluate match conditions: {error}")
        if attributes.dry_run and hook.side_effects not in ("None", "NoneOnDryRun"):
            raise dry_run_unsupported(hook.name)
        review = review_version(hook)
        try:
            if review is None:
                raise CallError("webhook does not accept v1 or v1beta1 AdmissionReview")
            content = await self._caller.call(
                hook, review_body(request, review, self._upstream_group_names))
            answer = parse_answer(content, uid, review, hook.mutating)
        except CallError as error:
            return self._failed(hook, str(error))
        for warning in answer.warnings:
            attributes.warn(warning)
        for key, value in answer.audit_annotations.items():
            attributes.add_audit_annotation(f"{hook.name}/{key}", value)
        if not answer.allowed:
            raise denial(hook.name, answer.status)
        if answer.patch is None or not isinstance(attributes.obj, dict):
            return False
        return self._patch(hook, attributes.obj, answer.patch)

    async def _namespace_matches(self, hook, attributes):
        if hook.namespace_selector is None:
            return True
        labels, name = namespace_labels_source(attributes)
        if labels is None:
            if name is None:
                return True     # a cluster-scoped object is never exempted
            namespace = await read_object(self._reads, "", "namespaces", "", name)
            if namespace is None:
                raise StatusError.not_found("namespaces", "", name)
            labels = (namespace.get("metadata") or {}).get("labels") or {}
        return hook.namespace_selector.matches(labels)

    def _failed(self, hook, reason):
        """Skip a webhook that failed under failurePolicy Ignore; else refuse the write."""
        if hook.failure_policy_ignore:
            self.log.warn("Failed calling webhook {name}, failing open: {reason}",
                          name=hook.name, reason=reason)
            return None
        raise call_failure(hook.name, reason)

    @staticmethod
    def _patch(hook, obj, operations):
        """Apply a JSON patch in place (the registry holds C{obj} and its metadata)."""
        try:
            patched = apply_json_patch(obj, operations)
        except StatusError as error:
            raise StatusError.internal(error.message) from None
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise StatusError.internal(
                f"the patch of admission webhook \"{hook.name}\" did not leave an object "
                "with metadata")
        if (patched.get("apiVersion"), patched.get("kind")) != (obj.get("apiVersion"),
                                                                 obj.get("kind")):
            raise StatusError.internal(
                f"the patch of admission webhook \"{hook.name}\" changed the object's "
                "apiVersion or kind")
        if patched == obj:
            return False
        meta = obj["metadata"]
        new_meta = patched.pop("metadata")
        meta.clear()
        meta.update(new_meta)
        obj.clear()
        obj.update(patched)
        obj["metadata"] = meta
        return True


async def read_object(reads, group, resource, namespace, name):
    """An object from the watch caches (or the store): C{reads.get} decoded, or None."""
    prefix = key_prefix_of(group, resource)
    kv = await reads.get(f"{prefix}{namespace}/{name}" if namespace else prefix + name)
    return orjson.loads(kv.value) if kv is not None else None


def _without_objects(request):
    return {key: value for key, value in request.items() if key not in ("object", "oldObject")}


def webhook_admission(reads, reactor, kinds, upstream_group_names=False):
    """
    The plugin as the API server runs it: configurations, namespaces,
    Services and Endpoints read from the watch caches, equivalent versions
    from the served kinds, calls over HTTPS from this reactor.

    @param kinds: the L{orchd.registry.definitions.KindRegistry}-like
        object whose C{definitions} are the served kinds.
    """
    def lookup(group, resource, namespace, name):
        return read_object(reads, group, resource, namespace, name)

    async def list_objects(group, resource, namespace):
        listed = await reads.list(f"{key_prefix_of(group, resource)}{namespace}/")
        return [orjson.loads(kv.value) for kv in listed.items]

    def equivalents(group, resource):
        return [definition.info.version for definition in kinds.definitions
                if definition.info.group == group and definition.info.resource == resource]

    return WebhookAdmission(reads, WebhookCaller(reactor, lookup, list_objects=list_objects),
                            equivalents, upstream_group_names)
