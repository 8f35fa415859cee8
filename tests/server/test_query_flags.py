"""
Boolean query parameters through the whole server, each read with upstream's rule.

Every option is true unless its first value is C{0} or C{false} in any case
(C{?watch} with no value is a watch); C{pretty} alone is read as Go's
C{strconv.ParseBool}; C{verbose} of the health checks asks only presence.
"""

import yaml
from twisted.trial.unittest import SynchronousTestCase

from tests.server.test_watch import Stream
from tests.support import APIHarness

CM = "/api/v1/namespaces/default/configmaps"
APPLY = b"application/apply-patch+yaml"
MERGE = b"application/merge-patch+json"
STREAMING = "resourceVersionMatch=NotOlderThan&resourceVersion="


class WatchFlagTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.api.call("POST", CM, {"metadata": {"name": "a"}})

    def test_watch_without_value_watches(self):
        """C{?watch} with no value is a watch, as upstream reads it."""
        stream = Stream(self.api, CM + "?watch")
        self.assertEqual(stream.summary(), [("ADDED", "a")])
        self.assertFalse(stream.ended)

    def test_watch_other_values_watch(self):
        """Any value but 0 and false is a watch: yes, True, TRUE, on."""
        for value in ("yes", "True", "TRUE", "on"):
            stream = Stream(self.api, CM + "?watch=" + value)
            self.assertEqual(stream.summary(), [("ADDED", "a")], value)

    def test_watch_0_and_false_in_any_case_list(self):
        """watch=0, watch=false, watch=FALSE and watch=False are a plain list."""
        for value in ("0", "false", "FALSE", "False"):
            code, body, _ = self.api.call("GET", CM + "?watch=" + value)
            self.assertEqual((code, body["kind"]), (200, "ConfigMapList"), value)

    def test_legacy_watch_path_ignores_watch_false(self):
        """Under the legacy /watch/ prefix the request is a watch whatever watch says."""
        stream = Stream(self.api, "/api/v1/watch/namespaces/default/configmaps?watch=false")
        self.assertEqual(stream.summary(), [("ADDED", "a")])

    def bookmarks(self, query):
        stream = Stream(self.api, CM + "?watch=true&" + query)
        stream.pump(60)
        return [e["type"] for e in stream.events()].count("BOOKMARK")

    def test_allow_watch_bookmarks(self):
        """allowWatchBookmarks=True and a bare allowWatchBookmarks bring bookmarks; =0 does not."""
        self.assertEqual([self.bookmarks(q) for q in (
            "allowWatchBookmarks=True", "allowWatchBookmarks", "allowWatchBookmarks=0",
            "allowWatchBookmarks=FALSE")], [1, 1, 0, 0])

    def test_send_initial_events_without_value(self):
        """A bare sendInitialEvents asks for the initial events, ended by the bookmark."""
        stream = Stream(self.api, f"{CM}?watch&sendInitialEvents&allowWatchBookmarks&{STREAMING}")
        self.assertEqual([e["type"] for e in stream.events()], ["ADDED", "BOOKMARK"])

    def test_send_initial_events_false_is_given(self):
        """sendInitialEvents=FALSE is given, not absent: NotOlderThan is allowed, no ADDED."""
        rv = self.api.call("GET", CM)[1]["metadata"]["resourceVersion"]
        stream = Stream(self.api, f"{CM}?watch=1&sendInitialEvents=FALSE&{STREAMING}{rv}")
        self.assertEqual(stream.response.code, 200)
        self.api.call("POST", CM, {"metadata": {"name": "b"}})
        self.assertEqual(stream.summary(), [("ADDED", "b")])

    def test_send_initial_events_is_forbidden_for_list_with_any_value(self):
        """A list refuses sendInitialEvents given at all: empty, false or 0."""
        for query in ("sendInitialEvents", "sendInitialEvents=false", "sendInitialEvents=0",
                      "watch=0&sendInitialEvents=true"):
            code, status, _ = self.api.call("GET", f"{CM}?{query}")
            self.assertEqual(code, 422, query)
            self.assertIn("sendInitialEvents is forbidden for list", status["message"])


class PrettyTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.api.call("POST", CM, {"metadata": {"name": "a"}})

    def body(self, path):
        response = self.successResultOf(self.api.treq.get("https://orchd" + path))
        return response.code, self.successResultOf(self.api.treq.content(response))

    def test_pretty_values_go_parse_bool_accepts(self):
        """pretty=1, t, T, TRUE, true and True indent the answer."""
        for value in ("1", "t", "T", "TRUE", "true", "True"):
            self.assertIn(b'\n  "metadata"', self.body(f"{CM}/a?pretty={value}")[1], value)

    def test_pretty_yes_and_others_do_not(self):
        """pretty=yes, a bare pretty, 0, tRUE and hostile bytes leave the answer compact."""
        for query in ("pretty=yes", "pretty", "pretty=0", "pretty=tRUE", "pretty=%ff%00"):
            code, body = self.body(f"{CM}/a?{query}")
            self.assertEqual(code, 200, query)
            self.assertNotIn(b"\n ", body, query)


def applied(name, value):
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                           "data": {"k": value}}).encode()


class WriteFlagTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.api.call("PATCH", f"{CM}/a?fieldManager=alice", applied("a", "1"),
                      content_type=APPLY)

    def test_force_without_value_forces(self):
        """A bare force takes a field another manager owns."""
        code, obj, _ = self.api.call("PATCH", f"{CM}/a?fieldManager=bob&force", applied("a", "2"),
                                     content_type=APPLY)
        self.assertEqual((code, obj["data"]), (200, {"k": "2"}))

    def test_force_false_in_any_case_does_not(self):
        """force=FALSE and force=0 leave the conflict a 409."""
        for value in ("FALSE", "0", "False"):
            code, status, _ = self.api.call("PATCH", f"{CM}/a?fieldManager=bob&force={value}",
                                            applied("a", "2"), content_type=APPLY)
            self.assertEqual((code, status["reason"]), (409, "Conflict"), value)

    def test_force_given_at_all_is_refused_off_apply(self):
        """A non-apply patch refuses force given at all: bare, false or 0."""
        for query in ("force", "force=false", "force=0"):
            code, status, _ = self.api.call("PATCH", f"{CM}/a?{query}", {}, content_type=MERGE)
            self.assertEqual(code, 422, query)
            self.assertIn("force: Forbidden: may not be specified for non-apply patch",
                          status["message"])

    def test_orphan_dependents_without_value_orphans(self):
        """A bare orphanDependents is an Orphan delete: the owner stays with its finalizer."""
        code, obj, _ = self.api.call("DELETE", f"{CM}/a?orphanDependents")
        self.assertEqual((code, obj["metadata"]["finalizers"]), (200, ["orphan"]))

    def test_orphan_dependents_false_in_any_case(self):
        """orphanDependents=FALSE is the legacy false: a Background delete."""
        code, status, _ = self.api.call("DELETE", f"{CM}/a?orphanDependents=FALSE")
        self.assertEqual((code, status["status"]), (200, "Success"))

    def test_orphan_dependents_given_at_all_excludes_a_policy(self):
        """orphanDependents=0 is given, so a propagationPolicy beside it is refused."""
        code, status, _ = self.api.call(
            "DELETE", f"{CM}/a?orphanDependents=0&propagationPolicy=Background")
        self.assertEqual(code, 422)
        self.assertIn("orphanDependents and deletionPropagation cannot be both set",
                      status["message"])


class VerboseTests(SynchronousTestCase):
    def test_verbose_is_presence(self):
        """Health checks answer verbosely for any verbose, verbose=false too, as upstream."""
        api = APIHarness()
        for query in ("verbose", "verbose=false", "verbose=0", "verbose=1"):
            code, body, _ = api.call("GET", "/readyz?" + query)
            self.assertEqual(code, 200)
            self.assertTrue(body.endswith("\nhealthz check passed\n"), query)
        self.assertEqual(api.call("GET", "/readyz?verbosity=1")[1], "ok")
