"""
Custom resources on two API servers sharing one etcd: a definition written
through one is served by the other from its watch, and its deletion is
followed by both.
"""

from twisted.trial.unittest import TestCase

from tests.crdfixtures import CRDS, WIDGETS, widget, widget_crd
from tests.etcdsupport import require_etcd, unique_prefix
from tests.integration.support import sleep
from tests.integration.test_etcd_servers import on_etcd


async def eventually(check, seconds=10):
    """Wait until C{check()} (awaitable) is true; return its last answer."""
    for _ in range(int(seconds * 10)):
        answer = await check()
        if answer:
            return answer
        await sleep(0.1)
    return await check()


class TwoServersTests(TestCase):
    timeout = 90

    async def setUp(self):
        require_etcd()
        prefix = unique_prefix("crds")
        self.first = await on_etcd(self, prefix).start()
        self.second = await on_etcd(self, prefix).start()

    async def test_definition_followed_by_other_server(self):
        """A definition created on the first server serves widgets on the second, until deleted."""
        code, body = await self.first.call("POST", CRDS, widget_crd())
        self.assertEqual(code, 201, body)
        code, body = await self.first.call("POST", WIDGETS, widget("one", replicas=1))
        self.assertEqual(code, 201, body)

        async def second_serves():
            return (await self.second.call("GET", f"{WIDGETS}/one"))[0] == 200

        self.assertTrue(await eventually(second_serves))
        code, body = await self.second.call("POST", WIDGETS, widget("two"))
        self.assertEqual((code, body["spec"]["color"]), (201, "blue"))
        code, _ = await self.second.call("DELETE", f"{CRDS}/widgets.example.com")
        self.assertEqual(code, 200)

        async def both_gone():
            codes = [(await server.call("GET", WIDGETS))[0]
                     for server in (self.first, self.second)]
            return codes == [404, 404]

        self.assertTrue(await eventually(both_gone))
        code, _ = await self.first.call("GET", f"{CRDS}/widgets.example.com")
        self.assertEqual(code, 404)
