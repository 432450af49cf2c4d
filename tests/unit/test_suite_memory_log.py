"""The suite's opt-in memory log (tests/suite_memory.py, CUSTOMLAYERS_TEST_MEMORY_LOG) under
pytest-xdist, as `make test` runs it: one line per test, from the worker that ran it. The
controller replays its workers' log hooks with its own memory: logged there too, every test had
a second line with the controller's resident set."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})


def pytest_configure(config):
    import suite_memory
    suite_memory.register(config)
"""


def _run(tmp_path: Path, *args: str) -> list[list[str]]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_three.py").write_text(
        "import pytest\n\n\n@pytest.mark.parametrize('i', range(3))\ndef test_x(i):\n    pass\n")
    log = tmp_path / "memory.tsv"
    env = dict(os.environ, CUSTOMLAYERS_TEST_MEMORY_LOG=str(log))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *args, "test_three.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line.split("\t") for line in log.read_text().splitlines()]


def test_each_test_is_logged_once_by_the_worker_that_ran_it(tmp_path):
    pytest.importorskip("xdist")
    header, *rows = _run(tmp_path, "-n", "2")
    assert sorted(r[0] for r in rows) == [f"test_three.py::test_x[{i}]" for i in range(3)]
    assert header == ["test", "rss_mib", "peak_mib", "growth_mib", "seconds", "process"]
    assert {r[5] for r in rows} <= {"gw0", "gw1"}


def test_one_process_logs_as_main(tmp_path):
    header, *rows = _run(tmp_path)
    assert len(header) == 6 and [r[5] for r in rows] == ["main"] * 3
