"""The ControllerRevision helpers shared by the DaemonSet and StatefulSet controllers."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.history import (
    data_bytes, fnv32, hash_revision, new_revision, next_number, revision_data, revision_name,
    sort_revisions, stale_revisions, template_of,
)


def revision(name, number, created="2026-01-01T00:00:00Z"):
    return {"metadata": {"name": name, "creationTimestamp": created}, "revision": number}


class HistoryTests(SynchronousTestCase):
    def test_fnv1(self):
        """fnv32 is Go's FNV-1 (not 1a): the published test vectors."""
        self.assertEqual(fnv32(b""), 0x811C9DC5)
        self.assertEqual(fnv32(b"a"), 0x050C5D7E)
        self.assertEqual(fnv32(b"foobar"), 0x31F0B262)

    def test_data_is_a_replacing_patch(self):
        """The data is the template under spec with $patch replace, written compact with sorted keys."""
        template = {"spec": {"containers": []}, "metadata": {"labels": {"a": "b"}}}
        data = revision_data(template)
        self.assertEqual(data, {"spec": {"template": dict(template, **{"$patch": "replace"})}})
        self.assertEqual(data_bytes(data),
                         b'{"spec":{"template":{"$patch":"replace","metadata":{"labels":'
                         b'{"a":"b"}},"spec":{"containers":[]}}}}')
        self.assertEqual(template_of({"data": data}), template)
        self.assertNotIn("$patch", template)

    def test_hash_depends_on_collisions(self):
        """The hash changes with the collision count and uses the vowel-free alphabet."""
        data = revision_data({"metadata": {"labels": {"a": "b"}}})
        plain, probed = hash_revision(data), hash_revision(data, 1)
        self.assertNotEqual(plain, probed)
        self.assertEqual(hash_revision(data), plain)
        self.assertFalse(set(plain) & set("aeiou013"))

    def test_name_is_bounded(self):
        """A long owner name is cut to 223 characters before the hash."""
        self.assertEqual(revision_name("web", "abc"), "web-abc")
        self.assertEqual(len(revision_name("x" * 300, "abc")), 227)

    def test_order_and_numbers(self):
        """Revisions sort by number, then age, then name; the next number is max + 1."""
        a, b, c = revision("a", 2), revision("b", 1), revision("c", 2, "2025-01-01T00:00:00Z")
        self.assertEqual([r["metadata"]["name"] for r in sort_revisions([a, b, c])],
                         ["b", "c", "a"])
        self.assertEqual(next_number([a, b, c]), 3)
        self.assertEqual(next_number([]), 1)

    def test_stale(self):
        """Beyond the limit the oldest unused revisions go; live ones never do."""
        revisions = [revision(f"r{i}", i) for i in range(1, 6)]
        stale = stale_revisions(revisions, {"r1"}, 2)
        self.assertEqual([r["metadata"]["name"] for r in stale], ["r2", "r3"])
        self.assertEqual(stale_revisions(revisions, set(), 10), [])

    def test_new_revision(self):
        """A new revision has the template labels plus extras, the annotations and a controller ref."""
        owner = {"metadata": {"name": "web", "namespace": "ns", "uid": "u1",
                              "annotations": {"kubernetes.io/change-cause": "x"}}}
        template = {"metadata": {"labels": {"app": "web"}}}
        made = new_revision(owner, "apps/v1", "StatefulSet", template, 4, "hash1",
                            {"controller.orch.io/hash": "hash1"})
        self.assertEqual(made["metadata"]["name"], "web-hash1")
        self.assertEqual(made["metadata"]["labels"],
                         {"app": "web", "controller.orch.io/hash": "hash1"})
        self.assertEqual(made["metadata"]["annotations"], {"kubernetes.io/change-cause": "x"})
        self.assertEqual(made["revision"], 4)
        self.assertTrue(made["metadata"]["ownerReferences"][0]["controller"])
