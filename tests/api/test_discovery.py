"""Tests for L{orchd.api.discovery}."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api import discovery
from orchd.api.kinds import SUBRESOURCE_VERBS, KindInfo
from orchd.registry.kinds.builtin import KINDS

STABLE = [k for k in KINDS if k.stage == "stable"]


def find(kinds, group, resource, version=None):
    return next(k for k in kinds
                if k.group == group and k.resource == resource and version in (None, k.version))


def all_resource_entries(kinds):
    """Every (group, version, entry) of the legacy resource lists of C{kinds}."""
    entries = []
    gvs = {(k.group, k.version) for k in kinds}
    for group, version in gvs:
        document = discovery.api_resource_list(kinds, group, version)
        entries.extend((group, version, entry) for entry in document["resources"])
    return entries


class VersionTests(SynchronousTestCase):
    def test_git_version_is_semver(self):
        """gitVersion is C{v} plus a semantic version, which kubectl parses."""
        info = discovery.version_info()
        self.assertRegex(info["gitVersion"], r"^v\d+\.\d+\.\d+$")
        self.assertEqual((info["major"], info["minor"], info["gitVersion"]), ("1", "36", "v1.36.0"))
        self.assertEqual(info["gitTreeState"], "clean")
        self.assertRegex(info["platform"], r"^[a-z0-9]+/[a-z0-9_]+$")

    def test_copy(self):
        """Changing a returned version object does not change the next one."""
        discovery.version_info()["major"] = "2"
        self.assertEqual(discovery.version_info()["major"], "1")

    def test_api_versions(self):
        """/api lists v1 and the address clients reach the server at."""
        self.assertEqual(discovery.api_versions("10.0.0.1:6443"), {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.1:6443"}],
        })


class VersionOrderTests(SynchronousTestCase):
    def test_upstream_order(self):
        """Versions sort GA, beta, alpha, then by number, as upstream's kube-aware order."""
        ordered = ["v2", "v1", "v11beta2", "v10beta3", "v3beta1", "v12alpha1", "v11alpha2", "foo1", "foo10"]
        shuffled = sorted(ordered)
        self.assertEqual(sorted(shuffled, key=discovery.version_sort_key), ordered)


class GroupListTests(SynchronousTestCase):
    def test_named_groups_only(self):
        """/apis lists every named group of the enabled kinds and not the core group."""
        names = [g["name"] for g in discovery.api_group_list(STABLE)["groups"]]
        self.assertEqual(sorted(names), sorted({k.group for k in STABLE if k.group}))
        self.assertEqual(len(names), len(set(names)))

    def test_shape(self):
        """Each group has its versions and a preferred version that is one of them."""
        document = discovery.api_group_list(STABLE)
        self.assertEqual((document["kind"], document["apiVersion"]), ("APIGroupList", "v1"))
        apps = next(g for g in document["groups"] if g["name"] == "apps")
        self.assertEqual(apps, {
            "name": "apps",
            "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
            "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"},
        })

    def test_upstream_group_order(self):
        """Groups come in upstream's priority order, which decides name collisions."""
        names = [g["name"] for g in discovery.api_group_list(STABLE)["groups"]]
        self.assertEqual(names[:3], ["apiregistration.orch.io", "apps", "events.orch.io"])
        self.assertLess(names.index("batch"), names.index("rbac.authorization.orch.io"))

    def test_preferred_most_stable(self):
        """The preferred version is the most stable, then the newest; all enabled ones are listed."""
        kinds = [
            KindInfo("example.orch.io", version, "widgets", "Widget", True)
            for version in ("v1alpha1", "v1beta1", "v1", "v2beta1")
        ]
        group = discovery.api_group(kinds, "example.orch.io")
        self.assertEqual(group["kind"], "APIGroup")
        self.assertEqual([v["version"] for v in group["versions"]], ["v1", "v2beta1", "v1beta1", "v1alpha1"])
        self.assertEqual(group["preferredVersion"], {"groupVersion": "example.orch.io/v1", "version": "v1"})

    def test_beta_only(self):
        """A group with only a beta version prefers it."""
        kinds = [k for k in KINDS if k.group == "flowcontrol.apiserver.orch.io"]
        group = discovery.api_group(kinds, "flowcontrol.apiserver.orch.io")
        self.assertEqual(group["preferredVersion"]["version"], "v1beta2")

    def test_unknown_group(self):
        """An unknown or disabled group has no APIGroup document."""
        self.assertIsNone(discovery.api_group(STABLE, "nope.orch.io"))
        self.assertIsNone(discovery.api_group(STABLE, "flowcontrol.apiserver.orch.io"))


