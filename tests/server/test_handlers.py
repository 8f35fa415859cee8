"""The generic REST surface, driven through the real resource tree in memory."""

import yaml
from twisted.trial.unittest import SynchronousTestCase

from orchd.auth.authz.always import AlwaysDeny, PrivilegedGroups
from orchd.app.bootstrappolicy import reconcile_bootstrap_policy
from tests.support import ALICE, APIHarness

CM = "/api/v1/namespaces/default/configmaps"
JSON_PATCH = b"application/json-patch+json"
MERGE_PATCH = b"application/merge-patch+json"
STRATEGIC_PATCH = b"application/strategic-merge-patch+json"


def configmap(name, data=None, **meta):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": dict(name=name, **meta), "data": data or {"a": "1"}}


class CreateGetTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def test_create_returns_201_with_server_metadata(self):
        """A create answers 201 with uid, creationTimestamp, resourceVersion and generation set."""
        code, obj, _ = self.api.call("POST", CM, configmap("a"))
        self.assertEqual(code, 201)
        meta = obj["metadata"]
        self.assertEqual(meta["namespace"], "default")
        self.assertEqual(meta["generation"], 1)
        self.assertTrue(meta["uid"])
        self.assertRegex(meta["creationTimestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertTrue(meta["resourceVersion"].isdigit())

    def test_client_uid_is_replaced(self):
        """A uid sent by the client is overwritten by the server's own."""
        _, obj, _ = self.api.call("POST", CM, configmap("a", uid="mine"))
        self.assertNotEqual(obj["metadata"]["uid"], "mine")

    def test_get_returns_stored_object(self):
        """GET returns what the create stored."""
        _, created, _ = self.api.call("POST", CM, configmap("a", {"k": "v"}))
        code, obj, _ = self.api.call("GET", CM + "/a")
        self.assertEqual((code, obj), (200, created))

    def test_get_missing_is_404_status(self):
        """A missing object is a 404 Status in the words clients know."""
        code, status, _ = self.api.call("GET", CM + "/nope")
        self.assertEqual(code, 404)
        self.assertEqual(status["kind"], "Status")
        self.assertEqual(status["reason"], "NotFound")
        self.assertEqual(status["message"], 'configmaps "nope" not found')
        self.assertEqual(status["details"], {"name": "nope", "kind": "configmaps"})

    def test_create_existing_is_409(self):
        """Creating a name that exists is 409 AlreadyExists."""
        self.api.call("POST", CM, configmap("a"))
        code, status, _ = self.api.call("POST", CM, configmap("a"))
        self.assertEqual((code, status["reason"]), (409, "AlreadyExists"))
        self.assertEqual(status["message"], 'configmaps "a" already exists')

    def test_generate_name(self):
        """generateName gets five random characters and stays on the object."""
        _, obj, _ = self.api.call("POST", CM, {"metadata": {"generateName": "web-"},
                                               "data": {}})
        self.assertRegex(obj["metadata"]["name"], r"^web-[bcdfghjklmnpqrstvwxz2456789]{5}$")
        self.assertEqual(obj["metadata"]["generateName"], "web-")

    def test_missing_name_is_422(self):
        """A create with neither name nor generateName is 422 Invalid."""
        code, status, _ = self.api.call("POST", CM, {"metadata": {}})
        self.assertEqual((code, status["reason"]), (422, "Invalid"))
        self.assertEqual(status["message"], 'ConfigMap "" is invalid: metadata.name: Required '
                                            "value: name or generateName is required")

    def test_invalid_name_is_422(self):
        """A name that is not a DNS subdomain is refused with the upstream explanation."""
        code, status, _ = self.api.call("POST", CM, configmap("Bad_Name"))
        self.assertEqual(code, 422)
        self.assertIn('metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain',
                      status["message"])
        self.assertEqual(status["details"]["causes"][0]["field"], "metadata.name")

    def test_invalid_label_is_422(self):
        """Label values are validated."""
        code, status, _ = self.api.call("POST", CM, configmap("a", labels={"k": "bad value"}))
        self.assertEqual(code, 422)
        self.assertIn("metadata.labels", status["message"])

    def test_namespace_mismatch_is_400(self):
        """A body naming another namespace than the URL is refused."""
        code, status, _ = self.api.call("POST", CM, configmap("a", namespace="orch-system"))
        self.assertEqual(code, 400)
        self.assertEqual(status["message"], "the namespace of the provided object does not "
                                            "match the namespace sent on the request")

    def test_kind_mismatch_is_400(self):
        """A body of another kind or apiVersion than the URL's is refused."""
        body = configmap("a")
        body["kind"] = "Secret"
        self.assertEqual(self.api.call("POST", CM, body)[0], 400)
        body = configmap("a")
        body["apiVersion"] = "apps/v1"
        code, status, _ = self.api.call("POST", CM, body)
        self.assertEqual(code, 400)
        self.assertIn("the API version in the data (apps/v1)", status["message"])

    def test_missing_kind_is_filled_in(self):
        """apiVersion and kind may be left out; the URL supplies them."""
        _, obj, _ = self.api.call("POST", CM, {"metadata": {"name": "a"}})
        self.assertEqual((obj["apiVersion"], obj["kind"]), ("v1", "ConfigMap"))

    def test_bad_json_is_400(self):
        """A malformed JSON body is 400 BadRequest."""
        code, status, _ = self.api.call("POST", CM, b'{"metadata": ')
        self.assertEqual((code, status["reason"]), (400, "BadRequest"))

    def test_body_not_an_object_is_400(self):
        """A JSON body that is not an object is 400."""
        self.assertEqual(self.api.call("POST", CM, b"[1, 2]")[0], 400)

    def test_unknown_content_type_is_415(self):
        """A body in a media type the server does not read is 415."""
        code, status, _ = self.api.call("POST", CM, b"<x/>", content_type=b"application/xml")
        self.assertEqual((code, status["reason"]), (415, "UnsupportedMediaType"))

    def test_yaml_in_and_out(self):
        """A YAML body is accepted and YAML is returned when asked for."""
        body = yaml.safe_dump(configmap("y", {"when": "2024-01-01T00:00:00Z"})).encode()
        code, _, _ = self.api.call("POST", CM, body, content_type=b"application/yaml")
        self.assertEqual(code, 201)
        code, text, headers = self.api.call("GET", CM + "/y",
                                            headers={b"accept": b"application/yaml"})
        self.assertEqual(headers.getRawHeaders(b"content-type"), [b"application/yaml"])
        self.assertEqual(yaml.safe_load(text)["data"], {"when": "2024-01-01T00:00:00Z"})

    def test_unacceptable_accept_is_406(self):
        """An Accept header the server cannot satisfy is 406."""
        self.api.call("POST", CM, configmap("a"))
        code, status, _ = self.api.call("GET", CM + "/a", headers={b"accept": b"text/html"})
        self.assertEqual((code, status["reason"]), (406, "NotAcceptable"))

    def test_pretty(self):
        """pretty=true indents the JSON answer."""
        self.api.call("POST", CM, configmap("a"))
        response = self.api.treq.get("https://orchd" + CM + "/a?pretty=true")
        body = self.successResultOf(self.api.treq.content(self.successResultOf(response)))
        self.assertIn(b'\n  "metadata"', body)

    def test_dry_run_create_stores_nothing(self):
        """dryRun=All validates and answers like a create, but stores nothing."""
        code, obj, _ = self.api.call("POST", CM + "?dryRun=All", configmap("a"))
        self.assertEqual((code, obj["metadata"]["name"]), (201, "a"))
        self.assertEqual(self.api.call("GET", CM + "/a")[0], 404)

    def test_bad_dry_run_is_422(self):
        """dryRun accepts only All."""
        code, status, _ = self.api.call("POST", CM + "?dryRun=Some", configmap("a"))
        self.assertEqual(code, 422)
        self.assertIn('dryRun: Unsupported value: "Some"', status["message"])

    def test_unknown_resource_is_404(self):
        """A resource the server does not serve is 404."""
        self.assertEqual(self.api.call("GET", "/api/v1/namespaces/default/widgets")[0], 404)
        self.assertEqual(self.api.call("GET", "/apis/nope.orch.io/v1/things")[0], 404)

    def test_method_not_allowed_is_405(self):
        """A verb the resource does not support is 405."""
        code, status, _ = self.api.call("DELETE", "/api/v1/namespaces")
        self.assertEqual((code, status["reason"]), (405, "MethodNotAllowed"))
        code, _, _ = self.api.call("PUT", CM, configmap("a"))
        self.assertEqual(code, 405)

    def test_create_in_missing_namespace_is_404(self):
        """A namespaced object needs an existing namespace."""
        code, status, _ = self.api.call(
            "POST", "/api/v1/namespaces/ghost/configmaps", configmap("a"))
        self.assertEqual((code, status["message"]), (404, 'namespaces "ghost" not found'))

    def test_cluster_scoped_create_drops_namespace(self):
        """A cluster-scoped object does not keep a namespace from its body."""
        code, obj, _ = self.api.call("POST", "/apis/scheduling.orch.io/v1/priorityclasses",
                                     {"metadata": {"name": "p", "namespace": "x"}, "value": 5})
        self.assertEqual(code, 201)
        self.assertNotIn("namespace", obj["metadata"])


class UpdateTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        _, self.created, _ = self.api.call("POST", CM, configmap("a"))

    def test_update_bumps_resource_version(self):
        """A PUT with the current resourceVersion stores the new content."""
        body = dict(self.created, data={"a": "2"})
        code, obj, _ = self.api.call("PUT", CM + "/a", body)
        self.assertEqual(code, 200)
        self.assertEqual(obj["data"], {"a": "2"})
        self.assertGreater(int(obj["metadata"]["resourceVersion"]),
                           int(self.created["metadata"]["resourceVersion"]))
        self.assertEqual(obj["metadata"]["generation"], 2)
        self.assertEqual(obj["metadata"]["uid"], self.created["metadata"]["uid"])

    def test_stale_update_is_409(self):
        """A PUT with an old resourceVersion is 409 Conflict."""
        self.api.call("PUT", CM + "/a", dict(self.created, data={"a": "2"}))
        code, status, _ = self.api.call("PUT", CM + "/a", dict(self.created, data={"a": "3"}))
        self.assertEqual((code, status["reason"]), (409, "Conflict"))
        self.assertEqual(status["message"], 'Operation cannot be fulfilled on configmaps "a": the '
                         "object has been modified; please apply your changes to the latest "
                         "version and try again")

    def test_unconditional_update(self):
        """A PUT without resourceVersion overwrites."""
        body = configmap("a", {"b": "2"})
        code, obj, _ = self.api.call("PUT", CM + "/a", body)
        self.assertEqual((code, obj["data"]), (200, {"b": "2"}))

    def test_noop_update_keeps_resource_version(self):
        """A PUT that changes nothing writes nothing."""
        code, obj, _ = self.api.call("PUT", CM + "/a", self.created)
        self.assertEqual(obj["metadata"]["resourceVersion"],
                         self.created["metadata"]["resourceVersion"])

    def test_name_mismatch_is_400(self):
        """The body's name must be the URL's."""
        code, status, _ = self.api.call("PUT", CM + "/a", configmap("b"))
        self.assertEqual(code, 400)
        self.assertEqual(status["message"],
                         "the name of the object (b) does not match the name on the URL (a)")

    def test_update_missing_is_404(self):
        """Updating an object that does not exist is 404."""
        self.assertEqual(self.api.call("PUT", CM + "/zz", configmap("zz"))[0], 404)

    def test_uid_change_is_422(self):
        """uid cannot change."""
        body = dict(self.created)
        body["metadata"] = dict(body["metadata"], uid="other")
        code, status, _ = self.api.call("PUT", CM + "/a", body)
        self.assertEqual(code, 422)
        self.assertIn("metadata.uid", status["message"])

    def test_creation_timestamp_is_kept(self):
        """creationTimestamp sent by a client is ignored on update."""
        body = dict(self.created, data={"z": "1"})
        body["metadata"] = dict(body["metadata"], creationTimestamp="2000-01-01T00:00:00Z")
        code, obj, _ = self.api.call("PUT", CM + "/a", body)
        self.assertEqual(code, 200)
        self.assertEqual(obj["metadata"]["creationTimestamp"],
                         self.created["metadata"]["creationTimestamp"])


class PatchTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.api.call("POST", CM, configmap("a", {"a": "1", "b": "2"}))

    def test_merge_patch(self):
        """A merge patch sets and removes keys."""
        code, obj, _ = self.api.call("PATCH", CM + "/a", {"data": {"a": None, "c": "3"}},
                                     content_type=MERGE_PATCH)
        self.assertEqual((code, obj["data"]), (200, {"b": "2", "c": "3"}))

    def test_json_patch(self):
        """A JSON patch applies its operations."""
        ops = [{"op": "replace", "path": "/data/a", "value": "9"},
               {"op": "remove", "path": "/data/b"}]
        code, obj, _ = self.api.call("PATCH", CM + "/a", ops, content_type=JSON_PATCH)
        self.assertEqual((code, obj["data"]), (200, {"a": "9"}))

    def test_failed_json_patch_test_is_422(self):
        """A JSON patch whose test fails is 422 and changes nothing."""
        ops = [{"op": "test", "path": "/data/a", "value": "nope"},
               {"op": "replace", "path": "/data/a", "value": "9"}]
        self.assertEqual(self.api.call("PATCH", CM + "/a", ops, content_type=JSON_PATCH)[0], 422)
        self.assertEqual(self.api.call("GET", CM + "/a")[1]["data"]["a"], "1")

    def test_strategic_merge_patch(self):
        """A strategic merge patch merges maps like a merge patch."""
        code, obj, _ = self.api.call("PATCH", CM + "/a", {"metadata": {"labels": {"x": "y"}}},
                                     content_type=STRATEGIC_PATCH)
        self.assertEqual((code, obj["metadata"]["labels"]), (200, {"x": "y"}))

    def test_strategic_merge_keys(self):
        """Lists with a merge key (Service ports) merge by that key."""
        svc = "/api/v1/namespaces/default/services"
        self.api.call("POST", svc, {"metadata": {"name": "s"}, "spec": {"ports": [
            {"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}})
        code, obj, _ = self.api.call("PATCH", svc + "/s", {"spec": {"ports": [
            {"port": 443, "name": "tls"}, {"port": 8080, "name": "alt"}]}},
            content_type=STRATEGIC_PATCH)
        self.assertEqual(code, 200)
        self.assertEqual([(p["port"], p.get("name")) for p in obj["spec"]["ports"]],
                         [(80, "http"), (443, "tls"), (8080, "alt")])

    def test_patch_missing_is_404(self):
        """Patching a missing object is 404."""
        self.assertEqual(self.api.call("PATCH", CM + "/zz", {}, content_type=MERGE_PATCH)[0], 404)

    def test_unknown_patch_type_is_415(self):
        """A PATCH body in another media type is 415."""
        code, status, _ = self.api.call("PATCH", CM + "/a", {}, content_type=b"application/json")
        self.assertEqual(code, 415)
        self.assertIn("application/merge-patch+json", status["message"])

    def test_patch_cannot_change_kind(self):
        """A patch that changes kind is refused with 400."""
        code, _, _ = self.api.call("PATCH", CM + "/a", {"kind": "Secret"},
                                   content_type=MERGE_PATCH)
        self.assertEqual(code, 400)

    def test_patch_with_stale_resource_version_is_409(self):
        """A patch that pins an old resourceVersion conflicts."""
        code, _, _ = self.api.call("PATCH", CM + "/a", {"metadata": {"resourceVersion": "1"}},
                                   content_type=MERGE_PATCH)
        self.assertEqual(code, 409)

    def test_force_is_only_for_apply(self):
        """force on a non-apply patch is refused."""
        code, status, _ = self.api.call("PATCH", CM + "/a?force=true", {},
                                        content_type=MERGE_PATCH)
        self.assertEqual(code, 422)
        self.assertIn("force: Forbidden: may not be specified for non-apply patch",
                      status["message"])


class ListTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        for name, labels in (("a", {"app": "web"}), ("b", {"app": "db"}), ("c", {})):
            self.api.call("POST", CM, configmap(name, labels=labels))
        self.api.call("POST", "/api/v1/namespaces/orch-system/configmaps", configmap("d"))

    def names(self, path):
        code, body, _ = self.api.call("GET", path)
        self.assertEqual(code, 200, body)
        return [item["metadata"]["name"] for item in body["items"]]

    def test_list_namespace(self):
        """A namespace's list holds its objects, in name order, with a list kind."""
        code, body, _ = self.api.call("GET", CM)
        self.assertEqual((body["kind"], body["apiVersion"]), ("ConfigMapList", "v1"))
        self.assertEqual(self.names(CM), ["a", "b", "c"])
        self.assertTrue(body["metadata"]["resourceVersion"].isdigit())

    def test_list_all_namespaces(self):
        """The cluster-wide path lists every namespace."""
        self.assertEqual(sorted(self.names("/api/v1/configmaps")), ["a", "b", "c", "d"])

    def test_empty_list_has_items(self):
        """An empty list has items: [] (not null)."""
        _, body, _ = self.api.call("GET", "/api/v1/namespaces/orch-public/secrets")
        self.assertEqual(body["items"], [])

    def test_label_selector(self):
        """Label selectors filter the list."""
        self.assertEqual(self.names(CM + "?labelSelector=app%3Dweb"), ["a"])
        self.assertEqual(self.names(CM + "?labelSelector=app"), ["a", "b"])
        self.assertEqual(self.names(CM + "?labelSelector=app%20notin%20(web)"), ["b", "c"])
        self.assertEqual(self.names(CM + "?labelSelector=!app"), ["c"])

    def test_bad_label_selector_is_400(self):
        """A malformed selector is 400."""
        self.assertEqual(self.api.call("GET", CM + "?labelSelector=a%20in%20(")[0], 400)

    def test_field_selector(self):
        """metadata.name and metadata.namespace select everywhere; others are 400."""
        self.assertEqual(self.names(CM + "?fieldSelector=metadata.name%3Db"), ["b"])
        self.assertEqual(
            self.names("/api/v1/configmaps?fieldSelector=metadata.namespace!%3Ddefault"), ["d"])
        code, status, _ = self.api.call("GET", CM + "?fieldSelector=spec.x%3D1")
        self.assertEqual(code, 400)
        self.assertEqual(status["message"], '"spec.x" is not a known field selector: only '
                                            '"metadata.name", "metadata.namespace"')

    def test_limit_and_continue(self):
        """Pages of limit items chain through continue tokens at one revision."""
        code, page, _ = self.api.call("GET", CM + "?limit=2")
        self.assertEqual([i["metadata"]["name"] for i in page["items"]], ["a", "b"])
        self.assertEqual(page["metadata"]["remainingItemCount"], 1)
        self.api.call("POST", CM, configmap("bb"))
        token = page["metadata"]["continue"]
        code, rest, _ = self.api.call("GET", CM + "?limit=2&continue=" + token)
        self.assertEqual([i["metadata"]["name"] for i in rest["items"]], ["c"])
        self.assertNotIn("continue", rest["metadata"])
        self.assertEqual(rest["metadata"]["resourceVersion"], page["metadata"]["resourceVersion"])

    def test_bad_continue_is_400(self):
        """A continue token the server did not make is 400."""
        self.assertEqual(self.api.call("GET", CM + "?continue=garbage")[0], 400)

    def test_resource_version_match_needs_version(self):
        """resourceVersionMatch without resourceVersion is 422 on ListOptions."""
        code, status, _ = self.api.call("GET", CM + "?resourceVersionMatch=Exact")
        self.assertEqual(code, 422)
        self.assertEqual(status["details"]["group"], "meta.k8s.io")
        self.assertIn("resourceVersionMatch is forbidden unless resourceVersion is provided",
                      status["message"])

    def test_exact_resource_version(self):
        """resourceVersionMatch=Exact reads the list as it was then."""
        _, page, _ = self.api.call("GET", CM)
        version = page["metadata"]["resourceVersion"]
        self.api.call("DELETE", CM + "/a")
        self.assertEqual(self.names(CM), ["b", "c"])
        self.assertEqual(self.names(f"{CM}?resourceVersion={version}&resourceVersionMatch=Exact"),
                         ["a", "b", "c"])


class DeleteTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        _, self.created, _ = self.api.call("POST", CM, configmap("a", labels={"x": "1"}))

    def test_delete_returns_success_status(self):
        """A delete answers a Success Status naming the object and removes it."""
        code, status, _ = self.api.call("DELETE", CM + "/a")
        self.assertEqual(code, 200)
        self.assertEqual(status["status"], "Success")
        self.assertEqual(status["details"], {"name": "a", "kind": "configmaps",
                                             "uid": self.created["metadata"]["uid"]})
        self.assertEqual(self.api.call("GET", CM + "/a")[0], 404)

    def test_delete_missing_is_404(self):
        """Deleting a missing object is 404."""
        self.assertEqual(self.api.call("DELETE", CM + "/zz")[0], 404)

    def test_uid_precondition(self):
        """A uid precondition that does not match is 409 and keeps the object."""
        code, status, _ = self.api.call("DELETE", CM + "/a", {"preconditions": {"uid": "x"}})
        self.assertEqual(code, 409)
        self.assertIn("Precondition failed: UID in precondition: x", status["message"])
        self.assertEqual(self.api.call("GET", CM + "/a")[0], 200)

    def test_finalizers_hold_the_object(self):
        """An object with finalizers stays, marked deleted, until they are removed."""
        body = dict(self.api.call("GET", CM + "/a")[1])
        body["metadata"]["finalizers"] = ["example.com/hold"]
        self.api.call("PUT", CM + "/a", body)
        code, obj, _ = self.api.call("DELETE", CM + "/a")
        self.assertEqual(code, 200)
        self.assertTrue(obj["metadata"]["deletionTimestamp"])
        self.assertEqual(self.api.call("GET", CM + "/a")[0], 200)
        code, _, _ = self.api.call("PATCH", CM + "/a", {"metadata": {"finalizers": None}},
                                   content_type=MERGE_PATCH)
        self.assertEqual(code, 200)
        self.assertEqual(self.api.call("GET", CM + "/a")[0], 404)

    def test_dry_run_delete_keeps_object(self):
        """dryRun=All on delete removes nothing."""
        self.assertEqual(self.api.call("DELETE", CM + "/a?dryRun=All")[0], 200)
        self.assertEqual(self.api.call("GET", CM + "/a")[0], 200)

    def test_deletecollection(self):
        """A collection DELETE removes the selected objects and returns them as a list."""
        self.api.call("POST", CM, configmap("b"))
        code, body, _ = self.api.call("DELETE", CM + "?labelSelector=x%3D1")
        self.assertEqual((code, body["kind"]), (200, "ConfigMapList"))
        self.assertEqual([i["metadata"]["name"] for i in body["items"]], ["a"])
        _, left, _ = self.api.call("GET", CM)
        self.assertEqual([i["metadata"]["name"] for i in left["items"]], ["b"])


class AuthorizationTests(SynchronousTestCase):
    def test_anonymous_reaches_only_public_paths(self):
        """Under the bootstrap policy anonymous users may read health and /version only."""
        api = APIHarness(rbac=True)
        report = api.run(reconcile_bootstrap_policy(api.catalog))
        self.assertTrue(report.ok, report)
        api.as_user(None)
        self.assertEqual(api.call("GET", "/readyz")[0], 200)
        self.assertEqual(api.call("GET", "/livez")[0], 200)
        self.assertEqual(api.call("GET", "/livez/ping")[0], 403)
        self.assertEqual(api.call("GET", "/version")[0], 200)
        code, status, _ = api.call("GET", CM)
        self.assertEqual(code, 403)
        self.assertEqual(status["message"], 'configmaps is forbidden: User "system:anonymous" '
                         'cannot list resource "configmaps" in API group "" in the namespace '
                         '"default"')
        code, status, _ = api.call("GET", "/apis")
        self.assertEqual(code, 403)
        self.assertEqual(status["message"],
                         'forbidden: User "system:anonymous" cannot get path "/apis"')

    def test_always_deny_spares_masters(self):
        """With AlwaysDeny only system:masters gets through."""
        api = APIHarness(authorizers=[PrivilegedGroups(), AlwaysDeny()])
        self.assertEqual(api.call("GET", CM)[0], 200)
        api.as_user(ALICE)
        code, status, _ = api.call("GET", CM + "/a")
        self.assertEqual(code, 403)
        self.assertEqual(status["message"], 'configmaps "a" is forbidden: User "alice" cannot get '
                         'resource "configmaps" in API group "" in the namespace "default": '
                         "Everything is forbidden.")


class SubresourceTests(SynchronousTestCase):
    PODS = "/api/v1/namespaces/default/pods"

    def setUp(self):
        self.api = APIHarness()
        code, self.pod, _ = self.api.call("POST", self.PODS, {
            "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running"}})
        self.assertEqual(code, 201)

    def test_create_drops_status(self):
        """Status of a kind with a status subresource is not set by create (a pod's is the server's)."""
        self.assertEqual(self.pod["status"], {"phase": "Pending", "qosClass": "BestEffort"})

    def test_status_only_through_subresource(self):
        """The main resource keeps status; the status subresource changes only status."""
        body = dict(self.pod, status={"phase": "Failed"})
        _, obj, _ = self.api.call("PUT", self.PODS + "/p", body)
        self.assertEqual(obj["status"], self.pod["status"])
        body = dict(self.pod, status={"phase": "Running"})
        body["metadata"] = dict(body["metadata"], labels={"ignored": "yes"})
        code, obj, _ = self.api.call("PUT", self.PODS + "/p/status", body)
        self.assertEqual((code, obj["status"]), (200, {"phase": "Running"}))
        self.assertNotIn("labels", obj["metadata"])
        self.assertEqual(obj["metadata"]["generation"], 1)
        code, obj, _ = self.api.call("PATCH", self.PODS + "/p/status",
                                     {"status": {"phase": "Succeeded"}}, content_type=MERGE_PATCH)
        self.assertEqual((code, obj["status"]["phase"]), (200, "Succeeded"))
        self.assertEqual(self.api.call("GET", self.PODS + "/p/status")[1]["status"]["phase"],
                         "Succeeded")

    def test_unknown_subresource_is_404(self):
        """A subresource the kind does not have is 404."""
        self.assertEqual(self.api.call("GET", CM + "/a/status")[0], 404)

    def test_subresource_verbs(self):
        """A subresource allows only its own verbs."""
        self.assertEqual(self.api.call("GET", "/api/v1/namespaces/default/finalize")[0], 405)
        self.assertEqual(self.api.call("DELETE", self.PODS + "/p/status")[0], 405)


class VersionEnablementTests(SynchronousTestCase):
    FLOW = "/apis/flowcontrol.apiserver.orch.io/v1beta2/flowschemas"

    def test_beta_off_by_default(self):
        """A beta version is not served unless --runtime-config turns it on."""
        api = APIHarness()
        self.assertEqual(api.call("GET", self.FLOW)[0], 404)
        _, groups, _ = api.call("GET", "/apis")
        self.assertNotIn("flowcontrol.apiserver.orch.io", [g["name"] for g in groups["groups"]])

    def test_runtime_config_enables_version(self):
        """--runtime-config=<group>/<version> serves the version."""
        api = APIHarness(runtime_config="flowcontrol.apiserver.orch.io/v1beta2")
        self.assertEqual(api.call("GET", self.FLOW)[0], 200)
        code, _, _ = api.call("POST", self.FLOW, {"metadata": {"name": "f"}, "spec": {}})
        self.assertEqual(code, 201)

    def test_runtime_config_disables_version(self):
        """<group>/<version>=false stops serving a stable version."""
        api = APIHarness(runtime_config="batch/v1=false")
        self.assertEqual(api.call("GET", "/apis/batch/v1/namespaces/default/jobs")[0], 404)

    def test_no_pod_security_policy(self):
        """PodSecurityPolicy does not exist."""
        api = APIHarness(runtime_config="api/all=true")
        self.assertEqual(api.call("GET", "/apis/policy/v1beta1/podsecuritypolicies")[0], 404)
        _, resources, _ = api.call("GET", "/apis/policy/v1")
        self.assertNotIn("podsecuritypolicies", [r["name"] for r in resources["resources"]])


class PropagationTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.api.call("POST", CM, configmap("owner"))

    def test_foreground_and_orphan_hold_the_owner(self):
        """Foreground and Orphan deletes leave the owner marked, with their finalizer."""
        for policy, finalizer in (("Foreground", "foregroundDeletion"), ("Orphan", "orphan")):
            self.api.call("POST", CM, configmap("o-" + policy.lower()))
            code, obj, _ = self.api.call("DELETE", f"{CM}/o-{policy.lower()}",
                                         {"propagationPolicy": policy})
            self.assertEqual(code, 200)
            self.assertEqual(obj["metadata"]["finalizers"], [finalizer])
            self.assertTrue(obj["metadata"]["deletionTimestamp"])

    def test_background_removes_at_once(self):
        """A Background delete removes the object at once."""
        code, status, _ = self.api.call("DELETE", CM + "/owner?propagationPolicy=Background")
        self.assertEqual((code, status["status"]), (200, "Success"))

    def test_orphan_dependents_false_is_202_when_held(self):
        """The legacy orphanDependents=false answers 202 when the object remains."""
        body = self.api.call("GET", CM + "/owner")[1]
        body["metadata"]["finalizers"] = ["x.io/hold"]
        self.api.call("PUT", CM + "/owner", body)
        code, _, _ = self.api.call("DELETE", CM + "/owner", {"orphanDependents": False})
        self.assertEqual(code, 202)

    def test_both_policies_is_422(self):
        """orphanDependents and propagationPolicy together are refused."""
        code, _, _ = self.api.call("DELETE", CM + "/owner", {"orphanDependents": True,
                                                             "propagationPolicy": "Orphan"})
        self.assertEqual(code, 422)

    def test_grace_must_be_an_integer(self):
        """gracePeriodSeconds that is not an integer is refused; a negative one is taken."""
        self.assertEqual(self.api.call("DELETE", CM + "/owner",
                                       {"gracePeriodSeconds": 1.5})[0], 422)
        self.assertEqual(self.api.call("DELETE", CM + "/owner",
                                       {"gracePeriodSeconds": -1})[0], 200)


class KindFieldSelectorTests(SynchronousTestCase):
    def test_pod_fields(self):
        """Pods select by spec.nodeName and status.phase; hostNetwork defaults to false."""
        api = APIHarness()
        pods = "/api/v1/namespaces/default/pods"
        for name, node in (("p1", "n1"), ("p2", "n2"), ("p3", None)):
            spec = {"containers": [{"name": "c", "image": "i"}]}
            if node:
                spec["nodeName"] = node
            api.call("POST", pods, {"metadata": {"name": name}, "spec": spec})
        api.call("PUT", pods + "/p1/status", dict(api.call("GET", pods + "/p1")[1],
                                                   status={"phase": "Running"}))

        def names(selector):
            code, body, _ = api.call("GET", f"{pods}?fieldSelector={selector}")
            self.assertEqual(code, 200, body)
            return [i["metadata"]["name"] for i in body["items"]]

        self.assertEqual(names("spec.nodeName%3Dn2"), ["p2"])
        self.assertEqual(names("spec.nodeName%3D"), ["p3"])
        self.assertEqual(names("status.phase%3DRunning"), ["p1"])
        self.assertEqual(names("spec.hostNetwork%3Dfalse"), ["p1", "p2", "p3"])
        self.assertEqual(names("spec.nodeName!%3Dn1,status.phase!%3DRunning"), ["p2", "p3"])
        code, status, _ = api.call("GET", pods + "?fieldSelector=spec.image%3Dx")
        self.assertEqual(code, 400)
        self.assertEqual(status["message"], "field label not supported: spec.image")

    def test_node_unschedulable(self):
        """Nodes select by spec.unschedulable."""
        api = APIHarness()
        api.call("POST", "/api/v1/nodes", {"metadata": {"name": "a"}, "spec": {"unschedulable": True}})
        api.call("POST", "/api/v1/nodes", {"metadata": {"name": "b"}})
        _, body, _ = api.call("GET", "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dfalse")
        self.assertEqual([i["metadata"]["name"] for i in body["items"]], ["b"])


class ListGateTests(SynchronousTestCase):
    def test_remaining_item_count_gate(self):
        """RemainingItemCount=false leaves the count out of chunked lists."""
        for gates, expected in (("", True), ("RemainingItemCount=false", False)):
            api = APIHarness(feature_gates=gates)
            for name in "abc":
                api.call("POST", CM, configmap(name))
            _, page, _ = api.call("GET", CM + "?limit=1")
            self.assertEqual("remainingItemCount" in page["metadata"], expected)
            self.assertIn("continue", page["metadata"])

    def test_expired_continue_offers_fresh_token(self):
        """A continue token of a compacted snapshot is 410 with a token from the latest state."""
        api = APIHarness()
        for name in "abc":
            api.call("POST", CM, configmap(name))
        _, page, _ = api.call("GET", CM + "?limit=1")
        api.call("POST", CM, configmap("d"))
        api.store.compact(int(page["metadata"]["resourceVersion"]) + 1)
        code, status, _ = api.call("GET", CM + "?limit=1&continue=" + page["metadata"]["continue"])
        self.assertEqual((code, status["reason"]), (410, "Expired"))
        token = status["metadata"]["continue"]
        _, rest, _ = api.call("GET", CM + "?limit=10&continue=" + token)
        self.assertEqual([i["metadata"]["name"] for i in rest["items"]], ["b", "c", "d"])


class PagingTests(SynchronousTestCase):
    def test_remaining_counts_across_pages(self):
        """Every page of a chunked list counts what remains after it, to the last page."""
        api = APIHarness()
        for name in "abcde":
            api.call("POST", CM, configmap(name))
        seen, counts, token = [], [], ""
        while True:
            _, page, _ = api.call("GET", f"{CM}?limit=2" + (f"&continue={token}" if token else ""))
            seen += [i["metadata"]["name"] for i in page["items"]]
            counts.append(page["metadata"].get("remainingItemCount"))
            token = page["metadata"].get("continue")
            if not token:
                break
        self.assertEqual(seen, list("abcde"))
        self.assertEqual(counts, [3, 1, None])


class DeleteAnswerTests(SynchronousTestCase):
    """DELETE answers as each kind's upstream delete operation does."""

    def setUp(self):
        self.api = APIHarness()

    def test_object_for_the_kinds_that_answer_it(self):
        """A removed pod, service or storage class is answered with the object, not a Status."""
        for path, body in (
                ("/api/v1/namespaces/default/pods",
                 {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c",
                                                                      "image": "i"}]}}),
                ("/api/v1/namespaces/default/services",
                 {"metadata": {"name": "p"}, "spec": {"ports": [{"port": 80}]}}),
                ("/apis/storage.orch.io/v1/storageclasses",
                 {"metadata": {"name": "p"}, "provisioner": "x"})):
            _, created, _ = self.api.call("POST", path, body)
            code, obj, _ = self.api.call("DELETE", path + "/p")
            self.assertEqual((code, obj["kind"]), (200, created["kind"]), path)
            self.assertEqual(obj["metadata"]["uid"], created["metadata"]["uid"])
            self.assertEqual(self.api.call("GET", path + "/p")[0], 404)

    def test_status_for_the_others(self):
        """A removed ConfigMap is answered with a Success Status, as upstream."""
        self.api.call("POST", CM, {"metadata": {"name": "a"}})
        code, obj, _ = self.api.call("DELETE", CM + "/a")
        self.assertEqual((code, obj["kind"], obj["status"]), (200, "Status", "Success"))

    def test_object_that_stays(self):
        """An object held by a finalizer is answered with its deletionTimestamp, whatever its kind."""
        for path in ("/api/v1/namespaces/default/services", CM):
            body = {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
            if "services" in path:
                body["spec"] = {"ports": [{"port": 80}]}
            self.api.call("POST", path, body)
            code, obj, _ = self.api.call("DELETE", path + "/held")
            self.assertEqual(code, 200)
            self.assertTrue(obj["metadata"]["deletionTimestamp"], path)
