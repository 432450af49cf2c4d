"""scripts/setup.sh, which `make demo` and `make test` run first: the demo's set-up installs
only the package (not the test extra, a gigabyte of Ray, OpenVINO, pandas, ...); the test
set-up upgrades such a venv with the extra, and the demo's set-up after it installs nothing.

The packages go in through uv where pip can fetch it and uv succeeds, through pip otherwise.

The venv here is a stand-in whose `python` records the pip commands it is given (and whose
`uv`, where a test puts one, records its own), and apt-get is a stand-in too: the script's
decisions are tested, not the downloads."""
from __future__ import annotations

import glob
import importlib.util
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
        run.stdout = done.stdout
        return [line for line in log.read_text().splitlines() if line]

    run.log = log
    return run, venv


def _pip_targets(commands: list[str]) -> list[str]:
    """What pip installed, without its fetching uv (which the stand-in never makes)."""
    return [c.split()[-1] for c in commands if " -m pip install " in c and
            not c.endswith(" uv")]


def _uv_installs(commands: list[str]) -> list[str]:
    return [c.split()[-1] for c in commands
            if c.split()[0].endswith("/bin/uv") and c.split()[1:3] == ["pip", "install"]]


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


def _answering_pip_config(venv: Path, log: Path, lines: list[str]) -> None:
    """The stand-in python answers `-m pip config list` with `lines`, as pip prints them."""
    answer = "".join(f"{line}\n" for line in lines)
    (venv / "pip-config").write_text(answer)
    (venv / "bin" / "python").write_text(
        f'#!/bin/sh\necho "$0 $*" >> "{log}"\n'
        f'[ "$3" = config ] && cat "{venv / "pip-config"}"\nexit 0\n')


def test_uv_installs_the_package_with_pips_indexes_and_constraints(fake):
    run, venv = fake
    _stub(venv / "bin" / "uv", run.log)
    _answering_pip_config(venv, run.log, [
        ":env:.disable-pip-version-check='1'",
        "global.constraint='/c.txt'",
        "global.extra-index-url='file:///a/simple file:///b/simple'"])
    commands = run("test")
    assert _uv_installs(commands) == [".[test]"] and _pip_targets(commands) == []
    assert not any(" -m pip install " in c for c in commands)     # a uv that runs is kept
    (uv,) = [c for c in commands if c.split()[0].endswith("/bin/uv") and " pip install " in c]
    assert "--extra-index-url file:///a/simple --extra-index-url file:///b/simple" in uv
    assert "--constraint /c.txt" in uv and "--index-strategy unsafe-best-match" in uv
    assert "--compile-bytecode" in uv         # as pip: no process compiles the modules again
    assert "setup: customlayers[test] installed by uv in " in run.stdout
    assert run("test") == []


def test_pip_installs_where_uv_fails_and_says_so(fake):
    run, venv = fake
    _stub(venv / "bin" / "uv", run.log, status=1)
    env = dict(os.environ, VENV=str(venv), PATH=f"{venv.parent / 'tools'}:{os.environ['PATH']}")
    done = subprocess.run(["bash", str(SETUP)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0
    assert "uv did not install .; pip installs it instead" in done.stderr
    assert "setup: customlayers installed by pip in " in done.stdout
    commands = [line for line in run.log.read_text().splitlines() if line]
    assert _uv_installs(commands) == ["."] and _pip_targets(commands) == ["."]


def test_pip_alone_with_installer_pip_and_an_unknown_installer_is_refused(fake, tmp_path):
    run, venv = fake
    _stub(venv / "bin" / "uv", run.log)
    commands = run("test", INSTALLER="pip")
    assert _uv_installs(commands) == [] and _pip_targets(commands) == [".[test]"]
    assert "installed by pip in " in run.stdout
    done = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, VENV=str(venv), INSTALLER="conda"))
    assert done.returncode == 2 and "unknown INSTALLER 'conda'" in done.stderr


def test_a_pip_setting_uv_is_not_told_leaves_the_install_to_pip(fake):
    run, venv = fake
    _stub(venv / "bin" / "uv", run.log)
    _answering_pip_config(venv, run.log, ["global.no-index='true'"])
    commands = run()
    assert _uv_installs(commands) == [] and _pip_targets(commands) == ["."]


# -- scripts/uv_install.py: pip's settings as uv's options ---------------------------------
def _load_uv_install():
    spec = importlib.util.spec_from_file_location("uv_install", ROOT / "scripts" / "uv_install.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


uv_install = _load_uv_install()


def test_pips_ranking_environment_over_install_over_global():
    text = ("global.index-url='https://global/simple'\n"
            ":env:.index-url='https://env/simple'\n"
            "install.index-url='https://install/simple'\n"
            "global.constraint='/g.txt'\n"
            "install.constraint='/i.txt'\n"
            "download.find-links='/not-for-install'\n")
    assert uv_install.pip_settings(text) == {"index-url": "https://env/simple",
                                             "constraint": "/i.txt"}


def test_list_settings_split_as_pip_splits_them_with_quotes_kept():
    # pip.conf's one-URL-a-line form comes out of `pip config list` as a repr with newlines;
    # a value holding ' is printed in double quotes
    text = ("global.extra-index-url='\\nhttps://a/simple\\nhttps://b/simple'\n"
            "global.find-links=\"/wheels/o'brien\"\n")
    settings = uv_install.pip_settings(text)
    args, env = uv_install.uv_arguments(settings)
    assert args == ["--extra-index-url", "https://a/simple", "--extra-index-url",
                    "https://b/simple", "--find-links", "/wheels/o'brien"]
    assert env == {}


@pytest.mark.parametrize("name", ["no-index", "pre", "only-binary", "no-binary", "no-deps",
                                  "some-future-option"])
def test_settings_uv_is_not_told_are_refused(name):
    assert uv_install.uv_arguments({name: "1"}) is None


def test_certificates_and_timeouts_go_to_uvs_environment():
    args, env = uv_install.uv_arguments({"cert": "/etc/ca.pem", "default-timeout": "180",
                                         "trusted-host": "a.example b.example"})
    assert env == {"SSL_CERT_FILE": "/etc/ca.pem", "UV_HTTP_TIMEOUT": "180"}
    assert args == ["--allow-insecure-host", "a.example", "--allow-insecure-host", "b.example"]


def test_credentials_in_urls_are_not_printed():
    line = "uv pip install --index-url https://user:s3cret@host/simple --find-links /w -e ."
    assert uv_install.hidden(line) == \
        "uv pip install --index-url https://***@host/simple --find-links /w -e ."


def test_a_uv_that_does_not_run_is_fetched_again(fake):
    """A uv in the venv that fails `--version` (a broken install) is replaced by pip, not kept:
    here the stand-in stays broken, so pip installs the package after it."""
    run, venv = fake
    _stub(venv / "bin" / "uv", run.log, status=1)
    commands = run()
    assert any(c.endswith("--force-reinstall uv") for c in commands)
    assert _pip_targets(commands) == ["."]
