"""
CustomResourceDefinitions: validation of the definition, the status the
server writes, the cleanup finalizer and the kinds served from them.
"""

import copy

from twisted.trial.unittest import SynchronousTestCase

from orchd.registry.kinds.crdvalidation import validate_definition
from tests.crdfixtures import CRDS, WIDGETS, condition, widget, widget_crd
from tests.support import APIHarness


def _fields(body):
    return [(cause.get("field"), cause["message"]) for cause in body["details"]["causes"]]


class DefinitionValidationTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def invalid(self, crd):
        code, body, _ = self.api.call("POST", CRDS, crd)
        self.assertEqual(code, 422, body)
        return _fields(body)

    def test_name_must_be_plural_dot_group(self):
        """A definition named other than <plural>.<group> is refused on metadata.name."""
        crd = widget_crd()
        crd["metadata"]["name"] = "gadgets.example.com"
        self.assertIn(("metadata.name",
                       'Invalid value: "gadgets.example.com": must be spec.names.plural+"."+'
                       'spec.group'), self.invalid(crd))

    def test_group_needs_a_dot(self):
        """A group without a dot is refused, as upstream."""
        crd = widget_crd(group="example")
        self.assertIn(("spec.group",
                       'Invalid value: "example": should be a domain with at least one dot'),
                      self.invalid(crd))

    def test_exactly_one_storage_version(self):
        """Two storage versions are refused on spec.versions."""
        crd = widget_crd()
        second = copy.deepcopy(crd["spec"]["versions"][0])
        second["name"] = "v2"
        crd["spec"]["versions"].append(second)
        messages = [m for f, m in self.invalid(crd) if f == "spec.versions"]
        self.assertTrue(any("must have exactly one version marked as storage version" in m
                            for m in messages), messages)

    def test_no_versions(self):
        """A definition without versions is refused."""
        crd = widget_crd(versions=[])
        self.assertIn("spec.versions", [f for f, _ in self.invalid(crd)])

    def test_duplicate_version_names(self):
        """Versions with the same name are refused."""
        crd = widget_crd()
        second = copy.deepcopy(crd["spec"]["versions"][0])
        second["storage"] = False
        crd["spec"]["versions"].append(second)
        messages = [m for f, m in self.invalid(crd) if f == "spec.versions"]
        self.assertTrue(any("must contain unique version names" in m for m in messages))

    def test_schema_required(self):
        """Every version needs an openAPIV3Schema."""
        crd = widget_crd()
        del crd["spec"]["versions"][0]["schema"]
        self.assertIn(("spec.versions[0].schema.openAPIV3Schema",
                       "Required value: schemas are required"), self.invalid(crd))

    def test_schema_must_be_structural(self):
        """A schema with a property of no type is refused under the version's schema path."""
        crd = widget_crd()
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
            "properties"]["loose"] = {"description": "no type"}
        fields = [f for f, _ in self.invalid(crd)]
        self.assertTrue(any(f and f.startswith("spec.versions[0].schema.openAPIV3Schema")
                            for f in fields), fields)

    def test_webhook_conversion_refused(self):
        """Webhook conversion is refused with a clear message instead of never converting."""
        crd = widget_crd()
        crd["spec"]["conversion"] = {"strategy": "Webhook"}
        fields = self.invalid(crd)
        self.assertIn("spec.conversion.strategy", [f for f, _ in fields])
        self.assertIn("Webhook conversion is not supported", str(fields))

    def test_bad_scope(self):
        """A scope other than Cluster or Namespaced is refused."""
        crd = widget_crd(scope="Global")
        self.assertIn(("spec.scope",
                       'Unsupported value: "Global": supported values: "Cluster", "Namespaced"'),
                      self.invalid(crd))

    def test_bad_names(self):
        """Kind equal to listKind, and a short name that is no DNS-1035 label, are refused."""
        crd = widget_crd(names={"plural": "widgets", "kind": "Widget", "listKind": "Widget",
                                "shortNames": ["Bad_Name"]})
        fields = [f for f, _ in self.invalid(crd)]
        self.assertIn("spec.names.listKind", fields)
        self.assertIn("spec.names.shortNames[0]", fields)

    def test_printer_column_path(self):
        """A printer column whose jsonPath is no simple path is refused."""
        crd = widget_crd(additionalPrinterColumns=[
            {"name": "X", "type": "string", "jsonPath": "spec.replicas"}])
        self.assertIn("spec.versions[0].additionalPrinterColumns[0].jsonPath",
                      [f for f, _ in self.invalid(crd)])

    def test_selectable_field_must_exist(self):
        """A selectable field the schema does not name is refused."""
        crd = widget_crd(selectableFields=[{"jsonPath": ".spec.nothing"}])
        self.assertIn("spec.versions[0].selectableFields[0].jsonPath",
                      [f for f, _ in self.invalid(crd)])

    def test_scale_paths(self):
        """A scale subresource's spec replicas path must be under .spec."""
        crd = widget_crd(subresources={"scale": {"specReplicasPath": ".status.replicas",
                                                 "statusReplicasPath": ".status.replicas"}})
        self.assertIn("spec.versions[0].subresources.scale.specReplicasPath",
                      [f for f, _ in self.invalid(crd)])

    def test_valid_definition_has_no_errors(self):
        """The fixture definition is valid once defaulted."""
        crd = widget_crd()
        crd["spec"]["conversion"] = {"strategy": "None"}
        crd["spec"]["names"].update(singular="widget", listKind="WidgetList")
        self.assertEqual(validate_definition(crd), [])


class DefinitionStatusTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def create(self, crd):
        code, body, _ = self.api.call("POST", CRDS, crd)
        self.assertEqual(code, 201, body)
        return body

    def test_established_before_the_create_returns(self):
        """The create answers an Established definition, and a resource created next succeeds."""
        crd = self.create(widget_crd())
        self.assertEqual(condition(crd, "Established")["status"], "True")
        self.assertEqual(condition(crd, "Established")["reason"], "InitialNamesAccepted")
        self.assertEqual(condition(crd, "NamesAccepted")["reason"], "NoConflicts")
        self.assertEqual(crd["status"]["storedVersions"], ["v1"])
        self.assertEqual(crd["status"]["acceptedNames"]["listKind"], "WidgetList")
        code, body, _ = self.api.call("POST", WIDGETS, widget("w1", replicas=1))
        self.assertEqual(code, 201, body)

    def test_failed_create_keeps_what_was_served(self):
        """A second create of a served definition (409) leaves its kinds as they were."""
        self.create(widget_crd())
        again = widget_crd(additionalPrinterColumns=[
            {"name": "Other", "type": "string", "jsonPath": ".spec.color"}])
        code, _, _ = self.api.call("POST", CRDS, again)
        self.assertEqual(code, 409)
        info = self.api.catalog.lookup("example.com", "v1", "widgets")[0]
        self.assertEqual([c["name"] for c in info.printer.definitions()],
                         ["Name", "Replicas", "Color"])

    def test_dry_run_serves_nothing(self):
        """A dry-run create answers an established definition but serves no kind."""
        code, body, _ = self.api.call("POST", CRDS + "?dryRun=All", widget_crd())
        self.assertEqual(code, 201)
        self.assertEqual(condition(body, "Established")["status"], "True")
        self.assertEqual(self.api.call("GET", WIDGETS)[0], 404)

    def test_defaults_and_finalizer(self):
        """Conversion None, singular and listKind are defaulted; the cleanup finalizer is added."""
        crd = self.create(widget_crd())
        self.assertEqual(crd["spec"]["conversion"], {"strategy": "None"})
        self.assertEqual(crd["spec"]["names"]["singular"], "widget")
        self.assertEqual(crd["metadata"]["finalizers"],
                         ["customresourcecleanup.apiextensions.k8s.io"])

    def test_status_in_the_body_is_ignored(self):
        """A create cannot claim conditions of its own: the server writes the status."""
        crd = widget_crd()
        crd["status"] = {"storedVersions": ["v9"], "conditions": [
            {"type": "Established", "status": "False", "reason": "Mine", "message": ""}]}
        body = self.create(crd)
        self.assertEqual(body["status"]["storedVersions"], ["v1"])
        self.assertEqual(condition(body, "Established")["status"], "True")

    def test_kind_conflict(self):
        """A second definition of the group with the same kind is not accepted nor served."""
        self.create(widget_crd())
        other = self.create(widget_crd(names={"plural": "gadgets", "singular": "gadget",
                                              "kind": "Widget"}))
        accepted = condition(other, "NamesAccepted")
        self.assertEqual((accepted["status"], accepted["reason"], accepted["message"]),
                         ("False", "KindConflict", '"Widget" is already in use'))
        self.assertEqual(condition(other, "Established")["status"], "False")
        code, _, _ = self.api.call("GET", "/apis/example.com/v1/namespaces/default/gadgets")
        self.assertEqual(code, 404)

    def test_short_name_conflict(self):
        """A short name another definition of the group holds is a ShortNamesConflict."""
        self.create(widget_crd())
        other = self.create(widget_crd(names={"plural": "gadgets", "kind": "Gadget",
                                              "shortNames": ["wd"]}))
        accepted = condition(other, "NamesAccepted")
        self.assertEqual((accepted["reason"], accepted["message"]),
                         ("ShortNamesConflict", '"wd" is already in use'))

    def test_other_group_no_conflict(self):
        """The same names in another group do not conflict."""
        self.create(widget_crd())
        other = self.create(widget_crd(group="other.io"))
        self.assertEqual(condition(other, "NamesAccepted")["status"], "True")

    def update(self, crd, code=200):
        name = crd["metadata"]["name"]
        status, body, _ = self.api.call("PUT", f"{CRDS}/{name}", crd)
        self.assertEqual(status, code, body)
        return body

    def test_scope_immutable(self):
        """The scope of a definition cannot change."""
        crd = self.create(widget_crd())
        crd["spec"]["scope"] = "Cluster"
        body = self.update(crd, 422)
        self.assertIn(("spec.scope", 'Invalid value: "Cluster": field is immutable'),
                      _fields(body))

    def test_new_version_served_and_storage_moves(self):
        """A version added by an update is served, and storedVersions keeps the old storage."""
        crd = self.create(widget_crd())
        v2 = copy.deepcopy(crd["spec"]["versions"][0])
        v2["name"] = "v2"
        crd["spec"]["versions"][0]["storage"] = False
        crd["spec"]["versions"].append(v2)
        body = self.update(crd)
        self.assertEqual(body["status"]["storedVersions"], ["v1", "v2"])
        code, _, _ = self.api.call("GET", "/apis/example.com/v2/namespaces/default/widgets")
        self.assertEqual(code, 200)

    def test_stored_version_cannot_be_removed(self):
        """A version objects may be stored in cannot leave spec.versions."""
        crd = self.create(widget_crd())
        v2 = copy.deepcopy(crd["spec"]["versions"][0])
        v2["name"] = "v2"
        crd["spec"]["versions"] = [v2]
        body = self.update(crd, 422)
        self.assertIn("status.storedVersions[0]", [f for f, _ in _fields(body)])

    def test_unserved_version_unregistered(self):
        """A version no longer served stops being served at once."""
        crd = self.create(widget_crd())
        v2 = copy.deepcopy(crd["spec"]["versions"][0])
        v2.update(name="v2", storage=False)
        crd["spec"]["versions"].append(v2)
        crd = self.update(crd)
        crd["spec"]["versions"][1]["served"] = False
        self.update(crd)
        code, _, _ = self.api.call("GET", "/apis/example.com/v2/namespaces/default/widgets")
        self.assertEqual(code, 404)
        code, _, _ = self.api.call("GET", WIDGETS)
        self.assertEqual(code, 200)


class DefinitionDeletionTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "other"}})
        code, body, _ = self.api.call("POST", CRDS, widget_crd())
        self.assertEqual(code, 201, body)

    def test_delete_removes_resources_then_definition(self):
        """Deleting a definition deletes its resources in every namespace, then itself."""
        self.api.call("POST", WIDGETS, widget("a"))
        self.api.call("POST", "/apis/example.com/v1/namespaces/other/widgets", widget("b"))
        code, body, _ = self.api.call("DELETE", f"{CRDS}/widgets.example.com")
        self.assertEqual(code, 200, body)
        self.api.clock.advance(0)
        code, _, _ = self.api.call("GET", f"{CRDS}/widgets.example.com")
        self.assertEqual(code, 404)
        self.assertEqual(self.successResultOf(self.api.store.list("/registry/example.com/")).items, [])
        code, _, _ = self.api.call("GET", WIDGETS)
        self.assertEqual(code, 404)

    def test_resource_finalizers_hold_the_definition(self):
        """A resource's finalizer holds the definition, Terminating, until it goes."""
        held = widget("held")
        held["metadata"]["finalizers"] = ["example.com/hold"]
        self.api.call("POST", WIDGETS, held)
        self.api.call("DELETE", f"{CRDS}/widgets.example.com")
        self.api.clock.advance(5)
        code, crd, _ = self.api.call("GET", f"{CRDS}/widgets.example.com")
        self.assertEqual(code, 200)
        self.assertEqual(condition(crd, "Terminating")["status"], "True")
        code, body, _ = self.api.call("POST", WIDGETS, widget("late"))
        self.assertEqual(code, 405, body)
        code, obj, _ = self.api.call("GET", f"{WIDGETS}/held")
        self.assertTrue(obj["metadata"]["deletionTimestamp"])
        self.api.call("PATCH", f"{WIDGETS}/held", {"metadata": {"finalizers": None}},
                      content_type=b"application/merge-patch+json")
        self.api.clock.advance(1)
        code, _, _ = self.api.call("GET", f"{CRDS}/widgets.example.com")
        self.assertEqual(code, 404)
