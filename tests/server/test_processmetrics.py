"""The process_* family, read from a /proc tree at scrape."""

import os

from prometheus_client.parser import text_string_to_metric_families
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.metrics import Registry
from orchd.server import processmetrics
from orchd.server.processmetrics import register_process_metrics

# A stat line whose command name holds spaces and a parenthesis, as stat(5) allows.
STAT = ("4242 (twistd (orch) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 "
        "250 150 0 0 20 0 3 0 5000 123456789 2048 18446744073709551615")
LIMITS = ("Limit                     Soft Limit           Hard Limit           Units     \n"
          "Max open files            20000                20000                files     \n")


class ProcessMetricsTests(SynchronousTestCase):
    def proc(self):
        root = self.mktemp()
        os.makedirs(os.path.join(root, "self", "fd"))
        for n in range(3):
            open(os.path.join(root, "self", "fd", str(n)), "w").close()
        with open(os.path.join(root, "self", "stat"), "w") as f:
            f.write(STAT)
        with open(os.path.join(root, "self", "limits"), "w") as f:
            f.write(LIMITS)
        with open(os.path.join(root, "stat"), "w") as f:
            f.write("cpu 1 2 3\nbtime 1700000000\n")
        return root

    def test_values_from_proc(self):
        """CPU seconds, memory, file descriptors and start time, named as Prometheus names them."""
        registry = Registry()
        register_process_metrics(registry, self.proc())
        text = registry.expose().decode()
        values = {s.name: s.value for f in text_string_to_metric_families(text)
                  for s in f.samples}
        ticks, page = processmetrics._TICKS, processmetrics._PAGE
        self.assertEqual(values, {
            "process_cpu_seconds_total": 400 / ticks,
            "process_resident_memory_bytes": 2048 * page,
            "process_virtual_memory_bytes": 123456789,
            "process_open_fds": 3,
            "process_max_fds": 20000,
            "process_start_time_seconds": 1700000000 + 5000 / ticks,
        })

    def test_no_proc(self):
        """Without /proc the family is left out and the scrape still answers."""
        registry = Registry()
        register_process_metrics(registry, self.mktemp())
        self.assertEqual(registry.expose(), b"")
