"""
Tests for L{orchd.api.meta}.
"""

import random
import uuid

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import FORBIDDEN, INVALID, REQUIRED, TOO_LONG, TYPE_INVALID
from orchd.api.kinds import DNS1035, LABEL, PATH_SEGMENT, SUBDOMAIN
from orchd.api.meta import (
    NAME_ALPHABET, generate_name, new_uid, rfc3339, validate_name, validate_object_meta,
    validate_object_meta_update,
)

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
KEY_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


def meta(**fields):
    base = {"name": "web", "namespace": "default"}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


class ValidateNameTests(SynchronousTestCase):

    def test_subdomain(self):
        """Subdomain names: at most 253 bytes of lower-case dotted labels."""
        self.assertEqual(validate_name("web.example-1", SUBDOMAIN), [])
        self.assertEqual(validate_name("Web", SUBDOMAIN), [SUBDOMAIN_MSG])
        self.assertEqual(validate_name("a" * 254, SUBDOMAIN), ["must be no more than 253 bytes"])

    def test_label(self):
        """Label names: at most 63 bytes, no dots."""
        self.assertEqual(validate_name("kube-system", LABEL), [])
        self.assertEqual(validate_name("a.b", LABEL), ["must not contain dots"])
        self.assertEqual(validate_name("a_b", LABEL), [LABEL_MSG])
        self.assertEqual(validate_name("a" * 64, LABEL), ["must be no more than 63 bytes"])

    def test_dns1035(self):
        """DNS-1035 names start with a letter."""
        self.assertEqual(validate_name("svc-1", DNS1035), [])
        self.assertEqual(validate_name("1svc", DNS1035), [DNS1035_MSG])

    def test_path_segment(self):
        """Path-segment names may not be dot names or hold '/' or '%'."""
        self.assertEqual(validate_name("system:admin", PATH_SEGMENT), [])
        self.assertEqual(validate_name("..", PATH_SEGMENT), ["may not be '..'"])
        self.assertEqual(validate_name("a/b%c", PATH_SEGMENT),
                         ["may not contain '/'", "may not contain '%'"])
        self.assertEqual(validate_name(".", PATH_SEGMENT, prefix=True), [])

    def test_prefix(self):
        """A generateName prefix may end in '-' but must otherwise be valid."""
        self.assertEqual(validate_name("web-", SUBDOMAIN, prefix=True), [])
        self.assertEqual(validate_name("web-", DNS1035, prefix=True), [])
        self.assertEqual(validate_name("Web-", SUBDOMAIN, prefix=True), [SUBDOMAIN_MSG])


class GenerateNameTests(SynchronousTestCase):

    def test_suffix(self):
        """Five characters from the unambiguous alphabet follow the prefix."""
        name = generate_name("web-", random.Random(1))
        self.assertTrue(name.startswith("web-"))
        self.assertEqual(len(name), 9)
        self.assertTrue(set(name[4:]) <= set(NAME_ALPHABET))

    def test_prefix_cut(self):
        """The prefix is cut to 58 characters, so names stay within 63."""
        name = generate_name("x" * 100, random.Random(2))
        self.assertEqual(len(name), 63)
        self.assertEqual(name[:58], "x" * 58)


