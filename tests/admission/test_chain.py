"""The admission chain: plugins in their configured order, mutation apart from validation."""

import copy

from twisted.internet.defer import Deferred, succeed
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from orchd.admission.certificates import (
    CertificateApproval, CertificateSigning, CertificateSubjectRestriction,
)
from orchd.admission.chain import AdmissionChain
from orchd.admission.defaultingressclass import DefaultIngressClass
from orchd.admission.defaultstorageclass import DefaultStorageClass
from orchd.admission.defaulttolerationseconds import DefaultTolerationSeconds
from orchd.admission.interfaces import (
    CREATE, DELETE, UPDATE, AdmissionAttributes, IAdmissionPlugin,
)
from orchd.admission.namespacelifecycle import NamespaceLifecycle
from orchd.admission.noderestriction import NodeRestriction
from orchd.admission.podsecurity.admission import PodSecurity
from orchd.admission.rbacescalation import RBACEscalation
from orchd.admission.serviceaccount import ServiceAccountAdmission
from orchd.admission.storageprotection import StorageObjectInUseProtection
from orchd.api.errors import StatusError
from orchd.auth.user import UserInfo
from orchd.registry.kinds.builtin import KINDS


@implementer(IAdmissionPlugin)
class Recording:
    """A plugin that notes each call; C{answer} picks plain, Deferred or coroutine results."""

    def __init__(self, name, seen, answer="plain", refuse=None):
        self.name = name
        self.seen = seen
        self.answer = answer
        self.refuse = refuse

    def _call(self, step, attributes):
        if self.refuse == step:
            raise StatusError.forbidden("configmaps", "", attributes.name, self.name)
        if step == "admit":
            attributes.obj.setdefault("labels", []).append(self.name)
        if self.answer == "deferred":
            return succeed(None).addCallback(lambda _: self.seen.append((step, self.name)))
        if self.answer == "coroutine":
            async def later():
                self.seen.append((step, self.name))
            return later()
        self.seen.append((step, self.name))
        return None

    def admit(self, attributes):
        return self._call("admit", attributes)

    def validate(self, attributes):
        return self._call("validate", attributes)


def info_of(resource):
    return next(info for info in KINDS if info.resource == resource)


def attributes(resource="configmaps"):
    return AdmissionAttributes(CREATE, info_of(resource), "default", "a",
                               {"metadata": {"name": "a"}}, None, user=None)


def built_in_plugins():
    def unused(*args):
        raise AssertionError("read for a write the plugin has nothing to do with")

    return [NamespaceLifecycle(unused), RBACEscalation(None, None),
            ServiceAccountAdmission(None), NodeRestriction(), DefaultTolerationSeconds(),
            DefaultIngressClass(None), DefaultStorageClass(None),
            StorageObjectInUseProtection(), CertificateApproval(None),
            CertificateSigning(None), CertificateSubjectRestriction(), PodSecurity(None)]


class ChainTests(SynchronousTestCase):
    def run_chain(self, chain, step, attrs):
        return self.successResultOf(Deferred.fromCoroutine(getattr(chain, step)(attrs)))

    def test_plugins_provide_the_interface(self):
        """Plugins of the chain are checked against IAdmissionPlugin."""
        verifyObject(IAdmissionPlugin, Recording("a", []))

    def test_order_and_results_of_every_kind(self):
        """Each step runs every plugin in order, awaiting Deferreds and coroutines alike."""
        seen = []
        chain = AdmissionChain([Recording("a", seen), Recording("b", seen, "deferred"),
                                Recording("c", seen, "coroutine")])
        attrs = attributes()
        self.run_chain(chain, "admit", attrs)
        self.assertEqual(attrs.obj["labels"], ["a", "b", "c"])
        self.run_chain(chain, "validate", attrs)
        self.assertEqual(seen, [("admit", "a"), ("admit", "b"), ("admit", "c"),
                                ("validate", "a"), ("validate", "b"), ("validate", "c")])

    def test_refusal_stops_the_chain(self):
        """A plugin's StatusError ends the step: later plugins are not asked."""
        seen = []
        chain = AdmissionChain([Recording("a", seen), Recording("no", seen, refuse="validate"),
                                Recording("c", seen)])
        failure = self.failureResultOf(Deferred.fromCoroutine(chain.validate(attributes())),
                                       StatusError)
        self.assertEqual(failure.value.code, 403)
        self.assertEqual(seen, [("validate", "a")])

    def test_empty_chain(self):
        """A chain without plugins admits and validates anything unchanged."""
        attrs = attributes()
        self.run_chain(AdmissionChain(), "admit", attrs)
        self.run_chain(AdmissionChain(), "validate", attrs)
        self.assertEqual(attrs.obj, {"metadata": {"name": "a"}})


