"""Opt-in record of the test process's memory, one line per test (issue 22: the suite's peak).

Set CUSTOMLAYERS_TEST_MEMORY_LOG=path and each finished test (teardown included) appends a
tab-separated line: the test's id, its resident set after teardown (MiB), the process's peak so
far (MiB), the growth this test left behind (MiB) and its wall time (s). Sorting by the growth
column names the tests that keep memory alive; the peak column shows where the high-water mark
was reached. Linux only (reads /proc/self/status); elsewhere the hook records nothing.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

ENV = "CUSTOMLAYERS_TEST_MEMORY_LOG"


def _status_mib(field: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


class MemoryLog:
    """A pytest plugin: registered by tests/conftest.py when ENV names a file."""

    def __init__(self, path: str):
        self.path = Path(path)
        self.path.write_text("test\trss_mib\tpeak_mib\tgrowth_mib\tseconds\n")
        self.before = _status_mib("VmRSS") or 0.0
        self.start = time.perf_counter()

    def pytest_runtest_logstart(self, nodeid, location):
        self.before = _status_mib("VmRSS") or 0.0
        self.start = time.perf_counter()

    def pytest_runtest_logfinish(self, nodeid, location):
        rss = _status_mib("VmRSS")
        if rss is None:
            return
        peak = _status_mib("VmHWM") or 0.0
        with self.path.open("a") as f:
            f.write(f"{nodeid}\t{rss:.0f}\t{peak:.0f}\t{rss - self.before:.0f}\t"
                    f"{time.perf_counter() - self.start:.2f}\n")


def register(config) -> None:
    path = os.environ.get(ENV)
    if path:
        config.pluginmanager.register(MemoryLog(path), "customlayers-memory-log")
