"""
Every C{test-case-name} header of orchd's modules names test modules that exist.

C{trial --testmodule orchd/x.py} (and editors) run what a module's header
names; a header naming a module that was never written, or was moved, runs
nothing and says so nowhere. The header is read as trial reads it.
"""

import os

from twisted.scripts.trial import loadLocalVariables
from twisted.trial.unittest import SynchronousTestCase

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def orchd_modules():
    """Paths, relative to the tree, of every module of the orchd package."""
    for directory, subdirectories, files in os.walk(os.path.join(ROOT, "orchd")):
        subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.relpath(os.path.join(directory, name), ROOT)


def named_test_modules(path):
    """The test modules the header of C{path} names (trial's own reading), or []."""
    names = loadLocalVariables(os.path.join(ROOT, path)).get("test-case-name")
    return [name.strip() for name in names.split(",")] if names else []


def test_module_exists(name):
    """True when dotted C{name} is a module or package under tests/."""
    if name != "tests" and not name.startswith("tests."):
        return False
    path = os.path.join(ROOT, *name.split("."))
    return os.path.isfile(path + ".py") or os.path.isfile(os.path.join(path, "__init__.py"))


def header_lines(path):
    with open(os.path.join(ROOT, path)) as f:
        return [f.readline(), f.readline()]


class TestCaseNameTests(SynchronousTestCase):
    def test_named_modules_exist(self):
        """No orchd module's header names a test module that is not under tests/."""
        missing = [f"{path}: {name}" for path in orchd_modules()
                   for name in named_test_modules(path) if not test_module_exists(name)]
        self.assertEqual(missing, [], "headers naming missing test modules")

    def test_headers_parse(self):
        """A header trial cannot read (a typo in its -*- markers) is caught too."""
        unreadable = [path for path in orchd_modules()
                      if any("test-case-name" in line for line in header_lines(path))
                      and not named_test_modules(path)]
        self.assertEqual(unreadable, [])

    def test_checker_sees_headers(self):
        """The check reads real headers: the query module names its test module."""
        self.assertIn("tests.api.test_query", named_test_modules("orchd/api/query.py"))
        self.assertTrue(test_module_exists("tests.api.test_query"))
        self.assertFalse(test_module_exists("tests.registry.test_generic_missing"))
        self.assertFalse(test_module_exists("orchd.api.query"))
