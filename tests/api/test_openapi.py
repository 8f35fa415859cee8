"""Tests for L{orchd.api.openapi} and L{orchd.api.schemas}."""

from openapi_spec_validator import validate as validate_spec
from twisted.trial.unittest import SynchronousTestCase

from orchd.api import openapi, schemas
from orchd.api.kinds import SUBRESOURCE_VERBS, KindInfo
from orchd.registry.kinds.builtin import KINDS

STABLE = [k for k in KINDS if k.stage == "stable"]
WRITE = {"dryRun", "fieldManager", "fieldValidation", "pretty"}
LIST = {"watch", "labelSelector", "fieldSelector", "limit", "continue", "resourceVersion",
        "resourceVersionMatch", "timeoutSeconds"}


def gvk(info, kind=None):
    return {"group": info.group, "version": info.version, "kind": kind or info.kind}


def find(group, resource, version="v1"):
    return next(k for k in KINDS if (k.group, k.resource, k.version) == (group, resource, version))


def v3(info, kinds=STABLE):
    return openapi.openapi_v3_group_version(kinds, info.group, info.version)


def operations(document):
    """Every (path, method, operation) of a document."""
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method != "parameters":
                yield path, method, operation


def parameter_names(operation):
    return {p["name"] for p in operation.get("parameters", ())}


