"""Simulated usage: CPU counters at an annotated rate, memory from an annotation."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.orchlet.metrics import resource_metrics
from orchd.orchlet.simulated import SimulatedRuntime
from orchd.orchlet.simusage import (
    CPU_USAGE, DEFAULT_NANO_CORES, DEFAULT_WORKING_SET, MEMORY_USAGE, CPUCounter, Usage,
)
from tests.orchlet.test_simulated import Observer, pod


class UsageTests(SynchronousTestCase):
    """Reading the usage annotations."""

    def test_defaults(self):
        """Without annotations a container uses one millicore and 8 MiB."""
        usage = Usage({})
        self.assertEqual((usage.nano_cores, usage.working_set),
                         (DEFAULT_NANO_CORES, DEFAULT_WORKING_SET))
        self.assertEqual(usage.problems, [])

    def test_quantities(self):
        """C{250m} is a quarter core and C{64Mi} 64 MiB."""
        usage = Usage({CPU_USAGE: "250m", MEMORY_USAGE: "64Mi"})
        self.assertEqual((usage.nano_cores, usage.working_set), (250_000_000, 64 * 2**20))

    def test_unreadable_values_ignored(self):
        """Text that is no quantity, a negative one or a huge one leaves the default."""
        for value in ("lots", "-1", "1e30", "", 5):
            usage = Usage({CPU_USAGE: value, MEMORY_USAGE: value})
            self.assertEqual((usage.nano_cores, usage.working_set),
                             (DEFAULT_NANO_CORES, DEFAULT_WORKING_SET), value)
            self.assertEqual([key for key, _ in usage.problems], [CPU_USAGE, MEMORY_USAGE])

    def test_counter_keeps_what_was_used(self):
        """A new rate applies from the change on; the counter never goes back."""
        counter = CPUCounter(100.0, 10**9)
        self.assertEqual(counter.core_nano_seconds(110.0), 10 * 10**9)
        counter.set_rate(110.0, 10**8)
        self.assertEqual(counter.core_nano_seconds(110.0), 10 * 10**9)
        self.assertEqual(counter.core_nano_seconds(120.0), 11 * 10**9)


class RuntimeUsageTests(SynchronousTestCase):
    """The simulated runtime's statistics follow the annotations."""

    def setUp(self):
        self.clock = Clock()
        self.clock.advance(1_700_000_000)
        self.runtime = SimulatedRuntime(self.clock)

    def cpu(self, stats, index=0):
        return stats["pods"][index]["cpu"]["usageCoreNanoSeconds"]

    def test_rate_changes_with_annotation(self):
        """Raising the annotation raises the rate from then on, the count kept."""
        self.runtime.sync_pod(pod(annotations={CPU_USAGE: "100m", MEMORY_USAGE: "32Mi"}))
        self.clock.advance(10)
        stats = self.runtime.stats()
        self.assertEqual(self.cpu(stats), 10**9)
        self.assertEqual(stats["pods"][0]["memory"]["workingSetBytes"], 32 * 2**20)
        changed = pod(annotations={CPU_USAGE: "500m"})
        changed["metadata"]["resourceVersion"] = "2"
        self.runtime.sync_pod(changed)
        self.clock.advance(10)
        stats = self.runtime.stats()
        self.assertEqual(self.cpu(stats), 6 * 10**9)
        self.assertEqual(stats["pods"][0]["memory"]["workingSetBytes"], DEFAULT_WORKING_SET)
        self.assertEqual(stats["pods"][0]["containers"][0]["cpu"]["usageNanoCores"],
                         500_000_000)

    def test_node_counter_never_goes_back(self):
        """The node's CPU counter keeps growing when a busy pod goes away."""
        self.runtime.sync_pod(pod(annotations={CPU_USAGE: "2"}))
        self.clock.advance(10)
        before = self.runtime.stats()["node"]["cpu"]["usageCoreNanoSeconds"]
        self.clock.advance(10)
        middle = self.runtime.stats()["node"]["cpu"]["usageCoreNanoSeconds"]
        self.assertGreaterEqual(middle - before, 20 * 10**9)
        self.runtime.kill_pod("default", "web")
        self.clock.advance(10)
        after = self.runtime.stats()["node"]["cpu"]["usageCoreNanoSeconds"]
        self.assertGreater(after, middle)

    def test_exposition_has_every_family(self):
        """The resource metrics name every family the metrics server reads, with timestamps."""
        self.runtime.sync_pod(pod(annotations={CPU_USAGE: "250m"}))
        self.clock.advance(4)
        text = resource_metrics(self.runtime.stats()).decode("utf-8")
        stamp = " 1700000004000"
        for line in ('container_cpu_usage_seconds_total{container="app",namespace="default",'
                     'pod="web"} 1' + stamp,
                     'pod_cpu_usage_seconds_total{namespace="default",pod="web"} 1' + stamp,
                     'pod_memory_working_set_bytes{namespace="default",pod="web"} 8388608'
                     + stamp,
                     "scrape_error 0", "resource_scrape_error 0"):
            self.assertIn(line + "\n", text)
        self.assertIn("\nnode_cpu_usage_seconds_total ", text)
        self.assertIn("\nnode_memory_working_set_bytes ", text)

    def test_stamped_to_the_millisecond(self):
        """Samples of the second the stats were read are stamped to the read's millisecond."""
        self.runtime.sync_pod(pod())
        self.clock.advance(4.25)
        text = resource_metrics(self.runtime.stats(), self.clock.seconds()).decode("utf-8")
        self.assertIn('pod_memory_working_set_bytes{namespace="default",pod="web"} 8388608 '
                      "1700000004250\n", text)

    def test_unreadable_annotation_reported(self):
        """An unreadable usage annotation is a FailedSimulation event, once."""
        observer = Observer()
        self.runtime.observe(observer)
        self.runtime.sync_pod(pod(annotations={CPU_USAGE: "fast"}))
        again = pod(annotations={CPU_USAGE: "fast"})
        again["metadata"]["resourceVersion"] = "2"
        self.runtime.sync_pod(again)
        failed = [event for event in observer.events if event[2] == "FailedSimulation"]
        self.assertEqual(failed, [("web", "Warning", "FailedSimulation",
                                   f"annotation {CPU_USAGE} ignored: a quantity from 0 to 1024",
                                   None)])