class ResourceListTests(SynchronousTestCase):
    def test_every_enabled_kind_once(self):
        """Every enabled kind is listed exactly once, with its scope, kind and sorted verbs."""
        entries = all_resource_entries(STABLE)
        for info in STABLE:
            found = [e for g, v, e in entries
                     if (g, v) == (info.group, info.version) and e["name"] == info.resource]
            self.assertEqual(len(found), 1, info)
            entry = found[0]
            self.assertEqual(entry["namespaced"], info.namespaced)
            self.assertEqual(entry["kind"], info.kind)
            self.assertEqual(entry["singularName"], info.kind.lower())
            self.assertEqual(entry["verbs"], sorted(info.verbs))
        self.assertEqual(len([e for _, _, e in entries if "/" not in e["name"]]), len(STABLE))

    def test_shape(self):
        """The document names its group/version, core as plain C{v1}."""
        core = discovery.api_resource_list(STABLE, "", "v1")
        self.assertEqual((core["kind"], core["apiVersion"], core["groupVersion"]),
                         ("APIResourceList", "v1", "v1"))
        apps = discovery.api_resource_list(STABLE, "apps", "v1")
        self.assertEqual(apps["groupVersion"], "apps/v1")

    def test_sorted_by_name(self):
        """Resources and subresources are sorted by name, as upstream lists them."""
        names = [e["name"] for e in discovery.api_resource_list(STABLE, "", "v1")["resources"]]
        self.assertEqual(names, sorted(names))
        self.assertIn("namespaces/finalize", names)

    def test_optional_fields(self):
        """Short names and categories appear only when the kind has them."""
        resources = {e["name"]: e for e in discovery.api_resource_list(STABLE, "", "v1")["resources"]}
        self.assertEqual(resources["pods"]["shortNames"], ["po"])
        self.assertEqual(resources["pods"]["categories"], ["all"])
        self.assertNotIn("shortNames", resources["secrets"])
        self.assertNotIn("categories", resources["configmaps"])

    def test_subresources(self):
        """Subresources carry the parent's kind and scope, their own verbs and no singular name."""
        entries = all_resource_entries(STABLE)
        for info in STABLE:
            for sub in info.subresources:
                name = f"{info.resource}/{sub}"
                found = [e for g, v, e in entries if (g, v) == (info.group, info.version) and e["name"] == name]
                self.assertEqual(len(found), 1, name)
                expected = {
                    "name": name, "singularName": "", "namespaced": info.namespaced,
                    "kind": info.kind, "verbs": sorted(SUBRESOURCE_VERBS[sub]),
                }
                if (info.resource, sub) == ("serviceaccounts", "token"):
                    # A subresource that takes an object of its own kind names it.
                    expected.update(group="authentication.orch.io", version="v1",
                                    kind="TokenRequest")
                if (info.resource, sub) == ("pods", "binding"):
                    # Its own kind, of the list's own group and version: named without them.
                    expected.update(kind="Binding")
                if sub == "scale":
                    expected.update(group="autoscaling", version="v1", kind="Scale")
                if (info.resource, sub) == ("pods", "eviction"):
                    expected.update(group="policy", version="v1", kind="Eviction")
                self.assertEqual(found[0], expected)

    def test_storage_version_hash(self):
        """Stored kinds carry upstream's hash value; kinds without storage have none."""
        resources = {e["name"]: e for e in discovery.api_resource_list(STABLE, "", "v1")["resources"]}
        self.assertEqual(resources["pods"]["storageVersionHash"], "xPOwRZ+Yhw8=")
        self.assertEqual(resources["configmaps"]["storageVersionHash"], "qFsyl6wFWjQ=")
        self.assertNotIn("storageVersionHash", resources["bindings"])
        self.assertNotIn("storageVersionHash", resources["componentstatuses"])
        reviews = discovery.api_resource_list(STABLE, "authentication.orch.io", "v1")["resources"]
        self.assertTrue(all("storageVersionHash" not in e for e in reviews))

    def test_storage_version_hash_stable(self):
        """The hash is the same whatever else is enabled."""
        pods = find(KINDS, "", "pods")
        self.assertEqual(discovery.storage_version_hash(pods), "xPOwRZ+Yhw8=")
        self.assertRegex(discovery.storage_version_hash(find(KINDS, "apps", "deployments")),
                         r"^[A-Za-z0-9+/]{11}=$")

    def test_review_verbs(self):
        """Kinds answered without storage list only their own verbs."""
        resources = discovery.api_resource_list(STABLE, "authorization.orch.io", "v1")["resources"]
        self.assertTrue(all(e["verbs"] == ["create"] for e in resources))

    def test_disabled_kind_absent(self):
        """A kind left out of the enabled set is not listed, and an emptied version has no document."""
        enabled = [k for k in STABLE if k.resource != "secrets"]
        names = [e["name"] for e in discovery.api_resource_list(enabled, "", "v1")["resources"]]
        self.assertNotIn("secrets", names)
        self.assertIn("configmaps", names)
        no_batch = [k for k in STABLE if k.group != "batch"]
        self.assertIsNone(discovery.api_resource_list(no_batch, "batch", "v1"))
        self.assertNotIn("batch", [g["name"] for g in discovery.api_group_list(no_batch)["groups"]])

    def test_unknown_group_version(self):
        """Unknown group/versions have no document."""
        self.assertIsNone(discovery.api_resource_list(STABLE, "apps", "v2"))
        self.assertIsNone(discovery.api_resource_list(STABLE, "", "v2"))
        self.assertIsNone(discovery.api_resource_list(STABLE, "nope", "v1"))


