# -*- test-case-name: tests.server.test_processmetrics -*-
"""
The C{process_*} family, named as the Prometheus process collector names
it (the dashboards' CPU and memory panels read it), read from C{/proc}
when scraped: C{process_cpu_seconds_total}, C{process_resident_memory_bytes},
C{process_virtual_memory_bytes}, C{process_open_fds}, C{process_max_fds},
C{process_start_time_seconds}. Where there is no C{/proc} the family is
left out of the scrape.
"""

import os

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _stat(proc):
    with open(os.path.join(proc, "self", "stat"), "rb") as f:
        text = f.read().decode("ascii", "replace")
    # The command name is in parentheses and may hold spaces; fields follow it.
    return text[text.rindex(")") + 2:].split()


def _boot_time(proc):
    with open(os.path.join(proc, "stat"), "rb") as f:
        for line in f:
            if line.startswith(b"btime "):
                return float(line.split()[1])
    raise ValueError("no btime in /proc/stat")


def _max_fds(proc):
    with open(os.path.join(proc, "self", "limits"), "rb") as f:
        for line in f:
            if line.startswith(b"Max open files"):
                value = line.split()[3]
                return float("inf") if value == b"unlimited" else float(value)
    raise ValueError("no open-files limit in /proc/self/limits")


def register_process_metrics(registry, proc="/proc"):
    """Register the C{process_*} family in C{registry}, read from C{proc} at scrape."""
    def one(read):
        return lambda: [((), read())]

    def cpu():
        fields = _stat(proc)
        # utime and stime: fields 14 and 15 of stat(5), here 11 and 12 after the name.
        return (int(fields[11]) + int(fields[12])) / _TICKS

    registry.callback("process_cpu_seconds_total", "Total user and system CPU time spent in "
                      "seconds.", (), one(cpu), type="counter", stability="")
    registry.callback("process_resident_memory_bytes", "Resident memory size in bytes.", (),
                      one(lambda: int(_stat(proc)[21]) * _PAGE), stability="")
    registry.callback("process_virtual_memory_bytes", "Virtual memory size in bytes.", (),
                      one(lambda: int(_stat(proc)[20])), stability="")
    registry.callback("process_open_fds", "Number of open file descriptors.", (),
                      one(lambda: len(os.listdir(os.path.join(proc, "self", "fd")))),
                      stability="")
    registry.callback("process_max_fds", "Maximum number of open file descriptors.", (),
                      one(lambda: _max_fds(proc)), stability="")
    registry.callback("process_start_time_seconds", "Start time of the process since unix "
                      "epoch in seconds.", (),
                      one(lambda: _boot_time(proc) + int(_stat(proc)[19]) / _TICKS),
                      stability="")
