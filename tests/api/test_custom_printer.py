"""The Tables of custom resources: printer columns read by simple JSONPaths."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.printers.custom import column_printer, find, parse_path


class PathTests(SynchronousTestCase):
    def test_steps(self):
        """Fields, indices, quoted names and filters are parsed in order."""
        self.assertEqual(parse_path(".spec.ports[0]['app.io/name']"),
                         ("spec", "ports", 0, "app.io/name"))
        self.assertEqual(parse_path('{.status.conditions[?(@.type=="Ready")].status}'),
                         ("status", "conditions", (("type",), "Ready"), "status"))

    def test_refused(self):
        """A path that does not start with a dot, or has a step of no known form, is refused."""
        for text in ("spec.replicas", ".spec[", ".spec..x", ".a[?(@.b>1)]"):
            with self.assertRaises(ValueError):
                parse_path(text)

    def test_find(self):
        """Values are found through lists, filters and maps; a missing field finds nothing."""
        obj = {"status": {"conditions": [{"type": "A", "status": "x"},
                                         {"type": "Ready", "status": "True"}]}}
        self.assertEqual(find(obj, parse_path('.status.conditions[?(@.type=="Ready")].status')),
                         ["True"])
        self.assertEqual(find(obj, parse_path(".status.nothing.deeper")), [])
        self.assertEqual(find(obj, parse_path(".status.conditions[*].type")), ["A", "Ready"])


class CellTests(SynchronousTestCase):
    def test_types(self):
        """Cells are converted to their column's type; values of another type are empty."""
        printer = column_printer([
            {"name": "N", "type": "integer", "jsonPath": ".spec.n"},
            {"name": "S", "type": "string", "jsonPath": ".spec.n"},
            {"name": "B", "type": "boolean", "jsonPath": ".spec.n"},
            {"name": "D", "type": "date", "jsonPath": ".spec.when"},
            {"name": "M", "type": "string", "jsonPath": ".spec.map"},
        ])
        obj = {"metadata": {"name": "x"},
               "spec": {"n": 3, "when": "1970-01-01T00:00:00Z", "map": {"a": 1}}}
        self.assertEqual(printer.cells(obj, 600), ["x", 3, "3", None, "10m", '{"a":1}'])

    def test_default_age(self):
        """No columns print Name and Age."""
        printer = column_printer([])
        self.assertEqual([c["name"] for c in printer.definitions()], ["Name", "Age"])
