"""Rules of particular kinds: namespaces, ControllerRevisions, ConfigMaps and Secrets."""

import base64

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.namespaces import NamespaceController
from tests.support import APIHarness

NS = "/api/v1/namespaces"
CR = "/apis/apps/v1/namespaces/default/controllerrevisions"
MERGE_PATCH = b"application/merge-patch+json"
JSON_PATCH = b"application/json-patch+json"


class NamespaceTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def test_name_label_set(self):
        """Every namespace carries orch.io/metadata.name = its name."""
        code, ns, _ = self.api.call("POST", NS, {"metadata": {"name": "team-a"}})
        self.assertEqual(code, 201)
        self.assertEqual(ns["metadata"]["labels"], {"orch.io/metadata.name": "team-a"})
        self.assertEqual(ns["status"]["phase"], "Active")

    def test_name_label_cannot_change(self):
        """A change of the name label by update or patch does not stick."""
        self.api.call("POST", NS, {"metadata": {"name": "team-a"}})
        _, ns, _ = self.api.call("PATCH", NS + "/team-a", {"metadata": {"labels": {
            "orch.io/metadata.name": "other", "extra": "yes"}}}, content_type=MERGE_PATCH)
        self.assertEqual(ns["metadata"]["labels"],
                         {"orch.io/metadata.name": "team-a", "extra": "yes"})
        _, ns, _ = self.api.call("PATCH", NS + "/team-a", {"metadata": {"labels": None}},
                                 content_type=MERGE_PATCH)
        self.assertEqual(ns["metadata"]["labels"], {"orch.io/metadata.name": "team-a"})

    def test_namespace_name_is_a_label(self):
        """Namespace names follow the DNS label rule (no dots)."""
        self.assertEqual(self.api.call("POST", NS, {"metadata": {"name": "a.b"}})[0], 422)

    def test_system_namespaces_cannot_be_deleted(self):
        """The system namespaces are refused deletion with 403."""
        for name in ("default", "orch-system", "orch-public", "orch-node-lease"):
            code, status, _ = self.api.call("DELETE", f"{NS}/{name}")
            self.assertEqual(code, 403, name)
            self.assertEqual(status["message"],
                             f'namespaces "{name}" is forbidden: this namespace may not be deleted')

    def test_delete_empties_then_removes(self):
        """Deleting a namespace terminates it, deletes its contents, then removes it."""
        controller = NamespaceController(self.api.catalog, self.api.clock)
        controller.startService()
        self.addCleanup(controller.stopService)
        self.api.call("POST", NS, {"metadata": {"name": "gone"}})
        cms = "/api/v1/namespaces/gone/configmaps"
        self.api.call("POST", cms, {"metadata": {"name": "a"}})
        self.api.call("POST", "/api/v1/namespaces/gone/secrets", {"metadata": {"name": "s"}})
        self.api.call("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "a"}})
        code, ns, _ = self.api.call("DELETE", NS + "/gone")
        self.assertEqual(code, 200)
        self.assertEqual(self.api.call("GET", NS + "/gone")[0], 404)
        self.assertEqual(self.api.call("GET", cms + "/a")[0], 404)
        self.assertEqual(self.api.call("GET", "/api/v1/namespaces/default/configmaps/a")[0], 200)

    def test_terminating_namespace_refuses_new_content(self):
        """While objects with finalizers hold it, a terminating namespace refuses creates."""
        controller = NamespaceController(self.api.catalog, self.api.clock, recheck=5)
        controller.startService()
        self.addCleanup(controller.stopService)
        self.api.call("POST", NS, {"metadata": {"name": "slow"}})
        cms = "/api/v1/namespaces/slow/configmaps"
        self.api.call("POST", cms, {"metadata": {"name": "held", "finalizers": ["x.io/hold"]}})
        code, ns, _ = self.api.call("DELETE", NS + "/slow")
        self.assertEqual((code, ns["status"]["phase"]), (200, "Terminating"))
        self.assertTrue(ns["metadata"]["deletionTimestamp"])
        code, status, _ = self.api.call("POST", cms, {"metadata": {"name": "new"}})
        self.assertEqual(code, 403)
        self.assertEqual(status["message"], 'configmaps "new" is forbidden: unable to create new '
                         "content in namespace slow because it is being terminated")
        self.api.call("PATCH", cms + "/held", {"metadata": {"finalizers": None}},
                      content_type=MERGE_PATCH)
        self.api.clock.advance(5)
        self.assertEqual(self.api.call("GET", NS + "/slow")[0], 404)


class ControllerRevisionTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        code, self.cr, _ = self.api.call("POST", CR, {
            "metadata": {"name": "r1"}, "revision": 1, "data": {"spec": {"replicas": 2}}})
        self.assertEqual(code, 201)

    def test_revision_required(self):
        """revision is required."""
        code, status, _ = self.api.call("POST", CR, {"metadata": {"name": "r2"}})
        self.assertEqual(code, 422)
        self.assertEqual(status["message"],
                         'ControllerRevision.apps "r2" is invalid: revision: Required value')
        self.assertEqual(status["details"]["group"], "apps")

    def test_revision_must_be_non_negative_integer(self):
        """revision is a non-negative integer."""
        for bad in (-1, "3", 1.5):
            code, _, _ = self.api.call("POST", CR, {"metadata": {"name": "r9"}, "revision": bad})
            self.assertEqual(code, 422, bad)

    def test_data_immutable_on_update(self):
        """An update that changes data is 422 field is immutable."""
        body = dict(self.cr, data={"spec": {"replicas": 3}})
        code, status, _ = self.api.call("PUT", CR + "/r1", body)
        self.assertEqual(code, 422)
        self.assertEqual(status["details"]["causes"][0]["field"], "data")
        self.assertIn("field is immutable", status["message"])

    def test_data_immutable_on_patch(self):
        """Every patch type that changes data is 422."""
        for body, ctype in (({"data": {"x": 1}}, MERGE_PATCH),
                            ([{"op": "remove", "path": "/data"}], JSON_PATCH),
                            ({"data": {"spec": {"replicas": 5}}},
                             b"application/strategic-merge-patch+json")):
            self.assertEqual(self.api.call("PATCH", CR + "/r1", body, content_type=ctype)[0], 422)
        self.assertEqual(self.api.call("GET", CR + "/r1")[1]["data"], {"spec": {"replicas": 2}})

    def test_metadata_change_allowed(self):
        """Labels and annotations may change."""
        code, obj, _ = self.api.call("PATCH", CR + "/r1", {"metadata": {"labels": {"a": "b"}}},
                                     content_type=MERGE_PATCH)
        self.assertEqual((code, obj["metadata"]["labels"]), (200, {"a": "b"}))

    def test_delete_allowed(self):
        """A ControllerRevision can be deleted."""
        self.assertEqual(self.api.call("DELETE", CR + "/r1")[0], 200)
        self.assertEqual(self.api.call("GET", CR + "/r1")[0], 404)


class ConfigDataTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def test_bad_config_key(self):
        """ConfigMap keys must be valid config keys."""
        code, status, _ = self.api.call("POST", "/api/v1/namespaces/default/configmaps",
                                        {"metadata": {"name": "a"}, "data": {"bad key": "x"}})
        self.assertEqual(code, 422)
        self.assertIn("data[bad key]", status["message"])

    def test_map_errors_key_by_key(self):
        """A map's keys and values are judged as one by one: valid maps and hostile ones."""
        from orchd.registry.kinds.configdata import _map_errors, config_key_errors

        def one_by_one(values):
            found, size = [], 0
            for key, value in values.items():
                found += [(e.field, e.detail) for e in config_key_errors(key, f"data[{key}]")]
                if isinstance(value, str):
                    size += len(value)
                else:
                    found.append(("type", f"data[{key}]"))
            return found, size

        maps = [{}, {"a": "x", "B-c_d.e": "yy", "0": ""}, {"a" * 253: "v"}, {"a" * 254: "v"},
                {"a\n": "v"}, {".a": "v"}, {".": "v"}, {"..": "v"}, {"..a": "v"}, {"": "v"},
                {"a\x00b": "v"}, {"a": "v", "\x00": "w"}, {"ключ": "v"}, {"a": 1},
                {"a": None, "b": "v"}, {"a.": "v", "-": "w", "_": "x"}, {"a b": "v"},
                {"a": ["x"], "b": "yy"}, {"a": {"b": "c"}}, {"a": "é" * 3, "b": "v" * 180}]
        for values in maps:
            errors, size = _map_errors({"data": values}, "data")
            found = [(e.field, e.detail) if e.type != "FieldValueTypeInvalid" else
                     ("type", e.field) for e in errors]
            self.assertEqual((found, size), one_by_one(values), values)

    def test_config_key_with_final_newline(self):
        """A config key ending in a newline is refused, as upstream's expression refuses it."""
        code, status, _ = self.api.call("POST", "/api/v1/namespaces/default/configmaps",
                                        {"metadata": {"name": "a"}, "data": {"key\n": "x"}})
        self.assertEqual(code, 422)
        self.assertIn("data[key\n]", status["message"])

    def test_immutable_configmap(self):
        """An immutable ConfigMap's data cannot change, nor can it become mutable."""
        path = "/api/v1/namespaces/default/configmaps"
        self.api.call("POST", path, {"metadata": {"name": "a"}, "data": {"k": "v"},
                                     "immutable": True})
        for patch in ({"data": {"k": "w"}}, {"immutable": False}):
            self.assertEqual(
                self.api.call("PATCH", path + "/a", patch, content_type=MERGE_PATCH)[0], 422)

    def test_secret_string_data_folds_into_data(self):
        """stringData is stored base64-encoded in data; type defaults to Opaque."""
        code, secret, _ = self.api.call("POST", "/api/v1/namespaces/default/secrets",
                                        {"metadata": {"name": "s"}, "stringData": {"p": "pw"}})
        self.assertEqual(code, 201)
        self.assertEqual(secret["data"], {"p": base64.b64encode(b"pw").decode()})
        self.assertNotIn("stringData", secret)
        self.assertEqual(secret["type"], "Opaque")

    def test_secret_type_immutable(self):
        """A secret's type cannot change."""
        path = "/api/v1/namespaces/default/secrets"
        self.api.call("POST", path, {"metadata": {"name": "s"}})
        code, _, _ = self.api.call("PATCH", path + "/s", {"type": "orch.io/basic-auth"},
                                   content_type=MERGE_PATCH)
        self.assertEqual(code, 422)

    def test_secret_bad_base64_is_400(self):
        """data values must be base64."""
        code, _, _ = self.api.call("POST", "/api/v1/namespaces/default/secrets",
                                   {"metadata": {"name": "s"}, "data": {"k": "!!!"}})
        self.assertEqual(code, 400)

    def test_secret_type_field_selector(self):
        """Secrets can be selected by type."""
        path = "/api/v1/namespaces/default/secrets"
        self.api.call("POST", path, {"metadata": {"name": "a"}})
        self.api.call("POST", path, {"metadata": {"name": "b"}, "type": "orch.io/tls",
                                     "data": {"tls.crt": "", "tls.key": ""}})
        _, body, _ = self.api.call("GET", path + "?fieldSelector=type%3Dorch.io/tls")
        self.assertEqual([i["metadata"]["name"] for i in body["items"]], ["b"])

    def test_tls_secret_needs_keys(self):
        """Typed secrets need their keys."""
        code, _, _ = self.api.call("POST", "/api/v1/namespaces/default/secrets",
                                   {"metadata": {"name": "t"}, "type": "orch.io/tls"})
        self.assertEqual(code, 422)


class CertificateSigningRequestTests(SynchronousTestCase):
    CSR = "/apis/certificates.orch.io/v1/certificatesigningrequests"

    def setUp(self):
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        request = x509.CertificateSigningRequestBuilder().subject_name(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bob")])).sign(key, hashes.SHA256())
        self.pem = base64.b64encode(request.public_bytes(serialization.Encoding.PEM)).decode()
        self.api = APIHarness()

    def create(self, **spec):
        body = {"metadata": {"name": "c"}, "spec": dict(
            request=self.pem, signerName="orch.io/kube-apiserver-client",
            usages=["client auth"], username="mallory", **spec)}
        return self.api.call("POST", self.CSR, body)

    def test_requester_recorded(self):
        """The server writes the requesting user over what the body claims."""
        code, csr, _ = self.create()
        self.assertEqual(code, 201)
        self.assertEqual(csr["spec"]["username"], "orch-admin")
        self.assertIn("system:masters", csr["spec"]["groups"])

    def test_approval_subresource(self):
        """Conditions change through approval only; the spec never changes."""
        _, csr, _ = self.create()
        csr["status"] = {"conditions": [{"type": "Approved", "status": "True",
                                         "reason": "KubectlApprove"}]}
        csr["spec"]["usages"] = ["server auth"]
        code, updated, _ = self.api.call("PUT", self.CSR + "/c/approval", csr)
        self.assertEqual(code, 200)
        self.assertEqual(updated["status"]["conditions"][0]["type"], "Approved")
        self.assertEqual(updated["spec"]["usages"], ["client auth"])
        _, plain, _ = self.api.call("PUT", self.CSR + "/c", dict(
            updated, status={"conditions": []}))
        self.assertEqual(plain["status"]["conditions"][0]["type"], "Approved")

    def test_approved_and_denied_exclusive(self):
        """Approved and Denied cannot both be set."""
        _, csr, _ = self.create()
        csr["status"] = {"conditions": [{"type": "Approved", "status": "True"},
                                        {"type": "Denied", "status": "True"}]}
        self.assertEqual(self.api.call("PUT", self.CSR + "/c/approval", csr)[0], 422)

    def test_request_must_be_pem(self):
        """spec.request must hold a PEM certificate request."""
        self.pem = base64.b64encode(b"junk").decode()
        self.assertEqual(self.create()[0], 422)
