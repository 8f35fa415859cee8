"""Simulated nodes: names, pod networks, spread heartbeats, identities, settings and the tree."""

import ipaddress
import os

from cryptography import x509
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.app.config import Config, ConfigError, load_config
from orchd.app.orchletsettings import simulated_node_settings
from orchd.app.service import ControlPlane, make_service
from orchd.orchlet.service import OrchletService
from orchd.orchlet.simnodes import (
    RenewalStats, SimulatedNodes, delay_to_phase, heartbeat_phase, node_credentials, node_names,
    pod_network,
)
from orchd.app.values import _resource_list
from orchd.client.orchconfig import write_orchconfig
from orchd.tls.certs import certificate_pem, create_ca, issue_certificate, private_key_pem


class FakePKI:
    """Issues client certificates from a CA of its own, and counts them."""

    def __init__(self):
        self.ca, self.ca_key = create_ca("clients")
        self.client_signer = (self.ca, self.ca_key)
        self.issued = []

    def issue_client_certificate(self, common_name, organizations=()):
        self.issued.append((common_name, tuple(organizations)))
        cert, key = issue_certificate(self.ca, self.ca_key, common_name,
                                      organizations=organizations, client=True)
        return certificate_pem(cert), private_key_pem(key)


class HelperTests(SynchronousTestCase):
    def test_names(self):
        """Node i is <base>-sim-<i>."""
        self.assertEqual(node_names("box", 3), ["box-sim-0", "box-sim-1", "box-sim-2"])
        self.assertEqual(node_names("box", 0), [])

    def test_pod_networks(self):
        """Each node has its own /24 from 10.89.0.0 on, and they never overlap."""
        self.assertEqual(str(pod_network(0)), "10.89.0.0/24")
        self.assertEqual(str(pod_network(257)), "10.90.1.0/24")
        last = pod_network(9999)
        self.assertTrue(last.subnet_of(ipaddress.ip_network("10.0.0.0/8")))
        self.assertEqual(len({pod_network(i) for i in range(10000)}), 10000)

    def test_heartbeats_spread(self):
        """Node i of N renews at i/N of the 10 s cycle: 5,000 nodes are 2 ms apart."""
        self.assertEqual([heartbeat_phase(i, 4) for i in range(4)], [0, 2.5, 5, 7.5])
        phases = [heartbeat_phase(i, 5000) for i in range(5000)]
        self.assertAlmostEqual(phases[1] - phases[0], 0.002)
        self.assertLess(phases[-1], 10)
        self.assertEqual(heartbeat_phase(0, 0), 0)

    def test_delay_to_phase(self):
        """A node waits for its own slot of the common cycle, whenever it registered."""
        self.assertAlmostEqual(delay_to_phase(1000.0, 2.5), 2.5)
        self.assertAlmostEqual(delay_to_phase(1003.0, 2.5), 9.5)
        self.assertAlmostEqual(delay_to_phase(1002.5, 2.5), 0)
        # Registered at random moments, the nodes still renew 2 ms apart.
        slots = sorted((1234.567 + delay_to_phase(1234.567 + i * 0.37, heartbeat_phase(i, 50))
                        + i * 0.37) % 10 for i in range(50))
        self.assertTrue(all(abs((b - a) - 0.2) < 1e-6 for a, b in zip(slots, slots[1:])))

    def test_renewal_stats(self):
        """Latencies are summed up as count, p50, p99 and max, then forgotten."""
        stats = RenewalStats()
        self.assertEqual(stats.take(), (0, None, None, None))
        for ms in range(1, 101):
            stats.observe(ms / 1000)
        count, p50, p99, most = stats.take()
        self.assertEqual((count, p50, p99, most), (100, 0.051, 0.1, 0.1))
        self.assertEqual(stats.take()[0], 0)

    def test_credentials_issued_then_reused(self):
        """Each node gets system:node:<name> in system:nodes once; later starts reuse it."""
        pki, root = FakePKI(), self.mktemp()
        pairs = node_credentials(pki, root, ["a-sim-0", "a-sim-1"])
        self.assertEqual(pki.issued, [("system:node:a-sim-0", ("system:nodes",)),
                                      ("system:node:a-sim-1", ("system:nodes",))])
        subject = x509.load_pem_x509_certificate(pairs[1][0]).subject
        self.assertEqual(subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value,
                         "system:node:a-sim-1")
        self.assertEqual(node_credentials(pki, root, ["a-sim-0", "a-sim-1"]), pairs)
        self.assertEqual(len(pki.issued), 2)
        other = FakePKI()                  # a new cluster CA: issued anew
        node_credentials(other, root, ["a-sim-0"])
        self.assertEqual(len(other.issued), 1)