def refs(value):
    """Every C{$ref} string in a JSON-shaped value."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "$ref":
                yield item
            else:
                yield from refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from refs(item)


def supports_query_param_v3(document, kind, name):
    """
    kubectl's query-parameter verifier (query_param_verifier_v3.go): the
    first PATCH operation whose GVK extension is the kind decides.
    """
    for _, method, operation in operations(document):
        if method == "patch" and operation.get("x-kubernetes-group-version-kind") == kind:
            return name in parameter_names(operation)
    return False


def schema_for(definitions, kind):
    """The definition whose GVK extension list names C{kind}, as clients find schemas."""
    found = [d for d in definitions.values() if kind in d.get(schemas.GVK_EXTENSION, [])]
    return found


class ValidityTests(SynchronousTestCase):
    def test_v2_valid(self):
        """The Swagger 2.0 document of every kind, alpha and beta included, is valid."""
        validate_spec(openapi.openapi_v2(KINDS))

    def test_v3_valid(self):
        """Every OpenAPI 3.0 document is valid."""
        for path, document in openapi.openapi_v3_documents(KINDS).items():
            validate_spec(document)


class ReferenceTests(SynchronousTestCase):
    def test_v2_refs_resolve(self):
        """Every reference of the v2 document names one of its definitions."""
        document = openapi.openapi_v2(STABLE)
        for ref in set(refs(document)):
            self.assertTrue(ref.startswith("#/definitions/"), ref)
            self.assertIn(ref.removeprefix("#/definitions/"), document["definitions"])

    def test_v3_refs_resolve(self):
        """Every reference of each v3 document names one of its own schemas."""
        for path, document in openapi.openapi_v3_documents(STABLE).items():
            components = document["components"]["schemas"]
            for ref in set(refs(document)):
                self.assertTrue(ref.startswith("#/components/schemas/"), ref)
                self.assertIn(ref.removeprefix("#/components/schemas/"), components, path)

    def test_only_referenced_schemas(self):
        """A group/version document carries its own kinds, not those of other groups."""
        names = v3(find("apps", "deployments"))["components"]["schemas"]
        self.assertIn("io.orch.api.apps.v1.Deployment", names)
        self.assertNotIn("io.orch.api.core.v1.Pod", names)

    def test_operation_ids_unique(self):
        """Operation ids are unique across the whole v2 document."""
        ids = [op["operationId"] for _, _, op in operations(openapi.openapi_v2(KINDS))]
        self.assertEqual(len(ids), len(set(ids)))

    def test_definition_names_unique(self):
        """No two kinds of the table share a definition name."""
        names = [schemas.definition_name(k) for k in KINDS]
        self.assertEqual(len(names), len(set(names)))


class SchemaTests(SynchronousTestCase):
    def test_every_kind_by_gvk(self):
        """Each kind, and the list of each listable kind, has one definition, found by GVK in v2 and v3."""
        v2 = openapi.openapi_v2(STABLE)["definitions"]
        for info in STABLE:
            components = v3(info)["components"]["schemas"]
            listable = "list" in info.verbs
            self.assertEqual(bool(schema_for(v2, gvk(info, info.list_kind))), listable, info)
            for kind in (info.kind, info.list_kind) if listable else (info.kind,):
                self.assertEqual(len(schema_for(v2, gvk(info, kind))), 1, (info, kind))
                self.assertEqual(len(schema_for(components, gvk(info, kind))), 1, (info, kind))

    def test_loose_kind(self):
        """A kind without a description keeps any field, and names apiVersion, kind and metadata."""
        info = find("networking.orch.io", "networkpolicies")
        [policy] = schema_for(v3(info)["components"]["schemas"], gvk(info))
        self.assertTrue(policy["x-kubernetes-preserve-unknown-fields"])
        self.assertEqual(set(policy["properties"]), {"apiVersion", "kind", "metadata"})
        self.assertEqual(policy["properties"]["metadata"]["allOf"],
                         [{"$ref": "#/components/schemas/" + schemas.OBJECT_META}])

    def test_loose_kind_with_status(self):
        """A loose kind with a status subresource names spec and status, loosely."""
        info = find("apps", "deployments")
        [deployment] = schema_for(v3(info)["components"]["schemas"], gvk(info))
        self.assertTrue(deployment["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"])
        self.assertIn("status", deployment["properties"])

    def test_described_kinds(self):
        """Described kinds have their real fields and accept no others."""
        document = openapi.openapi_v2(STABLE)["definitions"]
        [config_map] = schema_for(document, gvk(find("", "configmaps")))
        self.assertEqual(set(config_map["properties"]),
                         {"apiVersion", "kind", "metadata", "data", "binaryData", "immutable"})
        self.assertNotIn("x-kubernetes-preserve-unknown-fields", config_map)
        self.assertEqual(config_map["properties"]["data"]["additionalProperties"], {"type": "string"})
        [secret] = schema_for(document, gvk(find("", "secrets")))
        self.assertEqual(set(secret["properties"]) - {"apiVersion", "kind", "metadata"},
                         {"data", "stringData", "type", "immutable"})
        [revision] = schema_for(document, gvk(find("apps", "controllerrevisions")))
        self.assertEqual(revision["properties"]["revision"], {
            "type": "integer", "format": "int64", "description": "The revision of the state in data."})
        self.assertEqual(revision["required"], ["revision"])
        [namespace] = schema_for(document, gvk(find("", "namespaces")))
        self.assertEqual(namespace["properties"]["spec"]["$ref"],
                         "#/definitions/io.orch.api.core.v1.NamespaceSpec")
        [role] = schema_for(document, gvk(find("rbac.authorization.orch.io", "roles")))
        self.assertNotIn("x-kubernetes-preserve-unknown-fields", role)
        self.assertEqual(role["properties"]["rules"]["x-kubernetes-list-type"], "atomic")

    def test_value_types(self):
        """Quantities and int-or-string are oneOf in 3.0 and strings in 2.0; times are strings."""
        components = openapi.openapi_v3_group_version(STABLE, "", "v1")["components"]["schemas"]
        self.assertEqual(components[schemas.INT_OR_STRING]["oneOf"],
                         [{"type": "integer"}, {"type": "string"}])
        self.assertIs(components[schemas.INT_OR_STRING]["x-kubernetes-int-or-string"], True)
        definitions = openapi.openapi_v2(STABLE)["definitions"]
        self.assertNotIn("oneOf", definitions[schemas.INT_OR_STRING])
        self.assertEqual(definitions[schemas.INT_OR_STRING]["type"], "string")
        self.assertEqual(definitions[schemas.INT_OR_STRING]["format"], "int-or-string")
        self.assertEqual(definitions[schemas.QUANTITY]["type"], "string")
        for name in (schemas.TIME, schemas.MICRO_TIME):
            self.assertEqual((definitions[name]["type"], definitions[name]["format"]),
                             ("string", "date-time"))

    def test_object_meta(self):
        """ObjectMeta has the standard fields, with the merge keys clients patch by."""
        meta = openapi.openapi_v2(STABLE)["definitions"][schemas.OBJECT_META]
        for field in ("name", "namespace", "labels", "annotations", "uid", "resourceVersion",
                      "generation", "creationTimestamp", "deletionTimestamp", "finalizers",
                      "ownerReferences", "managedFields", "generateName"):
            self.assertIn(field, meta["properties"])
        self.assertEqual(meta["properties"]["labels"]["additionalProperties"], {"type": "string"})
        self.assertEqual(meta["properties"]["ownerReferences"]["x-kubernetes-patch-merge-key"], "uid")

    def test_list_kind(self):
        """A list kind holds items of its kind."""
        info = find("", "configmaps")
        [listing] = schema_for(openapi.openapi_v2(STABLE)["definitions"], gvk(info, "ConfigMapList"))
        self.assertEqual(listing["properties"]["items"]["items"],
                         {"$ref": "#/definitions/io.orch.api.core.v1.ConfigMap"})
        self.assertEqual(listing["properties"]["metadata"]["$ref"], "#/definitions/" + schemas.LIST_META)

    def test_status_and_delete_options(self):
        """Status and DeleteOptions are defined with their GVKs."""
        definitions = openapi.openapi_v2(STABLE)["definitions"]
        self.assertEqual(definitions[schemas.STATUS][schemas.GVK_EXTENSION],
                         [{"group": "", "version": "v1", "kind": "Status"}])
        self.assertIn({"group": "apps", "version": "v1", "kind": "DeleteOptions"},
                      definitions[schemas.DELETE_OPTIONS][schemas.GVK_EXTENSION])

    def test_render(self):
        """A described reference becomes allOf in 3.0 and stays a sibling in 2.0."""
        described = schemas.ref("X", "about x")
        self.assertEqual(schemas.render(described, v3=True),
                         {"allOf": [{"$ref": "#/components/schemas/X"}], "description": "about x"})
        self.assertEqual(schemas.render(described, v3=False),
                         {"$ref": "#/definitions/X", "description": "about x"})
        self.assertEqual(schemas.render(schemas.ref("X"), v3=True), {"$ref": "#/components/schemas/X"})


class PathTests(SynchronousTestCase):
    def test_namespaced_paths(self):
        """A namespaced kind has collection, item, all-namespaces and status paths."""
        paths = v3(find("apps", "deployments"))["paths"]
        base = "/apis/apps/v1/namespaces/{namespace}/deployments"
        self.assertEqual(set(paths[base]) - {"parameters"}, {"get", "post", "delete"})
        self.assertEqual(set(paths[base + "/{name}"]) - {"parameters"},
                         {"get", "put", "patch", "delete"})
        self.assertEqual(set(paths["/apis/apps/v1/deployments"]), {"get"})
        self.assertEqual(set(paths[base + "/{name}/status"]) - {"parameters"}, {"get", "put", "patch"})
        self.assertEqual([p["name"] for p in paths[base + "/{name}"]["parameters"]], ["name", "namespace"])

    def test_core_paths(self):
        """Core kinds live under /api/v1, cluster-scoped ones without a namespace segment."""
        paths = openapi.openapi_v3_group_version(STABLE, "", "v1")["paths"]
        self.assertIn("/api/v1/namespaces/{namespace}/configmaps/{name}", paths)
        self.assertIn("/api/v1/configmaps", paths)
        self.assertIn("/api/v1/nodes/{name}", paths)
        self.assertNotIn("/api/v1/namespaces/{namespace}/nodes", paths)
        self.assertEqual(set(paths["/api/v1/namespaces/{name}/finalize"]) - {"parameters"}, {"put"})
        self.assertNotIn("delete", paths["/api/v1/namespaces"])

    def test_operations_follow_verbs(self):
        """Every operation maps to a verb of its kind or subresource, with action and GVK."""
        actions = {"get": "get", "list": "list", "post": "create", "put": "update",
                   "patch": "patch", "delete": "delete", "deletecollection": "deletecollection"}
        for info in STABLE:
            for path, method, operation in operations(v3(info)):
                if operation.get("x-kubernetes-group-version-kind") != gvk(info):
                    continue
                verb = actions[operation["x-kubernetes-action"]]
                sub = path.rsplit("/", 1)[-1] if path.endswith(tuple("/" + s for s in info.subresources)) else None
                allowed = SUBRESOURCE_VERBS[sub] if sub else info.verbs
                self.assertIn(verb, allowed, (info, path, method))

    def test_create_only(self):
        """A review has only a create operation."""
        info = find("authorization.orch.io", "selfsubjectaccessreviews")
        ops = [(p, m) for p, m, o in operations(v3(info))
               if o.get("x-kubernetes-group-version-kind") == gvk(info)]
        self.assertEqual(ops, [("/apis/authorization.orch.io/v1/selfsubjectaccessreviews", "post")])

    def test_list_parameters(self):
        """List operations take the watch and selection parameters."""
        operation = v3(find("", "pods"))["paths"]["/api/v1/namespaces/{namespace}/pods"]["get"]
        self.assertEqual(operation["x-kubernetes-action"], "list")
        self.assertLessEqual(LIST, parameter_names(operation))
        self.assertEqual(operation["x-kubernetes-group-version-kind"], gvk(find("", "pods")))

    def test_write_parameters(self):
        """Every PATCH, PUT and POST takes dryRun, fieldManager, fieldValidation and pretty; PATCH also force."""
        for info in STABLE:
            for path, method, operation in operations(v3(info)):
                if method in ("patch", "put", "post"):
                    self.assertLessEqual(WRITE, parameter_names(operation), (path, method))
                if method == "patch":
                    self.assertIn("force", parameter_names(operation))
        patch = openapi.openapi_v2(STABLE)["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
        force = next(p for p in patch["parameters"] if p["name"] == "force")
        self.assertEqual((force["in"], force["type"]), ("query", "boolean"))

    def test_query_param_verifier(self):
        """kubectl's verifier finds dryRun and fieldValidation for every kind that can be patched."""
        for info in STABLE:
            if "patch" not in info.verbs:
                continue
            for name in ("dryRun", "fieldValidation"):
                self.assertTrue(supports_query_param_v3(v3(info), gvk(info), name), (info, name))

    def test_patch_media_types(self):
        """Patch bodies are announced in every form; strategic merge only for full kinds."""
        every = {"application/json-patch+json", "application/merge-patch+json",
                 "application/strategic-merge-patch+json", "application/apply-patch+yaml"}
        for info in KINDS:
            if "patch" not in info.verbs:
                continue
            document = openapi.openapi_v3_group_version(KINDS, info.group, info.version)
            [patch] = [o for _, m, o in operations(document)
                       if m == "patch" and o["x-kubernetes-group-version-kind"] == gvk(info)
                       and not o["operationId"].endswith("Status")
                       and not o["operationId"].endswith("Approval")]
            expected = every if info.schema.complete else every - {
                "application/strategic-merge-patch+json"}
            self.assertEqual(set(patch["requestBody"]["content"]), expected, info)
        role = find("rbac.authorization.orch.io", "roles")
        item = v3(role)["paths"]["/apis/rbac.authorization.orch.io/v1/namespaces/{namespace}/roles/{name}"]
        self.assertEqual(set(item["patch"]["requestBody"]["content"]), every)
        deployment = v3(find("apps", "deployments"))["paths"]
        self.assertNotIn("application/strategic-merge-patch+json", deployment[
            "/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]["requestBody"]["content"])
        v2 = openapi.openapi_v2(STABLE)["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]
        self.assertIn("application/strategic-merge-patch+json", v2["patch"]["consumes"])
        self.assertIn("application/apply-patch+yaml", v2["patch"]["consumes"])
        self.assertEqual(v2["patch"]["parameters"][0]["in"], "body")

    def test_operation_ids(self):
        """Operation ids follow upstream's naming."""
        ids = {o["operationId"] for _, _, o in operations(openapi.openapi_v2(STABLE))}
        for expected in ("readCoreV1NamespacedConfigMap", "listCoreV1ConfigMapForAllNamespaces",
                         "deleteCoreV1CollectionNamespacedConfigMap", "patchAppsV1NamespacedDeploymentStatus",
                         "replaceCoreV1NamespaceFinalize", "createRbacAuthorizationV1ClusterRole",
                         "getCoreAPIVersions", "getAPIVersions", "getAppsAPIGroup", "getAppsV1APIResources"):
            self.assertIn(expected, ids)

    def test_disabled_kind_absent(self):
        """A disabled kind has neither paths nor schema."""
        enabled = [k for k in STABLE if k.resource != "secrets"]
        document = openapi.openapi_v3_group_version(enabled, "", "v1")
        self.assertFalse([p for p in document["paths"] if "secrets" in p])
        self.assertNotIn("io.orch.api.core.v1.Secret", document["components"]["schemas"])
        self.assertNotIn("/api/v1/secrets", openapi.openapi_v2(enabled)["paths"])


class DocumentTests(SynchronousTestCase):
    def test_v2_header(self):
        """The v2 document is Swagger 2.0 titled for the server version."""
        document = openapi.openapi_v2(STABLE)
        self.assertEqual(document["swagger"], "2.0")
        self.assertEqual(document["info"], {"title": "Orchestration", "version": "v1.36.0"})

    def test_index(self):
        """The v3 index names each document with a URL carrying its hash."""
        index = openapi.openapi_v3_index(STABLE)["paths"]
        for path in ("api", "apis", "api/v1", "apis/apps/v1", "apis/apps",
                     "apis/rbac.authorization.orch.io/v1"):
            self.assertIn(path, index)
        documents = openapi.openapi_v3_documents(STABLE)
        self.assertEqual(set(index), set(documents))
        for path, entry in index.items():
            self.assertEqual(entry["serverRelativeURL"],
                             f"/openapi/v3/{path}?hash={openapi.document_hash(documents[path])}")
        self.assertNotIn("apis/flowcontrol.apiserver.orch.io/v1beta2", index)

    def test_hash_follows_content(self):
        """A document's hash changes when its content does, and only then."""
        before = openapi.openapi_v3_index(STABLE)["paths"]
        enabled = [k for k in STABLE if k.resource != "secrets"]
        after = openapi.openapi_v3_index(enabled)["paths"]
        self.assertNotEqual(before["api/v1"], after["api/v1"])
        self.assertEqual(before["apis/apps/v1"], after["apis/apps/v1"])
        self.assertRegex(before["api/v1"]["serverRelativeURL"], r"hash=[0-9A-F]{128}$")

    def test_group_version_document(self):
        """A group/version document is OpenAPI 3.0 with paths and schemas; unknown ones are None."""
        document = openapi.openapi_v3_group_version(STABLE, "apps", "v1")
        self.assertEqual(document["openapi"], "3.0.0")
        self.assertEqual(document["info"]["version"], "v1.36.0")
        self.assertIn("/apis/apps/v1/", document["paths"])
        self.assertIsNone(openapi.openapi_v3_group_version(STABLE, "apps", "v2"))
        self.assertIsNone(openapi.openapi_v3_group_version(STABLE, "flowcontrol.apiserver.orch.io", "v1beta2"))
        self.assertIsNone(openapi.openapi_v3_document(STABLE, "nope"))
        self.assertIs(openapi.openapi_v3_document(STABLE, "/api/v1"),
                      openapi.openapi_v3_group_version(STABLE, "", "v1"))

    def test_discovery_roots(self):
        """The api and apis documents describe the discovery roots."""
        documents = openapi.openapi_v3_documents(STABLE)
        self.assertEqual(list(documents["api"]["paths"]), ["/api/"])
        self.assertEqual(list(documents["apis"]["paths"]), ["/apis/"])
        self.assertEqual(list(documents["apis/apps"]["paths"]), ["/apis/apps/"])


# Patch extensions ------------------------------------------------------------------

PATCH_KEYS = ("x-kubernetes-patch-strategy", "x-kubernetes-patch-merge-key")


def _target(schema, components):
    """The object schema a property stands for: through list items, allOf and $ref."""
    if schema.get("type") == "array":
        schema = schema["items"]
    if "allOf" in schema:
        schema = schema["allOf"][0]
    if "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[1]]
    return schema


def document_extensions(schema, components, path="", depth=0):
    """Every patch extension reachable from C{schema}: {field path: (strategy, merge key)}."""
    found = {}
    if depth > 15:
        return found
    for name, prop in _target(schema, components).get("properties", {}).items():
        sub = f"{path}.{name}"
        extension = tuple(prop.get(key) for key in PATCH_KEYS)
        if extension != (None, None):
            found[sub] = extension
        found.update(document_extensions(prop, components, sub, depth + 1))
    return found


def table_extensions(fields, path=""):
    """What the strategic merge patch table says, in the same form."""
    found = {}
    for name, field in fields.items():
        sub = f"{path}.{name}"
        flags = [flag for flag, on in (("merge", field.merge), ("retainKeys", field.retain_keys),
                                       ("replace", field.replace)) if on]
        if flags or field.key:
            found[sub] = (",".join(flags) or None, field.key)
        found.update(table_extensions(field.fields, sub))
    return found


class PatchExtensionTests(SynchronousTestCase):
    def test_agree_with_patch_table(self):
        """
        The patch extensions of every kind are those of the server's patch
        table: all of them for full kinds, and no others for loose kinds.
        """
        for info in KINDS:
            components = openapi.openapi_v3_group_version(KINDS, info.group, info.version)[
                "components"]["schemas"]
            [kind] = schema_for(components, gvk(info))
            found = document_extensions(kind, components)
            expected = table_extensions(info.patch_schema)
            if info.schema.complete:
                self.assertEqual(found, expected, info)
            else:
                self.assertLessEqual(found.items(), expected.items(), info)
            self.assertEqual(found[".metadata.ownerReferences"], ("merge", "uid"), info)
            self.assertEqual(found[".metadata.finalizers"], ("merge", None), info)

    def test_examples(self):
        """Upstream's merge keys, spot-checked in both dialects."""
        v2 = openapi.openapi_v2(STABLE)["definitions"]
        ports = v2["io.orch.api.core.v1.ServiceSpec"]["properties"]["ports"]
        self.assertEqual((ports["x-kubernetes-patch-strategy"], ports["x-kubernetes-patch-merge-key"],
                          ports["x-kubernetes-list-type"], ports["x-kubernetes-list-map-keys"]),
                         ("merge", "port", "map", ["port", "protocol"]))
        components = v3(find("", "nodes"))["components"]["schemas"]
        cidrs = components["io.orch.api.core.v1.NodeSpec"]["properties"]["podCIDRs"]
        self.assertEqual((cidrs["x-kubernetes-patch-strategy"], cidrs["x-kubernetes-list-type"]),
                         ("merge", "set"))
        self.assertNotIn("x-kubernetes-patch-merge-key", cidrs)
        secrets = v3(find("", "serviceaccounts"))["components"]["schemas"][
            "io.orch.api.core.v1.ServiceAccount"]["properties"]["secrets"]
        self.assertEqual(secrets["x-kubernetes-patch-merge-key"], "name")
        rules = v3(find("rbac.authorization.orch.io", "clusterroles"))["components"]["schemas"][
            "io.orch.api.rbac.v1.ClusterRole"]["properties"]["rules"]
        self.assertNotIn("x-kubernetes-patch-strategy", rules)


class DefinitionNameTests(SynchronousTestCase):
    def test_custom_groups_reversed(self):
        """A custom resource's group is written reversed, so groups sharing a first label differ."""
        kinds = [KindInfo(group, "v1", "widgets", "Widget", True)
                 for group in ("example.com", "example.org")]
        definitions = openapi.openapi_v2(kinds)["definitions"]
        self.assertEqual(definitions["com.example.v1.Widget"]["x-kubernetes-group-version-kind"],
                         [{"group": "example.com", "version": "v1", "kind": "Widget"}])
        self.assertIn("org.example.v1.Widget", definitions)

    def test_own_groups_by_first_label(self):
        """The server's own groups, in either spelling, are named by their first label."""
        for group in ("rbac.authorization.orch.io", "rbac.authorization.k8s.io"):
            self.assertEqual(schemas.named_kind(group, "v1", "Role"), "io.orch.api.rbac.v1.Role")
        self.assertEqual(schemas.named_kind("apps", "v1", "Deployment"),
                         "io.orch.api.apps.v1.Deployment")
        self.assertEqual(schemas.named_kind("", "v1", "Pod"), "io.orch.api.core.v1.Pod")