class AggregatedTests(SynchronousTestCase):
    def test_media_type(self):
        """[COMPAT] The media type keeps upstream's group spelling."""
        self.assertEqual(discovery.AGGREGATED_MEDIA_TYPE,
                         "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")

    def test_core(self):
        """The /api document has one item, the core group named "", with v1."""
        document = discovery.aggregated_discovery(STABLE, core=True)
        self.assertEqual(document["kind"], "APIGroupDiscoveryList")
        self.assertEqual(document["apiVersion"], "apidiscovery.k8s.io/v2")
        self.assertEqual(document["metadata"], {})
        [item] = document["items"]
        self.assertEqual(item["metadata"], {"name": ""})
        [version] = item["versions"]
        self.assertEqual((version["version"], version["freshness"]), ("v1", "Current"))
        pods = next(r for r in version["resources"] if r["resource"] == "pods")
        self.assertEqual(pods, {
            "resource": "pods",
            "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
            "scope": "Namespaced",
            "singularResource": "pod",
            "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
            "shortNames": ["po"],
            "categories": ["all"],
            "subresources": [{
                "subresource": "binding",
                "responseKind": {"group": "", "version": "v1", "kind": "Binding"},
                "verbs": ["create"],
            }, {
                "subresource": "eviction",
                "responseKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
                "verbs": ["create"],
            }, {
                "subresource": "log",
                "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                "verbs": ["get"],
            }, {
                "subresource": "status",
                "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                "verbs": ["get", "patch", "update"],
            }],
        })

    def test_every_kind_once(self):
        """Across /api and /apis, each enabled kind appears once, with its scope and verbs."""
        seen = {}
        for core in (True, False):
            for item in discovery.aggregated_discovery(STABLE, core)["items"]:
                for version in item["versions"]:
                    for resource in version["resources"]:
                        key = (item["metadata"]["name"], version["version"], resource["resource"])
                        self.assertNotIn(key, seen)
                        seen[key] = resource
        self.assertEqual(set(seen), {(k.group, k.version, k.resource) for k in STABLE})
        for info in STABLE:
            resource = seen[(info.group, info.version, info.resource)]
            self.assertEqual(resource["scope"], "Namespaced" if info.namespaced else "Cluster")
            self.assertEqual(resource["verbs"], sorted(info.verbs))
            self.assertEqual(resource["responseKind"],
                             {"group": info.group, "version": info.version, "kind": info.kind})
            self.assertEqual([s["subresource"] for s in resource.get("subresources", [])],
                             sorted(info.subresources))

    def test_named_groups(self):
        """The /apis document has the named groups in /apis order and no core item."""
        names = [i["metadata"]["name"] for i in discovery.aggregated_discovery(STABLE, False)["items"]]
        legacy = [g["name"] for g in discovery.api_group_list(STABLE)["groups"]]
        self.assertEqual(names, legacy)

    def test_preferred_version_first(self):
        """Versions are ordered preferred first, which is how clients pick the preferred one."""
        kinds = [k for k in KINDS if k.group == "authentication.orch.io"]
        [item] = discovery.aggregated_discovery(kinds, False)["items"]
        self.assertEqual([v["version"] for v in item["versions"]], ["v1", "v1beta1"])

    def test_disabled_kind_absent(self):
        """A disabled kind is not in the aggregated documents."""
        enabled = [k for k in STABLE if k.resource != "pods"]
        [item] = discovery.aggregated_discovery(enabled, True)["items"]
        self.assertNotIn("pods", [r["resource"] for r in item["versions"][0]["resources"]])

    def test_no_core(self):
        """Without enabled core kinds, the /api document has no items."""
        enabled = [k for k in STABLE if k.group]
        self.assertEqual(discovery.aggregated_discovery(enabled, True)["items"], [])
