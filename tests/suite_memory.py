"""The test process's memory (issue 22, item 4: the suite peaked at 7.6-10 GB).

CollectAfterGrowth, always on: a network that a test drops is a reference cycle (the network
pools its requests, each request holds its network) with its weights and buffers, hundreds of
MB for the light models; only a full collection frees it, and a long process runs one rarely
(the collector's oldest generation waits for a quarter of its objects to be new). So after a
test that left the process GROWTH_MIB larger than after the last collection, collect now: the
cost (a fraction of a second) is paid only after the tests that allocate much.

MemoryLog, opt-in: CUSTOMLAYERS_TEST_MEMORY_LOG=path appends a tab-separated line per finished
test (teardown included): its id, the resident set after it (MiB), the process's peak so far
(MiB), the growth it left behind (MiB), its wall time (s) and the process that ran it ("main",
or pytest-xdist's worker id: each worker has its own resident set and peak). Sorting by the
growth column names the tests that keep memory alive; the peak column shows where the
high-water mark was reached. Under pytest-xdist (`make test`) the controller runs no test (it
replays the workers' log hooks, with its own memory): it writes the header only, and the
workers append their lines.

Linux only (reads /proc/self/status); elsewhere neither does anything.
"""
from __future__ import annotations

import gc
import os
import time
from pathlib import Path

LOG_ENV = "CUSTOMLAYERS_TEST_MEMORY_LOG"
GROWTH_MIB = 256


def _status_mib(field: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


class CollectAfterGrowth:
    def __init__(self):
        self.after_collection = _status_mib("VmRSS")

    def pytest_runtest_logfinish(self, nodeid, location):
        rss = _status_mib("VmRSS")
        if rss is None or self.after_collection is None:
            return
        if rss > self.after_collection + GROWTH_MIB:
            gc.collect()
            self.after_collection = _status_mib("VmRSS")
        else:   # memory freed otherwise (a module's fixtures) lowers the mark too
            self.after_collection = min(self.after_collection, rss)


HEADER = "test\trss_mib\tpeak_mib\tgrowth_mib\tseconds\tprocess\n"


class MemoryLog:
    def __init__(self, path: str, process: str):
        self.path = Path(path)
        self.process = process
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
                    f"{time.perf_counter() - self.start:.2f}\t{self.process}\n")


def register(config) -> None:
    # pluggy calls the plugin registered last first: the log, registered first, sees the
    # process as the next test finds it (after any collection); its peak column is unaffected
    path = os.environ.get(LOG_ENV)
    if path:
        worker = getattr(config, "workerinput", {}).get("workerid")
        if worker is None:               # this process starts the run: a fresh log
            Path(path).write_text(HEADER)
        if worker is not None or not _xdist_controller(config):
            config.pluginmanager.register(MemoryLog(path, worker or "main"),
                                          "customlayers-memory-log")
    config.pluginmanager.register(CollectAfterGrowth(), "customlayers-collect-after-growth")


def _xdist_controller(config) -> bool:
    """Whether this process hands the tests to pytest-xdist's workers (xdist has settled its
    options before any plugin's pytest_configure; a worker's own `dist` is "no")."""
    return not hasattr(config, "workerinput") and \
        (getattr(config.option, "dist", "no") or "no") != "no"
