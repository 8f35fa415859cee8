"""
Discovery and OpenAPI with C{--upstream-group-names} (L{orchd.server.discovery}):
every renamed group is also listed in its upstream spelling, after the served
name; without the flag the documents are those of the served kinds alone.
"""

import re

import orjson
from twisted.trial.unittest import SynchronousTestCase

from orchd.api import codecs, discovery, openapi, schemas
from orchd.api.discovery import AGGREGATED_MEDIA_TYPE
from orchd.api.kinds import KindInfo
from orchd.server import discovery as served
from orchd.server.discovery import DiscoveryRoutes
from orchd.server.settings import ServerSettings
from tests.server.test_openapi_v2 import STABLE, FakeCatalog
from tests.support import APIHarness, _result

AGGREGATED = {b"accept": AGGREGATED_MEDIA_TYPE.encode()}
_K8S_GROUP = re.compile(rb"[a-z0-9-]+(?:\.[a-z0-9-]+)*\.k8s\.io")
# Upstream's own names, used everywhere: not renamed groups.
_KEPT = {b"meta.k8s.io", b"apidiscovery.k8s.io"}


def upstream_groups(body):
    """The renamed groups C{body} names in their upstream spelling."""
    return set(_K8S_GROUP.findall(body)) - _KEPT


def raw(api, path, headers=None):
    """The exact bytes of one GET."""
    response = _result(api.treq.get("https://orchd" + path, headers=headers or {}))
    body = _result(api.treq.content(response))
    api.treq.flush()
    return response.code, body


def group_names(document):
    return [group["name"] for group in document["groups"]]


class DefaultTests(SynchronousTestCase):
    """Without the flag, the documents are built from the served kinds only."""

    def setUp(self):
        self.api = APIHarness()
        self.kinds = list(self.api.catalog.served_kinds)

    def test_documents_are_those_of_the_served_kinds(self):
        """Every discovery and OpenAPI document is byte for byte the one of the served kinds."""
        expected = {
            "/apis": discovery.api_group_list(self.kinds),
            "/apis/rbac.authorization.orch.io": discovery.api_group(
                self.kinds, "rbac.authorization.orch.io"),
            "/apis/rbac.authorization.orch.io/v1": discovery.api_resource_list(
                self.kinds, "rbac.authorization.orch.io", "v1"),
            "/openapi/v2": openapi.openapi_v2(self.kinds),
            "/openapi/v3": openapi.openapi_v3_index(self.kinds),
            "/openapi/v3/apis/rbac.authorization.orch.io/v1": openapi.openapi_v3_document(
                self.kinds, "apis/rbac.authorization.orch.io/v1"),
        }
        for path, document in expected.items():
            self.assertEqual(raw(self.api, path), (200, codecs.dumps_json(document)), path)
        self.assertEqual(raw(self.api, "/apis", AGGREGATED),
                         (200, codecs.dumps_json(discovery.aggregated_discovery(self.kinds, False))))

    def test_no_upstream_spelling(self):
        """No document names a renamed group in its upstream spelling, and those paths are 404."""
        paths = ["/apis", "/openapi/v2", "/openapi/v3",
                 "/openapi/v3/apis/rbac.authorization.orch.io/v1"]
        for path in paths:
            code, body = raw(self.api, path)
            self.assertEqual((code, upstream_groups(body)), (200, set()), path)
        code, body = raw(self.api, "/apis", AGGREGATED)
        self.assertEqual(upstream_groups(body), set())
        for path in ("/apis/rbac.authorization.k8s.io", "/apis/apiextensions.k8s.io/v1",
                     "/openapi/v3/apis/rbac.authorization.k8s.io/v1"):
            self.assertEqual(raw(self.api, path)[0], 404, path)

    def test_setting_off(self):
        """The server settings say the flag is off."""
        self.assertIs(ServerSettings().upstream_group_names, False)
        self.assertIs(self.api.resource.settings.upstream_group_names, False)


