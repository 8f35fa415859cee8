# -*- test-case-name: tests.integration.test_bench -*-
"""
Every bench case still runs: C{bench/run.py --smoke} at a tiny size.

The figures are not judged here (the machines are shared and the sizes
tiny); what fails is a case that no longer starts, imports a helper that
moved, or reports nothing.
"""

import json
import os
import shutil
import sys
import tempfile

from twisted.internet import reactor
from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import SkipTest, TestCase

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class BenchSmokeTests(TestCase):
    """C{bench/run.py --smoke}, as CI runs it."""

    timeout = 900

    async def test_every_case_runs(self):
        """Every case of bench/run.py runs at a tiny size and reports its figures."""
        if not shutil.which("node"):
            raise SkipTest("the bench's load generator needs Node.js")
        workdir = tempfile.mkdtemp(prefix="orchd-bench-smoke-")
        self.addCleanup(shutil.rmtree, workdir, ignore_errors=True)
        report_path = os.path.join(workdir, "report.json")
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        out, err, code = await getProcessOutputAndValue(
            sys.executable, [os.path.join(ROOT, "bench", "run.py"), "--smoke",
                             "--json", report_path],
            env=env, path=workdir, reactor=reactor)
        self.assertEqual(code, 0, (out + err).decode(errors="replace")[-4000:])
        with open(report_path) as f:
            report = json.load(f)
        self.assertTrue(report["cases"])
        for case in report["cases"]:
            reported = [key for key in report if key == case or key.startswith(case + "-")]
            self.assertTrue(reported, f"case {case} reported nothing")

    async def test_store_writes_runs(self):
        """bench/storewrites.py creates its objects, with a LevelDB option overridden, and reports each window."""
        workdir = tempfile.mkdtemp(prefix="orchd-storewrites-smoke-")
        self.addCleanup(shutil.rmtree, workdir, ignore_errors=True)
        out, err, code = await getProcessOutputAndValue(
            sys.executable, [os.path.join(ROOT, "bench", "storewrites.py"), "--objects", "300",
                             "--window", "100", "--dir", workdir,
                             "--leveldb-option", "write_buffer_size=4194304"],
            path=workdir, reactor=reactor)
        self.assertEqual(code, 0, (out + err).decode(errors="replace")[-4000:])
        windows = [line for line in out.decode().splitlines() if "CPU us per create" in line]
        self.assertEqual([line.split()[0] for line in windows], ["100", "200", "300"])
        self.assertIn(b"Compactions", out)
