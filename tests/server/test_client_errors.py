"""
Hostile query values through the whole server: each is a 4xx Status naming
what was wrong, never a 500. The inputs are the ones that answered 500.
"""

import base64
import json
from urllib.parse import quote

from twisted.trial.unittest import SynchronousTestCase

from orchd.server import site
from orchd.server.handlers.watch import MAX_WATCH_TIMEOUT
from orchd.storage.interfaces import StoreUnavailableError
from tests.server.test_watch import Stream
from tests.support import APIHarness

CM = "/api/v1/namespaces/default/configmaps"
TABLE = b"application/json;as=Table;v=v1;g=meta.k8s.io"
APPLY = b"application/apply-patch+yaml"


def configmap(name):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


def token(data):
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


class QueryValueTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.api.call("POST", CM, configmap("a"))

    def call(self, method, path, body=None, headers=None, content_type=b"application/json"):
        code, status, _ = self.api.call(method, path, body, headers, content_type)
        return code, status

    def assertBadParameter(self, method, path, parameter, reason, **kwargs):
        code, status = self.call(method, path, **kwargs)
        self.assertEqual((code, status["reason"], status["message"]),
                         (400, "BadRequest",
                          f'invalid value for query parameter "{parameter}": {reason}'),
                         (method, path))

    def test_invalid_utf8_is_400_for_every_parameter(self):
        """Bytes that are not UTF-8 in any parameter a verb reads are a 400 naming it."""
        cases = [("GET", CM, p) for p in (
            "labelSelector", "fieldSelector", "resourceVersion", "resourceVersionMatch",
            "continue", "limit", "sendInitialEvents")]
        cases += [("GET", CM + "?watch=true&", p) for p in (
            "timeoutSeconds", "allowWatchBookmarks", "sendInitialEvents", "labelSelector")]
        cases += [("POST", CM + "?dryRun=All&", p) for p in ("fieldManager", "fieldValidation")]
        cases += [("DELETE", CM + "/a?dryRun=All&", p) for p in (
            "propagationPolicy", "gracePeriodSeconds", "orphanDependents", "fieldManager")]
        cases += [("DELETE", CM + "?dryRun=All&", "labelSelector")]
        for method, path, parameter in cases:
            path += ("&" if "?" in path and not path.endswith("&") else
                     "" if path.endswith("&") else "?")
            body = configmap("b") if method == "POST" else None
            for raw in ("%ff%fe", "%c0%80", "%ed%a0%80"):
                self.assertBadParameter(method, f"{path}{parameter}={raw}", parameter,
                                        "not valid UTF-8", body=body)

    def test_invalid_utf8_in_patch_parameters(self):
        """fieldManager and force of a patch or apply are read strictly too."""
        self.assertBadParameter("PATCH", CM + "/a?fieldManager=%ff", "fieldManager",
                                "not valid UTF-8", body={}, content_type=b"application/"
                                b"merge-patch+json")
        self.assertBadParameter("PATCH", CM + "/a?fieldManager=m&force=%ff", "force",
                                "not valid UTF-8", body=configmap("a"), content_type=APPLY)

    def test_include_object_of_tables(self):
        """includeObject of a Table request is read strictly: 400, as any other parameter."""
        self.assertBadParameter("GET", CM + "?includeObject=%ff", "includeObject",
                                "not valid UTF-8", headers={b"accept": TABLE})
        code, status = self.call("GET", CM + "?includeObject=Whole", headers={b"accept": TABLE})
        self.assertEqual((code, status["message"]),
                         (400, 'unrecognized includeObject value: "Whole"'))

    def test_nul_is_400(self):
        """A NUL character in a selector or manager is a 400 naming the parameter."""
        nul = "must not contain a NUL character"
        self.assertBadParameter("GET", CM + "?labelSelector=a%00b", "labelSelector", nul)
        self.assertBadParameter("GET", CM + "?fieldSelector=metadata.name%3Da%00b",
                                "fieldSelector", nul)
        self.assertBadParameter("POST", CM + "?dryRun=All&fieldManager=m%00", "fieldManager",
                                nul, body=configmap("b"))

    def test_non_ascii_utf8_values_are_read(self):
        """Valid non-ASCII values (the query parser raised on them) reach their parameter."""
        code, body = self.call("GET", CM + "?fieldSelector=metadata.name%3D%e2%80%ae")
        self.assertEqual((code, body["items"]), (200, []))
        code, body = self.call("GET", CM + "?labelSelector=%e2%80%ae")
        self.assertEqual(code, 400)
        self.assertIn("name part must consist of alphanumeric characters", body["message"])
        code, body = self.call("POST", CM + "?fieldManager=%c3%a9t%c3%a9",
                               dict(configmap("b"), data={"k": "v"}))
        self.assertEqual(code, 201)
        self.assertEqual(body["metadata"]["managedFields"][0]["manager"], "\u00e9t\u00e9")

    def test_control_characters_are_judged_by_each_parameter(self):
        """Other control characters reach the parameter's own validation, as upstream."""
        code, body = self.call("GET", CM + "?fieldSelector=metadata.name%3Da%01b")
        self.assertEqual((code, body["items"]), (200, []))
        code, body = self.call("POST", CM + "?dryRun=All&fieldManager=a%01", configmap("b"))
        self.assertEqual(code, 422)
        self.assertIn("fieldManager: Invalid value", body["message"])

    def test_limit(self):
        """limit past int64 is a 400; a negative one lists everything, as upstream."""
        self.assertBadParameter("GET", CM + "?limit=99999999999999999999", "limit",
                                '"99999999999999999999" is out of range for a 64-bit integer')
        self.assertBadParameter("GET", CM + "?limit=1e3", "limit", '"1e3" is not an integer')
        self.assertBadParameter("DELETE", CM + "?limit=99999999999999999999", "limit",
                                '"99999999999999999999" is out of range for a 64-bit integer')
        self.call("POST", CM, configmap("b"))
        code, body = self.call("GET", CM + "?limit=-1")
        self.assertEqual((code, len(body["items"])), (200, 2))
        code, body = self.call("GET", CM + "?limit=9223372036854775807")
        self.assertEqual((code, len(body["items"])), (200, 2))
        self.assertNotIn("continue", body["metadata"])

    def test_resource_version(self):
        """A resourceVersion that is not a revision within int64 is a 400, list and watch."""
        for value in ("-1", "abc", "+5", "%205", "99999999999999999999999",
                      "9223372036854775808", "%d9%a3"):
            for path in (CM, CM + "?watch=true&timeoutSeconds=1&limit=0"):
                path += ("&" if "?" in path else "?") + "resourceVersion=" + value
                code, body = self.call("GET", path)
                self.assertEqual((code, body["reason"]), (400, "BadRequest"), path)
                self.assertTrue(body["message"].startswith("invalid resource version: "),
                                body["message"])

    def test_timeout_seconds(self):
        """timeoutSeconds that is no int64 is a 400; a negative one takes the default."""
        self.assertBadParameter("GET", CM + "?watch=true&timeoutSeconds=1e9", "timeoutSeconds",
                                '"1e9" is not an integer')
        self.assertBadParameter("GET", CM + "?watch=true&timeoutSeconds=99999999999999999999",
                                "timeoutSeconds",
                                '"99999999999999999999" is out of range for a 64-bit integer')
        stream = Stream(self.api, CM + "?watch=true&timeoutSeconds=-5")
        self.assertEqual(stream.summary(), [("ADDED", "a")])
        self.assertFalse(stream.ended)

    def test_huge_timeout_schedules_no_far_timer(self):
        """A watch asking for centuries gets a timer of at most a day, then ends cleanly."""
        stream = Stream(self.api, CM + "?watch=true&timeoutSeconds=9223372036854775807")
        clock = self.api.clock
        latest = max(call.getTime() for call in clock.getDelayedCalls())
        self.assertLessEqual(latest - clock.seconds(), MAX_WATCH_TIMEOUT)
        stream.pump(MAX_WATCH_TIMEOUT)
        self.assertTrue(stream.ended)

    def test_grace_period_seconds(self):
        """A negative grace period is taken (read as 1 s, as upstream); past int64 it is a 400."""
        code, body = self.call("DELETE", CM + "/a?gracePeriodSeconds=-1")
        self.assertNotEqual(code // 100, 5, body)
        self.assertNotEqual(code, 422, body)
        self.assertBadParameter("DELETE", CM + "/a?gracePeriodSeconds=99999999999999999999",
                                "gracePeriodSeconds",
                                '"99999999999999999999" is out of range for a 64-bit integer')

    def test_malformed_continue_tokens(self):
        """A token that is not one of ours, or names a revision past int64, is a 400."""
        good = {"v": "meta.k8s.io/v1", "rv": 1, "start": "default/a"}
        for value in ("!!!", "a", token([]), token("x"), token(dict(good, rv=10 ** 30)),
                      token(dict(good, rv="1")), token(dict(good, start="../secrets/x")),
                      token(dict(good, remaining=-5)), token(dict(good, remaining=10 ** 25)),
                      token(dict(good, rv=2 ** 63)), token(dict(good, remaining=2 ** 63))):
            for path in (CM, "/api/v1/configmaps", "/api/v1/namespaces"):
                code, body = self.call("GET", f"{path}?limit=1&continue={value}")
                self.assertEqual((code, body["reason"]), (400, "BadRequest"), value)
                self.assertTrue(body["message"].startswith("continue key is not valid"),
                                body["message"])

    def test_continue_token_of_another_namespace_stays_in_its_own(self):
        """A token whose start key names another namespace reads only the list's own."""
        self.call("POST", "/api/v1/namespaces", {"metadata": {"name": "other"}})
        self.call("POST", "/api/v1/namespaces/other/configmaps", configmap("z"))
        _, page = self.call("GET", CM + "?limit=1")
        revision = int(page["metadata"]["resourceVersion"])
        for start in ("other/a", "orch-system/a", "a", "zzzz"):
            value = token({"v": "meta.k8s.io/v1", "rv": revision, "start": start})
            code, body = self.call("GET", f"{CM}?limit=10&continue={value}")
            self.assertEqual(code, 200)
            namespaces = {item["metadata"]["namespace"] for item in body["items"]}
            self.assertEqual(namespaces - {"default"}, set(), start)

    def test_forged_count_never_goes_negative(self):
        """A token that undercounts what is left gives remainingItemCount 0, not below."""
        for name in ("b", "c", "d"):
            self.call("POST", CM, configmap(name))
        _, page = self.call("GET", CM + "?limit=1")
        data = json.loads(base64.urlsafe_b64decode(page["metadata"]["continue"] + "=="))
        forged = token(dict(data, remaining=0))
        code, body = self.call("GET", f"{CM}?limit=1&continue={forged}")
        self.assertEqual(code, 200)
        self.assertEqual(body["metadata"]["remainingItemCount"], 0)

    def test_hostile_selectors(self):
        """Malformed selectors are 400s in upstream's words; long ones are parsed, not failed."""
        cases = [
            ("labelSelector", "a in (",
             "unable to parse requirement: found '', expected: ',', ')' or identifier"),
            ("labelSelector", "!!", "unable to parse requirement: found '!', expected: identifier"),
            ("labelSelector", "a==b==c", "found '==', expected: ',' or 'end of string'"),
            ("labelSelector", "a=" + "b" * 64,
             f'unable to parse requirement: values[0][a]: Invalid value: "{"b" * 64}": must be '
             "no more than 63 bytes"),
            ("fieldSelector", "metadata.name==b==c",
             "invalid field selector: unescaped character in value: 61"),
            ("fieldSelector", "!!", "invalid selector: '!!'; can't understand '!!'"),
            ("fieldSelector", "metadata.name=a\\x",
             "invalid field selector: invalid escape sequence: \\x"),
        ]
        for parameter, text, message in cases:
            code, body = self.call("GET", f"{CM}?{parameter}={_quote(text)}")
            self.assertEqual((code, body["reason"], body["message"]),
                             (400, "BadRequest", message), text)
        many = ",".join(f"!k{i}" for i in range(2000))
        code, body = self.call("GET", f"{CM}?labelSelector={many}")
        self.assertEqual((code, len(body["items"])), (200, 1))


class ServerBugTests(SynchronousTestCase):
    def test_unexpected_error_is_500_with_traceback_logged(self):
        """A bug of ours answers a generic 500 Status, and its traceback is logged."""
        def broken(scope):
            raise ZeroDivisionError("our bug")

        api = APIHarness()
        self.patch(site, "VERB_HANDLERS", dict(site.VERB_HANDLERS, get=broken))
        code, body, _ = api.call("GET", CM + "/a")
        self.assertEqual((code, body["reason"]), (500, "InternalError"))
        self.assertNotIn("our bug", body["message"])
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 1)

    def test_store_that_cannot_serve_is_503(self):
        """A store closed under a request (the server stopping) answers 503, logging no error."""
        def closed(scope):
            raise StoreUnavailableError("the store is closed")

        api = APIHarness()
        self.patch(site, "VERB_HANDLERS", dict(site.VERB_HANDLERS, get=closed))
        code, body, _ = api.call("GET", CM + "/a")
        self.assertEqual((code, body["reason"]), (503, "ServiceUnavailable"))
        self.assertEqual(self.flushLoggedErrors(), [])


def _quote(text):
    return quote(text, safe="")