class UpstreamNamesTests(SynchronousTestCase):
    """With the flag, discovery and OpenAPI also list the upstream spellings."""

    def setUp(self):
        self.api = APIHarness(upstream_group_names=True)

    def get(self, path, headers=None):
        code, body = raw(self.api, path, headers)
        self.assertEqual(code, 200, path)
        return orjson.loads(body)

    def test_upstream_spelling_found(self):
        """The pattern the default tests look for finds the upstream spellings here."""
        for path in ("/apis", "/openapi/v2", "/openapi/v3"):
            code, body = raw(self.api, path)
            self.assertIn(b"rbac.authorization.k8s.io", upstream_groups(body), path)

    def test_setting_on(self):
        """The server settings carry the flag, for what is sent in upstream spelling."""
        self.assertIs(self.api.resource.settings.upstream_group_names, True)

    def test_group_list(self):
        """/apis lists each upstream spelling right after its served name, same versions."""
        groups = self.get("/apis")["groups"]
        names = [group["name"] for group in groups]
        for upstream in ("apiextensions.k8s.io", "admissionregistration.k8s.io",
                         "rbac.authorization.k8s.io", "scheduling.k8s.io", "storage.k8s.io"):
            served_name = upstream.replace(".k8s.io", ".orch.io")
            self.assertLess(names.index(served_name), names.index(upstream))
        self.assertEqual(names[names.index("rbac.authorization.orch.io") + 1],
                         "rbac.authorization.k8s.io")
        by_name = {group["name"]: group for group in groups}
        self.assertEqual(by_name["rbac.authorization.k8s.io"]["preferredVersion"],
                         {"groupVersion": "rbac.authorization.k8s.io/v1", "version": "v1"})
        self.assertNotIn("apps.k8s.io", names)
        self.assertNotIn("meta.k8s.io", names)

    def test_group_and_resource_list(self):
        """/apis/<upstream group>[/<version>] lists the served resources, without short names."""
        group = self.get("/apis/apiextensions.k8s.io")
        self.assertEqual((group["kind"], group["name"]), ("APIGroup", "apiextensions.k8s.io"))
        upstream = self.get("/apis/networking.k8s.io/v1")
        own = self.get("/apis/networking.orch.io/v1")
        self.assertEqual(upstream["groupVersion"], "networking.k8s.io/v1")
        self.assertEqual([r["name"] for r in upstream["resources"]],
                         [r["name"] for r in own["resources"]])
        ingresses = {r["name"]: r for r in own["resources"]}["ingresses"]
        alias = {r["name"]: r for r in upstream["resources"]}["ingresses"]
        self.assertEqual(ingresses["shortNames"], ["ing"])
        self.assertNotIn("shortNames", alias)
        self.assertEqual(alias["storageVersionHash"], ingresses["storageVersionHash"])
        self.assertEqual({k: v for k, v in alias.items() if k != "shortNames"},
                         {k: v for k, v in ingresses.items() if k != "shortNames"})

    def test_aggregated(self):
        """The aggregated document lists both spellings, the served one first."""
        items = self.get("/apis", AGGREGATED)["items"]
        names = [item["metadata"]["name"] for item in items]
        self.assertEqual(names, group_names(self.get("/apis")))
        crds = {item["metadata"]["name"]: item for item in items}["apiextensions.k8s.io"]
        [version] = crds["versions"]
        [resource] = version["resources"]
        self.assertEqual(resource["responseKind"], {"group": "apiextensions.k8s.io",
                                                    "version": "v1",
                                                    "kind": "CustomResourceDefinition"})
        self.assertEqual([s["subresource"] for s in resource["subresources"]], ["status"])
        self.assertEqual(resource["subresources"][0]["responseKind"]["group"],
                         "apiextensions.k8s.io")

    def test_openapi_v2(self):
        """v2 has the upstream paths with upstream GVKs; one definition names both GVKs."""
        document = self.get("/openapi/v2")
        path = document["paths"]["/apis/apiextensions.k8s.io/v1/customresourcedefinitions"]
        self.assertEqual(path["post"]["x-kubernetes-group-version-kind"],
                         {"group": "apiextensions.k8s.io", "version": "v1",
                          "kind": "CustomResourceDefinition"})
        self.assertIn("/apis/apiextensions.orch.io/v1/customresourcedefinitions",
                      document["paths"])
        role = document["definitions"]["io.orch.api.rbac.v1.Role"]
        self.assertEqual(role["x-kubernetes-group-version-kind"], [
            {"group": "rbac.authorization.orch.io", "kind": "Role", "version": "v1"},
            {"group": "rbac.authorization.k8s.io", "kind": "Role", "version": "v1"},
        ])
        operation_ids = [operation["operationId"] for item in document["paths"].values()
                         for operation in item.values() if isinstance(operation, dict)]
        self.assertEqual(len(operation_ids), len(set(operation_ids)))
        delete_options = document["definitions"][schemas.DELETE_OPTIONS]
        self.assertIn({"group": "rbac.authorization.k8s.io", "kind": "DeleteOptions",
                       "version": "v1"}, delete_options["x-kubernetes-group-version-kind"])

    def test_openapi_v3(self):
        """The v3 index names the upstream documents; each describes its kinds by upstream GVK."""
        index = self.get("/openapi/v3")["paths"]
        self.assertIn("apis/rbac.authorization.orch.io/v1", index)
        url = index["apis/rbac.authorization.k8s.io/v1"]["serverRelativeURL"]
        document = self.get(url)
        listing = document["paths"]["/apis/rbac.authorization.k8s.io/v1/clusterroles"]["get"]
        self.assertEqual(listing["x-kubernetes-group-version-kind"]["group"],
                         "rbac.authorization.k8s.io")
        schema = document["components"]["schemas"]["io.orch.api.rbac.v1.ClusterRole"]
        self.assertIn({"group": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                       "version": "v1"}, schema["x-kubernetes-group-version-kind"])
        self.assertEqual(self.get("/openapi/v3/apis/apiextensions.k8s.io")["paths"].keys(),
                         {"/apis/apiextensions.k8s.io/"})

    def test_upstream_requests_still_served(self):
        """A list under the upstream spelling is answered in that spelling."""
        listed = self.get("/apis/rbac.authorization.k8s.io/v1/clusterroles")
        self.assertEqual(listed["apiVersion"], "rbac.authorization.k8s.io/v1")


