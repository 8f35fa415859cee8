"""Namespace lifecycle admission: creates need a namespace that exists and is not terminating."""

from twisted.internet.defer import Deferred, succeed
from twisted.trial.unittest import SynchronousTestCase

from orchd.admission.interfaces import CREATE, AdmissionAttributes
from orchd.admission.namespacelifecycle import NamespaceLifecycle
from orchd.api.errors import StatusError
from orchd.auth.user import UserInfo
from orchd.registry.kinds.builtin import KINDS

CONFIG_MAPS = next(info for info in KINDS if info.resource == "configmaps")
LIVE = {"metadata": {"name": "a"}, "status": {"phase": "Active"}}
TERMINATING = {"metadata": {"name": "a"}, "status": {"phase": "Terminating"}}


def create_in(namespace):
    return AdmissionAttributes(CREATE, CONFIG_MAPS, namespace, "x", {"metadata": {"name": "x"}},
                               None, UserInfo("alice"))


class NamespaceLifecycleTests(SynchronousTestCase):
    def lifecycle(self, stored, cached):
        """A plugin over C{stored} (name -> namespace) read at leisure, C{cached} at once."""
        self.asked = []

        async def get_namespace(name):
            self.asked.append(name)
            return await succeed(stored.get(name))

        return NamespaceLifecycle(get_namespace, cached_namespace=cached.get)

    def validate(self, plugin, namespace):
        result = plugin.validate(create_in(namespace))
        return succeed(result) if result is None else Deferred.fromCoroutine(result)

    def test_cached_namespace_answers_at_once(self):
        """A create in a namespace the cache holds is admitted at once, the store not asked."""
        plugin = self.lifecycle({}, {"a": LIVE})
        self.assertIsNone(plugin.validate(create_in("a")))
        self.assertEqual(self.asked, [])

    def test_cached_terminating_namespace_refused(self):
        """A create in a cached namespace that is terminating is refused with 403 at once."""
        plugin = self.lifecycle({}, {"a": TERMINATING})
        with self.assertRaises(StatusError) as raised:
            plugin.validate(create_in("a"))
        self.assertEqual(raised.exception.code, 403)

    def test_namespace_not_cached_yet_is_read(self):
        """A namespace the cache has not seen (another server just made it) is read instead."""
        plugin = self.lifecycle({"a": LIVE, "t": TERMINATING}, {})
        self.successResultOf(self.validate(plugin, "a"))
        self.assertEqual(self.failureResultOf(self.validate(plugin, "t"), StatusError).value.code,
                         403)
        self.assertEqual(self.failureResultOf(self.validate(plugin, "gone"),
                                              StatusError).value.code, 404)
        self.assertEqual(self.asked, ["a", "t", "gone"])