class ScopeTests(SynchronousTestCase):
    def test_only_plugins_concerned(self):
        """A write calls the plugins that act on its resource, in the phase they act in."""
        seen = []
        pods_only, never_mutates, never_validates = (
            Recording("pods", seen), Recording("no-admit", seen), Recording("no-validate", seen))
        pods_only.resources = frozenset({("", "pods")})
        never_mutates.mutates = False
        never_validates.validates = False
        chain = AdmissionChain([pods_only, never_mutates, never_validates])
        for resource in ("configmaps", "pods"):
            for step in ("admit", "validate"):
                self.successResultOf(Deferred.fromCoroutine(
                    getattr(chain, step)(attributes(resource))))
        self.assertEqual(seen, [("admit", "no-validate"), ("validate", "no-admit"),
                                ("admit", "pods"), ("admit", "no-validate"),
                                ("validate", "pods"), ("validate", "no-admit")])
        self.assertEqual(chain.plugins_for("", "configmaps"),
                         ((never_validates,), (never_mutates,)))

    def test_built_in_scopes_skip_no_work(self):
        """What a built-in plugin says it never acts on, it does nothing for: every served
        resource outside its resources, and the phase it leaves out, return None at once and
        leave the object as it was."""
        user = UserInfo("system:node:n1", ("system:nodes",))
        spec = {"containers": [{"name": "c", "image": "i"}], "storageClassName": None,
                "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
        for plugin in built_in_plugins():
            resources = getattr(plugin, "resources", None)
            for info in KINDS:
                for operation in (CREATE, UPDATE, DELETE):
                    obj = {"metadata": {"name": "a"}, "spec": copy.deepcopy(spec)}
                    before = copy.deepcopy(obj)
                    write = AdmissionAttributes(operation, info, "default", "a", obj,
                                                None if operation == CREATE else dict(obj), user)
                    outside = resources is not None and (info.group, info.resource) not in resources
                    if outside or not getattr(plugin, "mutates", True):
                        self.assertIsNone(plugin.admit(write), (plugin, info.resource))
                    if outside or not getattr(plugin, "validates", True):
                        self.assertIsNone(plugin.validate(write), (plugin, info.resource))
                    self.assertEqual(obj, before, (plugin, info.resource))


class NothingToDoTests(SynchronousTestCase):
    def test_built_in_plugins_return_none(self):
        """A built-in plugin with nothing to do for a write returns None, not an awaitable."""
        plugins = built_in_plugins()
        config_maps = info_of("configmaps")
        namespaces = info_of("namespaces")
        user = UserInfo("alice", ("devs",))
        writes = [
            AdmissionAttributes(UPDATE, config_maps, "default", "a",
                                {"metadata": {"name": "a"}}, {"metadata": {"name": "a"}}, user),
            AdmissionAttributes(CREATE, namespaces, "", "a", {"metadata": {"name": "a"}}, None,
                                user),
        ]
        for attributes in writes:
            for plugin in plugins:
                self.assertIsNone(plugin.admit(attributes), plugin)
                if plugin.__class__ is not PodSecurity or attributes.info is config_maps:
                    self.assertIsNone(plugin.validate(attributes), plugin)