class ValidateObjectMetaTests(SynchronousTestCase):

    def check(self, metadata, namespaced=True, rule=SUBDOMAIN):
        return [str(e) for e in validate_object_meta(metadata, namespaced, rule)]

    def test_valid(self):
        """Well-formed metadata has no errors."""
        self.assertEqual(self.check(meta(
            labels={"app": "web", "orch.io/role": ""},
            annotations={"Example.com/Note": "anything at all"},
            finalizers=["orch.io/cleanup"],
            ownerReferences=[{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                              "uid": "u1", "controller": True}],
        )), [])

    def test_name_required(self):
        """Without name or generateName the name is required."""
        errors = validate_object_meta(meta(name=None), True, SUBDOMAIN)
        self.assertEqual([str(e) for e in errors],
                         ["metadata.name: Required value: name or generateName is required"])
        self.assertEqual(errors[0].type, REQUIRED)
        self.assertEqual(self.check(meta(name=None, generateName="web-")), [])

    def test_invalid_name(self):
        """An invalid name is reported with its rule's message."""
        self.assertEqual(self.check(meta(name="Web")),
                         [f'metadata.name: Invalid value: "Web": {SUBDOMAIN_MSG}'])
        self.assertEqual(self.check(meta(name="web.1"), namespaced=False, rule=LABEL),
                         ['metadata.name: Invalid value: "web.1": must not contain dots',
                          "metadata.namespace: Forbidden: not allowed on this type"])

    def test_generate_name(self):
        """A generateName that cannot become a valid name is reported."""
        self.assertEqual(self.check(meta(name=None, generateName="Web-")),
                         [f'metadata.generateName: Invalid value: "Web-": {SUBDOMAIN_MSG}'])

    def test_namespace(self):
        """Namespaced kinds need a DNS-label namespace; cluster kinds refuse one."""
        self.assertEqual(self.check(meta(namespace=None)), ["metadata.namespace: Required value"])
        self.assertEqual(self.check(meta(namespace="a.b")),
                         ['metadata.namespace: Invalid value: "a.b": must not contain dots'])
        errors = validate_object_meta(meta(), False, SUBDOMAIN)
        self.assertEqual([(e.type, str(e)) for e in errors],
                         [(FORBIDDEN, "metadata.namespace: Forbidden: not allowed on this type")])

    def test_labels(self):
        """Label keys are qualified names and values short label values."""
        self.assertEqual(self.check(meta(labels={"a b": "x", "ok": "-bad"})), [
            f'metadata.labels: Invalid value: "a b": {KEY_MSG}',
            f'metadata.labels: Invalid value: "-bad": {VALUE_MSG}',
        ])
        self.assertEqual(self.check(meta(labels={"/x": "v" * 64})), [
            'metadata.labels: Invalid value: "/x": prefix part must be non-empty',
            f'metadata.labels: Invalid value: "{"v" * 64}": must be no more than 63 bytes',
        ])

    def test_label_types(self):
        """Labels must be a map of strings."""
        errors = validate_object_meta(meta(labels=["a"]), True, SUBDOMAIN)
        self.assertEqual([(e.type, e.field) for e in errors], [(TYPE_INVALID, "metadata.labels")])
        errors = validate_object_meta(meta(labels={"a": 1}), True, SUBDOMAIN)
        self.assertEqual([(e.type, e.field) for e in errors], [(TYPE_INVALID, "metadata.labels[a]")])

    def test_annotations(self):
        """Annotation keys are case-insensitive qualified names; the total is at most 256 KiB."""
        self.assertEqual(self.check(meta(annotations={"Bad Key": ""})),
                         [f'metadata.annotations: Invalid value: "Bad Key": {KEY_MSG}'])
        errors = validate_object_meta(meta(annotations={"big": "x" * (256 * 1024)}), True, SUBDOMAIN)
        self.assertEqual([(e.type, str(e)) for e in errors], [
            (TOO_LONG, "metadata.annotations: Too long: must have at most 262144 bytes")])

    def test_owner_references(self):
        """Owner references need apiVersion, kind, name and uid."""
        self.assertEqual(self.check(meta(ownerReferences=[{}])), [
            'metadata.ownerReferences.apiVersion: Invalid value: "": version must not be empty',
            'metadata.ownerReferences.kind: Invalid value: "": must not be empty',
            'metadata.ownerReferences.name: Invalid value: "": must not be empty',
            'metadata.ownerReferences.uid: Invalid value: "": must not be empty',
        ])

    def test_one_controller(self):
        """At most one owner reference is the controller."""
        refs = [{"apiVersion": "v1", "kind": "A", "name": n, "uid": n, "controller": True}
                for n in ("x", "y")]
        errors = validate_object_meta(meta(ownerReferences=refs), True, SUBDOMAIN)
        self.assertEqual(len(errors), 1)
        self.assertEqual(errors[0].type, INVALID)
        self.assertTrue(errors[0].body.endswith(
            'Only one reference can have Controller set to true. Found "true" in references '
            "for A/x and A/y"))

    def test_finalizers(self):
        """Finalizers are qualified names, and orphan excludes foregroundDeletion."""
        self.assertEqual(self.check(meta(finalizers=["a b"])),
                         [f'metadata.finalizers: Invalid value: "a b": {KEY_MSG}'])
        errors = self.check(meta(finalizers=["orphan", "foregroundDeletion"]))
        self.assertEqual(len(errors), 1)
        self.assertTrue(errors[0].endswith(
            "finalizer orphan and foregroundDeletion cannot be both set"))

    def test_generation(self):
        """A negative generation is invalid."""
        self.assertEqual(self.check(meta(generation=-1)), [
            "metadata.generation: Invalid value: -1: must be greater than or equal to 0"])

    def test_not_a_map(self):
        """Metadata that is not an object is a type error."""
        errors = validate_object_meta("web", True, SUBDOMAIN)
        self.assertEqual([(e.type, e.field) for e in errors], [(TYPE_INVALID, "metadata")])


