"""docs/architecture.rst stays true: the files it names exist, its layers are the test's."""

import os
import re

from twisted.trial.unittest import SynchronousTestCase

from tests.test_layers import LAYERS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "architecture.rst")


def _doc():
    with open(DOC, encoding="utf-8") as f:
        return f.read()


class ArchitectureDocTests(SynchronousTestCase):
    def test_named_files_exist(self):
        """
        Every file the map names exists: a path from the top or under orchd/,
        a bare file name (within the package its paragraph is about) somewhere
        under orchd/.
        """
        names = {name for _, _, files in os.walk(os.path.join(ROOT, "orchd")) for name in files}
        missing = []
        for path in sorted(set(re.findall(r"[\w/]+\.py", _doc()))):
            if "/" not in path:
                found = path in names
            else:
                found = any(os.path.exists(os.path.join(ROOT, c))
                            for c in (path, os.path.join("orchd", path)))
            if not found:
                missing.append(path)
        self.assertEqual(missing, [])

    def test_layers_table_follows_the_layer_test(self):
        """The layers table lists the packages of tests/test_layers.py, in its order."""
        text = _doc()
        table = text[text.index("Layers\n------"):text.index("A request's way")]
        listed = re.findall(r"^``(\w+)``", table, flags=re.M)
        self.assertEqual(listed, [package for layer in LAYERS for package in layer])
