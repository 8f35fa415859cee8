"""Tests for L{orchd.server.requestinfo}."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.server.requestinfo import parse_request_info


def info(method, path, **query):
    args = {k.encode(): [v.encode()] for k, v in query.items()}
    return parse_request_info(method, path, args)


class RequestInfoTests(SynchronousTestCase):
    def test_namespaced_item(self):
        """A namespaced item path yields group, version, namespace, resource and name."""
        i = info(b"GET", "/apis/apps/v1/namespaces/a/controllerrevisions/r1")
        self.assertTrue(i.is_resource_request)
        self.assertEqual(
            (i.verb, i.api_group, i.api_version, i.namespace, i.resource, i.name, i.subresource),
            ("get", "apps", "v1", "a", "controllerrevisions", "r1", ""))

    def test_collection_verbs(self):
        """GET of a collection is list, or watch with watch=true; DELETE is deletecollection."""
        self.assertEqual(info(b"GET", "/api/v1/namespaces/a/configmaps").verb, "list")
        self.assertEqual(info(b"GET", "/api/v1/configmaps", watch="true").verb, "watch")
        self.assertEqual(info(b"DELETE", "/api/v1/namespaces/a/configmaps").verb,
                         "deletecollection")
        self.assertEqual(info(b"DELETE", "/api/v1/namespaces/a/configmaps/x").verb, "delete")

    def test_watch_flag_follows_upstream(self):
        """watch with no value or any value but 0/false (any case) is a watch, even bytes."""
        path = "/api/v1/namespaces/a/configmaps"
        args = {b"watch": [b""]}
        self.assertEqual(parse_request_info(b"GET", path, args).verb, "watch")
        for value, verb in (("yes", "watch"), ("True", "watch"), ("0", "list"),
                            ("FALSE", "list"), ("False", "list"), ("false", "list")):
            self.assertEqual(info(b"GET", path, watch=value).verb, verb, value)
        self.assertEqual(parse_request_info(b"GET", path, {b"watch": [b"\xff"]}).verb, "watch")

    def test_method_verbs(self):
        """POST, PUT, PATCH and HEAD map to create, update, patch and get."""
        path = "/api/v1/namespaces/a/configmaps/x"
        self.assertEqual(info(b"POST", "/api/v1/namespaces/a/configmaps").verb, "create")
        self.assertEqual(info(b"PUT", path).verb, "update")
        self.assertEqual(info(b"PATCH", path).verb, "patch")
        self.assertEqual(info(b"HEAD", path).verb, "get")

    def test_namespace_itself(self):
        """A namespace's own path names it as resource, name and namespace."""
        i = info(b"GET", "/api/v1/namespaces/a")
        self.assertEqual((i.resource, i.name, i.namespace), ("namespaces", "a", "a"))
        i = info(b"PUT", "/api/v1/namespaces/a/finalize")
        self.assertEqual((i.resource, i.name, i.subresource), ("namespaces", "a", "finalize"))

    def test_subresource(self):
        """The segment after the name is the subresource."""
        i = info(b"PUT", "/api/v1/namespaces/a/pods/p/status")
        self.assertEqual((i.resource, i.name, i.subresource), ("pods", "p", "status"))

    def test_proxy_path(self):
        """For nodes/<n>/proxy/<path> the path is kept in C{parts}, not authorized."""
        i = info(b"GET", "/api/v1/nodes/n1:10250/proxy/stats/summary")
        self.assertEqual((i.verb, i.resource, i.name, i.subresource),
                         ("get", "nodes", "n1:10250", "proxy"))
        self.assertEqual(i.parts[3:], ("stats", "summary"))

    def test_legacy_watch_prefix(self):
        """The /watch/ prefix makes a watch of what follows."""
        i = info(b"GET", "/api/v1/watch/namespaces/a/configmaps")
        self.assertEqual((i.verb, i.resource, i.namespace), ("watch", "configmaps", "a"))

    def test_non_resource(self):
        """Paths outside the API groups, and discovery paths, use the lowercase method."""
        for path in ("/healthz", "/api", "/api/v1", "/apis/apps", "/apis/apps/v1", "/version"):
            i = info(b"GET", path)
            self.assertFalse(i.is_resource_request, path)
            self.assertEqual(i.verb, "get")
        self.assertEqual(info(b"POST", "/healthz").verb, "post")

    def test_field_selector_name(self):
        """A list pinned to one name by metadata.name carries that name."""
        i = info(b"GET", "/api/v1/namespaces/a/configmaps", fieldSelector="metadata.name=x")
        self.assertEqual((i.verb, i.name), ("list", "x"))
        i = info(b"GET", "/api/v1/namespaces/a/configmaps", fieldSelector="metadata.name!=x")
        self.assertEqual(i.name, "")