class ValidateObjectMetaUpdateTests(SynchronousTestCase):

    OLD = {"name": "web", "namespace": "default", "uid": "u1", "resourceVersion": "5",
           "creationTimestamp": "2024-05-01T10:00:00Z", "labels": {"a": "b"}}

    def check(self, **changes):
        new = dict(self.OLD, **changes)
        new = {k: v for k, v in new.items() if v is not None}
        return [str(e) for e in validate_object_meta_update(new, self.OLD)]

    def test_unchanged(self):
        """An update that keeps the system fields has no errors."""
        self.assertEqual(self.check(labels={"a": "c"}), [])

    def test_immutable(self):
        """Name, namespace and uid may not change."""
        self.assertEqual(self.check(name="db", namespace="other", uid="u2"), [
            'metadata.name: Invalid value: "db": field is immutable',
            'metadata.namespace: Invalid value: "other": field is immutable',
            'metadata.uid: Invalid value: "u2": field is immutable',
        ])

    def test_server_filled_fields(self):
        """uid and creationTimestamp are compared only when the update sets them."""
        self.assertEqual(self.check(uid=None, creationTimestamp=None), [])
        self.assertEqual(self.check(creationTimestamp="2025-01-01T00:00:00Z"), [
            'metadata.creationTimestamp: Invalid value: "2025-01-01T00:00:00Z": field is immutable'])

    def test_deletion_fields(self):
        """Clients may not set deletionTimestamp or deletionGracePeriodSeconds."""
        self.assertEqual(self.check(deletionTimestamp="2025-01-01T00:00:00Z",
                                    deletionGracePeriodSeconds=30), [
            'metadata.deletionTimestamp: Invalid value: "2025-01-01T00:00:00Z": field is immutable',
            "metadata.deletionGracePeriodSeconds: Invalid value: 30: field is immutable",
        ])

    def test_no_new_finalizers_while_deleting(self):
        """Once deletion started, finalizers may only be removed."""
        old = dict(self.OLD, deletionTimestamp="2025-01-01T00:00:00Z", finalizers=["a.io/x"])
        new = dict(old, finalizers=["a.io/x", "b.io/y", "a.io/z"])
        errors = validate_object_meta_update(new, old)
        self.assertEqual([(e.type, str(e)) for e in errors], [(
            FORBIDDEN,
            "metadata.finalizers: Forbidden: no new finalizers can be added if the object is "
            'being deleted, found new finalizers []string{"a.io/z", "b.io/y"}')])
        self.assertEqual(validate_object_meta_update(dict(old, finalizers=[]), old), [])

    def test_new_metadata_validated(self):
        """The new metadata's labels are checked too."""
        self.assertEqual(self.check(labels={"a": "-"}),
                         [f'metadata.labels: Invalid value: "-": {VALUE_MSG}'])


class StampTests(SynchronousTestCase):
    def test_rfc3339(self):
        """Timestamps are whole UTC seconds, the same whatever the second written before."""
        self.assertEqual(rfc3339(1700000000.999), "2023-11-14T22:13:20Z")
        self.assertEqual(rfc3339(1700000001), "2023-11-14T22:13:21Z")
        self.assertEqual(rfc3339(1700000000.25), "2023-11-14T22:13:20Z")
        self.assertEqual(rfc3339(0), "1970-01-01T00:00:00Z")
        self.assertEqual(rfc3339(-0.5), "1969-12-31T23:59:59Z")

    def test_new_uid(self):
        """A uid is a random version-4 UUID, spelt in lower case as uuid.uuid4() spells it."""
        uids = {new_uid() for _ in range(200)}
        self.assertEqual(len(uids), 200)
        for uid in uids:
            parsed = uuid.UUID(uid)
            self.assertEqual((parsed.version, parsed.variant, str(parsed)),
                             (4, uuid.RFC_4122, uid))
        self.assertEqual({uid[19] for uid in uids}, set("89ab"))