class SettingsTests(SynchronousTestCase):
    def test_defaults(self):
        """No simulated nodes unless asked; kwok-like capacity by default."""
        config = Config(data_dir="/d")
        self.assertIsNone(simulated_node_settings(config))
        self.assertEqual(config.simulated_node_capacity,
                         (("cpu", "32"), ("memory", "256Gi"), ("pods", "110")))

    def test_settings(self):
        """The settings name the base node, the root directory, the address and the capacity."""
        config = load_config({"data-dir": "/d", "simulated-nodes": "2",
                              "hostname-override": "box", "bind-address": "192.0.2.5",
                              "simulated-node-capacity": "cpu=4,memory=8Gi,example.com/gpu=1"})
        settings = simulated_node_settings(config)
        self.assertEqual((settings.count, settings.base_name, settings.root_dir,
                          settings.address), (2, "box", "/d/orchlet", "192.0.2.5"))
        self.assertEqual(settings.capacity,
                         (("cpu", "4"), ("memory", "8Gi"), ("example.com/gpu", "1")))

    def test_capacity_from_yaml_mapping(self):
        """A YAML mapping is read as the comma list is."""
        self.assertEqual(_resource_list({"cpu": 2, "pods": 10}), (("cpu", "2"), ("pods", "10")))

    def test_bad_values(self):
        """Bad counts, quantities and names are one-line errors naming the flag."""
        bad = [("simulated-nodes", "-1"), ("simulated-nodes", "10001"),
               ("simulated-nodes", "many"), ("simulated-node-capacity", "cpu"),
               ("simulated-node-capacity", "cpu=-4"), ("simulated-node-capacity", "cpu=4x"),
               ("simulated-node-capacity", "CPU=4"), ("simulated-node-capacity", ""),
               ("simulated-node-capacity", "cpu=1,cpu=2")]
        for flag, value in bad:
            with self.assertRaises(ConfigError, msg=f"{flag}={value}") as caught:
                load_config({flag: value})
            self.assertIn(f"--{flag}", str(caught.exception))
        for good in ("1e3", "0.5", ".5", "100m", "1Ki", "2E", "+3"):
            load_config({"simulated-node-capacity": f"cpu={good}"})

    def test_orchlet_only_needs_orchconfig(self):
        """In a process of their own, the nodes need an orchconfig to ask for identities with."""
        with self.assertRaises(ConfigError) as caught:
            Config(orchlet_only=True, simulated_nodes=2, bootstrap_token="abcdef.0123456789abcdef",
                   server="https://h")
        self.assertIn("--orchconfig", str(caught.exception))
        config = Config(orchlet_only=True, simulated_nodes=2, orchconfig="/a/admin.orchconfig",
                        data_dir="/d")
        self.assertEqual(simulated_node_settings(config).orchconfig, "/a/admin.orchconfig")
        self.assertIsNone(simulated_node_settings(
            Config(simulated_nodes=2, orchconfig="/a/x", data_dir="/d")).orchconfig)


class TreeTests(SynchronousTestCase):
    def test_tree(self):
        """Simulated nodes come last (started last, stopped first), local agent or not."""
        top = make_service(Config(data_dir=self.mktemp(), secure_port=0, orchlet_port=0,
                                  simulated_nodes=2), Clock())
        self.assertEqual([type(s) for s in top], [ControlPlane, OrchletService, SimulatedNodes])
        top = make_service(Config(data_dir=self.mktemp(), no_orchlet=True, simulated_nodes=1),
                           Clock())
        self.assertEqual([type(s) for s in top], [ControlPlane, SimulatedNodes])

    def test_tree_of_their_own(self):
        """--orchlet-only --simulated-nodes runs the nodes alone, with the orchconfig's API server."""
        path = os.path.join(self.mktemp())
        ca, ca_key = create_ca("cluster")
        cert, key = issue_certificate(ca, ca_key, "admin", organizations=["system:masters"],
                                      client=True)
        write_orchconfig(path, "https://192.0.2.9:6443", certificate_pem(ca),
                         certificate_pem(cert), private_key_pem(key), user="admin")
        top = make_service(Config(data_dir=self.mktemp(), orchlet_only=True, orchconfig=path,
                                  simulated_nodes=3), Clock())
        [nodes] = list(top)
        self.assertIsInstance(nodes, SimulatedNodes)
        self.assertEqual(nodes.identities.url, "https://192.0.2.9:6443")
        self.assertEqual(nodes.identities.client_ca_pems, [certificate_pem(ca)])

    def test_missing_orchconfig(self):
        """A missing orchconfig stops start-up with one line naming it."""
        with self.assertRaises(SystemExit):
            make_service(Config(data_dir=self.mktemp(), orchlet_only=True,
                                orchconfig="/nonexistent/admin.orchconfig", simulated_nodes=3),
                         Clock())
