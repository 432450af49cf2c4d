"""scripts/setup.sh, which `make demo` and `make test` run first: the demo's set-up installs
only the package (not the test extra, a gigabyte of Ray, OpenVINO, pandas, ...); the test
set-up upgrades such a venv with the extra, and the demo's set-up after it installs nothing.

The packages go in through uv where pip can fetch it and uv succeeds, through pip otherwise.

The venv here is a stand-in whose `python` records the pip commands it is given (and whose
`uv`, where a test puts one, records its own), and apt-get is a stand-in too: the script's
decisions are tested, not the downloads."""
from __future__ import annotations

import glob
import os
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "scripts" / "setup.sh"

pytestmark = pytest.mark.skipif(not glob.glob("/etc/OpenCL/vendors/*.icd"),
                                reason="setup.sh would install PoCL on this machine")


def _stub(path: Path, log: Path, status: int = 0) -> None:
    path.write_text(f'#!/bin/sh\necho "$0 $*" >> "{log}"\nexit {status}\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def fake(tmp_path):
    """(run(level) -> the commands that run made, the venv folder)."""
    venv, tools, log = tmp_path / "venv", tmp_path / "tools", tmp_path / "log"
    (venv / "bin").mkdir(parents=True)
    tools.mkdir()
    _stub(venv / "bin" / "python", log)
    for tool in ("apt-get", "sudo"):
        _stub(tools / tool, log)

    def run(*level: str, **more: str) -> list[str]:
        log.write_text("")
        env = dict(os.environ, VENV=str(venv), PATH=f"{tools}:{os.environ['PATH']}", **more)
        done = subprocess.run(["bash", str(SETUP), *level], env=env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return [line for line in log.read_text().splitlines() if line]

    run.log = log
    return run, venv


def _pip_targets(commands: list[str]) -> list[str]:
    """What pip installed, without its fetching uv (which the stand-in never makes)."""
    return [c.split()[-1] for c in commands if " -m pip install " in c and
            not c.endswith(" -q uv")]


def _uv_installs(commands: list[str]) -> list[str]:
    return [c.split()[-1] for c in commands if c.split()[0].endswith("/bin/uv")]


def test_the_demo_installs_the_package_without_the_test_extra(fake):
    run, _ = fake
    assert _pip_targets(run()) == ["."]
    assert run() == []                        # done: nothing again


def test_the_test_setup_upgrades_a_demo_venv_and_the_demo_then_installs_nothing(fake):
    run, _ = fake
    assert _pip_targets(run()) == ["."]
    assert _pip_targets(run("test")) == [".[test]"]
    assert run() == []
    assert run("test") == []


def test_a_changed_pyproject_makes_both_levels_install_again(fake):
    run, venv = fake
    run("test")
    older = (ROOT / "pyproject.toml").stat().st_mtime - 60
    for stamp in venv.glob(".customlayers-installed*"):
        os.utime(stamp, (older, older))
    assert _pip_targets(run()) == ["."]
    assert _pip_targets(run("test")) == [".[test]"]


def test_an_unknown_level_is_refused(fake, tmp_path):
    done = subprocess.run(["bash", str(SETUP), "tests"], capture_output=True, text=True,
                          env=dict(os.environ, VENV=str(tmp_path / "venv")), timeout=60)
    assert done.returncode == 2
    assert "unknown level 'tests'" in done.stderr


def test_uv_installs_the_package_with_pips_indexes_and_constraints(fake, tmp_path):
    run, venv = fake
    _stub(venv / "bin" / "uv", run.log)
    config = tmp_path / "pip.conf"
    config.write_text("[global]\nextra-index-url = file:///a/simple file:///b/simple\n"
                      "constraint = /c.txt\n")
    # the stand-in python answers `pip config list` as pip does
    (venv / "bin" / "python").write_text(
        f'#!/bin/sh\necho "$0 $*" >> "{run.log}"\n'
        f'[ "$3" = config ] && printf "%s\\n" "global.extra-index-url=\'file:///a/simple '
        f'file:///b/simple\'" "global.constraint=\'/c.txt\'"\nexit 0\n')
    commands = run("test")
    assert _uv_installs(commands) == [".[test]"] and _pip_targets(commands) == []
    (uv,) = [c for c in commands if c.split()[0].endswith("/bin/uv")]
    assert "--extra-index-url file:///a/simple --extra-index-url file:///b/simple" in uv
    assert "--constraint /c.txt" in uv and "--index-strategy unsafe-best-match" in uv
    assert "--compile-bytecode" in uv         # as pip: no process compiles the modules again
    assert run("test") == []


def test_pip_installs_where_uv_fails_and_with_installer_pip(fake):
    run, venv = fake
    _stub(venv / "bin" / "uv", run.log, status=1)
    commands = run()
    assert _uv_installs(commands) == ["."] and _pip_targets(commands) == ["."]
    commands = run("test", INSTALLER="pip")
    assert _uv_installs(commands) == [] and _pip_targets(commands) == [".[test]"]
