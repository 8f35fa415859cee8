"""Which controllers are built: selection by name, and only those whose resources are served."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.manager import (
    ControllerEnvironment, UnknownControllerError, build_controllers,
    selected_controllers,
)
from tests.support import APIHarness


class BuildTests(SynchronousTestCase):
    def test_controllers_of_disabled_resources_are_left_out(self):
        """With nodes turned off, the node controllers are not built; the others are."""
        api = APIHarness(runtime_config="v1/nodes=false")
        names = ["nodelifecycle", "podgc", "taint-eviction-controller", "namespace"]
        built = build_controllers(names, ControllerEnvironment(api.catalog, api.clock))
        self.assertEqual([type(c).__name__ for c in built], ["NamespaceController"])

    def test_selection(self):
        """'*' is the defaults, '-name' removes one, an unknown name is refused."""
        self.assertNotIn("podgc", selected_controllers(("*", "-podgc")))
        self.assertIn("tokencleaner", selected_controllers(("*", "tokencleaner")))
        self.assertRaises(UnknownControllerError, selected_controllers, ("nope",))