class CachingTests(SynchronousTestCase):
    """The upstream-spelling documents are built once per kind set, like the others."""

    def setUp(self):
        self.catalog = FakeCatalog(STABLE)
        self.routes = DiscoveryRoutes(self.catalog, upstream_group_names=True)
        self.builds = []
        build = discovery.api_group_list
        self.patch(served.discovery, "api_group_list",
                   lambda kinds: self.builds.append(kinds) or build(kinds))

    def apis(self):
        api = APIHarness()
        api.resource.discovery = self.routes
        code, body = raw(api, "/apis")
        self.assertEqual(code, 200)
        return group_names(orjson.loads(body))

    def test_built_once(self):
        """Two requests build /apis once; a change of the served kinds builds it again."""
        first = self.apis()
        self.assertEqual(self.apis(), first)
        self.assertEqual(len(self.builds), 1)
        self.catalog.served_kinds.append(KindInfo("widgets.orch.io", "v1", "widgets", "Widget",
                                                  True))
        self.routes.kind_registered(None)
        names = self.apis()
        self.assertEqual(len(self.builds), 2)
        self.assertEqual(names[-2:], ["widgets.orch.io", "widgets.k8s.io"])

    def test_same_aliases_across_changes(self):
        """A kind's alias is one object across rebuilds, so cached OpenAPI stays cached."""
        self.apis()
        before = [k for k in self.builds[0] if k.group.endswith(".k8s.io")]
        self.routes.kind_registered(None)
        self.apis()
        after = [k for k in self.builds[1] if k.group.endswith(".k8s.io")]
        self.assertTrue(before)
        self.assertEqual([id(k) for k in before], [id(k) for k in after])
