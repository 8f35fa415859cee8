"""Directories of volumes provisioned on this process's node."""

import os

from twisted.internet import reactor
from twisted.trial.unittest import SynchronousTestCase, TestCase

from orchd.app.config import Config
from orchd.controllers.localvolumes import LocalVolumes, at_once, in_thread
from orchd.controllers.manager import ControllerEnvironment
from orchd.controllers.persistentvolume import PersistentVolumeController
from tests.controllers.test_persistentvolume import (
    CLAIMS, CLASSES, MERGE, VOLUMES, claim, storage_class,
)
from tests.support import APIHarness


class LocalVolumesTests(SynchronousTestCase):
    def setUp(self):
        self.root = os.path.abspath(self.mktemp())
        os.makedirs(self.root)
        self.local = LocalVolumes("here", self.root, at_once)

    def test_holds_only_direct_children(self):
        """Only a directory right under the root is a volume's; nothing outside is removed."""
        self.assertTrue(self.local.holds(os.path.join(self.root, "pvc-1")))
        for path in ("", self.root, os.path.dirname(self.root), "/etc",
                     os.path.join(self.root, "..", "x"), os.path.join(self.root, "a", "b"),
                     None):
            self.assertFalse(self.local.holds(path), path)

    def test_remove_outside_root_refused(self):
        """A volume naming a directory outside the root leaves it in place."""
        outside = os.path.abspath(self.mktemp())
        os.makedirs(outside)
        self.successResultOf(self.local.remove(outside))
        self.assertTrue(os.path.isdir(outside))


class ThreadTests(TestCase):
    async def test_in_thread(self):
        """The production runner makes and removes the directory off the reactor thread."""
        root = os.path.abspath(self.mktemp())
        local = LocalVolumes("here", root, in_thread(reactor))
        path = local.path("pvc-1")
        await local.create(path)
        self.assertTrue(os.path.isdir(path))
        await local.remove(path)
        self.assertFalse(os.path.exists(path))


class ProvisionedLocallyTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.root = os.path.abspath(self.mktemp())
        self.controller = PersistentVolumeController(
            self.api.catalog, self.api.clock, local=LocalVolumes("here", self.root, at_once))
        self.controller.startService()
        self.addCleanup(self.controller.stopService)
        self.api.call("POST", CLASSES, storage_class("standard", mode="WaitForFirstConsumer"))
        self.settle()

    def settle(self):
        for _ in range(20):
            self.api.clock.advance(0)

    def provision_on(self, node):
        code, created, _ = self.api.call("POST", CLAIMS, claim(class_name="standard"))
        self.assertEqual(code, 201, created)
        self.api.call("PATCH", f"{CLAIMS}/data", {"metadata": {"annotations": {
            "volume.kubernetes.io/selected-node": node}}}, headers=MERGE)
        self.settle()
        name = f"pvc-{created['metadata']['uid']}"
        return name, self.api.call("GET", f"{VOLUMES}/{name}")[1]

    def test_local_node_directory(self):
        """A volume for this process's node is a directory of the data dir, gone with its claim."""
        name, volume = self.provision_on("here")
        path = os.path.join(self.root, name)
        self.assertEqual(volume["spec"]["hostPath"]["path"], path)
        self.assertTrue(os.path.isdir(path))
        self.api.call("DELETE", f"{CLAIMS}/data")
        self.settle()
        self.assertFalse(os.path.exists(path))
        self.assertEqual(self.api.call("GET", f"{VOLUMES}/{name}")[0], 404)

    def test_other_node_object_only(self):
        """A volume for another node names a path there and makes no directory here."""
        name, volume = self.provision_on("host-sim-0")
        self.assertEqual(volume["spec"]["hostPath"]["path"],
                         f"/var/lib/orchd/volumes/{name}_default_data")
        self.assertFalse(os.path.exists(self.root))

    def test_from_environment(self):
        """With a node agent in the process, its node's volumes go under the data dir."""
        config = Config(data_dir=self.mktemp(), secure_port=0, hostname_override="here")
        built = PersistentVolumeController.from_environment(
            ControllerEnvironment(self.api.catalog, reactor, config=config))
        self.assertEqual((built._local.node_name, built._local.root),
                         ("here", os.path.abspath(os.path.join(config.data_dir, "volumes"))))
        alone = Config(data_dir=self.mktemp(), secure_port=0, no_orchlet=True)
        self.assertIsNone(PersistentVolumeController.from_environment(
            ControllerEnvironment(self.api.catalog, reactor, config=alone))._local)
