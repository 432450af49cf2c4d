"""The floors of ARCHITECTURE.md hold: import-linter's contracts in pyproject.toml (layers
cli, integrations > runtime > passes > ops > jit > config, graph > errors, settings; no pyopencl
under config, jit, graph, ops or passes; Ray only in integrations) pass, and they do catch an
upward import; inside runtime, the rooms are one-way and only device/ and execute/ import
pyopencl."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter")    # a test dependency (make test installs it)

ROOT = Path(__file__).resolve().parents[2]


def kept_broken(broken: int) -> str:
    """import-linter's summary line when `broken` of pyproject.toml's contracts fail."""
    import tomllib
    with open(ROOT / "pyproject.toml", "rb") as f:
        total = len(tomllib.load(f)["tool"]["importlinter"]["contracts"])
    return f"{total - broken} kept, {broken} broken"


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("lint-imports")
    command = [str(exe)] if exe.exists() else [shutil.which("lint-imports") or "lint-imports"]
    return subprocess.run(command + ["--no-cache"], cwd=cwd, capture_output=True, text=True,
                          env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"})


def test_the_import_contracts_are_kept():
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert kept_broken(0) in done.stdout


def _copy_with(tmp_path: Path, line: str, *modules: str) -> subprocess.CompletedProcess:
    """import-linter on a copy of the package where each of `modules` ends with the import
    `line`."""
    shutil.copytree(ROOT / "customlayers", tmp_path / "customlayers",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for module in modules:
        bad = tmp_path / "customlayers" / module
        bad.write_text(bad.read_text() + f"\n{line}  # noqa\n")
    return lint_imports(tmp_path)


def test_an_upward_import_breaks_a_contract(tmp_path):
    # a copy of the package whose jit/ imports runtime/ (and so pyopencl): both contracts fail
    done = _copy_with(tmp_path, "from ..runtime.device import build", "jit/tensor.py")
    assert done.returncode != 0
    assert kept_broken(2) in done.stdout
    assert "customlayers.jit.tensor -> customlayers.runtime.device.build" in done.stdout


def test_a_pass_that_imports_runtime_breaks_a_contract(tmp_path):
    # the graph passes run without a device: one that reaches for runtime/ (and so pyopencl)
    # breaks the floors and the OpenCL contract
    done = _copy_with(tmp_path, "from ..runtime.device import device", "passes/graph_edit.py")
    assert done.returncode != 0
    assert kept_broken(2) in done.stdout
    assert "customlayers.passes.graph_edit -> customlayers.runtime.device.device" in done.stdout


def test_ray_outside_integrations_breaks_a_contract(tmp_path):
    # Ray is an optional extra: a runtime module that imports it would break a plain install
    done = _copy_with(tmp_path, "import ray", "runtime/compile/network.py")
    assert done.returncode != 0
    assert kept_broken(1) in done.stdout
    assert "customlayers.runtime.compile.network -> ray" in done.stdout


def test_a_room_that_imports_a_room_above_breaks_a_contract(tmp_path):
    # execute/ runs what compile/ planned; a request that reached back up into the compiler
    # would make the rooms a circle again
    done = _copy_with(tmp_path, "from ..compile import planner", "runtime/execute/run.py")
    assert done.returncode != 0
    assert kept_broken(1) in done.stdout
    assert "customlayers.runtime.execute.run -> customlayers.runtime.compile.planner" in done.stdout


def test_pyopencl_outside_the_device_and_execute_rooms_breaks_a_contract(tmp_path):
    done = _copy_with(tmp_path, "import pyopencl", "runtime/compile/plan.py")
    assert done.returncode != 0
    assert kept_broken(1) in done.stdout
    assert "customlayers.runtime.compile.plan -> pyopencl" in done.stdout


def test_a_layer_command_that_imports_a_model_command_breaks_a_contract(tmp_path):
    done = _copy_with(tmp_path, "from ..model_commands import run", "cli/layer_commands/jit.py")
    assert done.returncode != 0
    assert kept_broken(1) in done.stdout
    assert "customlayers.cli.layer_commands.jit -> customlayers.cli.model_commands.run" in done.stdout


CHECKERS_AND_TUNER = ("runtime/checks/bounds.py", "runtime/checks/bounds_process.py",
                      "runtime/checks/bounds_worker.py", "runtime/checks/sanitize_worker.py",
                      "runtime/tuning/tuning.py")


def test_the_checkers_and_the_tuner_reach_opencl_only_through_device_and_execute(tmp_path):
    # their buffers, launches and device opening live in execute/ and device/ (one_launch.py,
    # launch_timing.py, device.open_engine_at): none of them is an exception to the contract
    done = _copy_with(tmp_path, "import pyopencl", *CHECKERS_AND_TUNER)
    assert done.returncode != 0
    assert kept_broken(1) in done.stdout
    for module in CHECKERS_AND_TUNER:
        name = "customlayers." + module[:-3].replace("/", ".")
        assert f"{name} -> pyopencl" in done.stdout, name


PACKAGE = ROOT / "customlayers"


def test_no_folder_holds_more_than_about_twelve_modules():
    # a room is read at a glance: past a dozen modules a folder holds several concerns
    for init in PACKAGE.rglob("__init__.py"):
        modules = [p.name for p in init.parent.glob("*.py") if p.name != "__init__.py"]
        assert len(modules) <= 12, (str(init.parent.relative_to(ROOT)), sorted(modules))


def test_every_folder_says_what_it_is_for_and_what_it_may_import():
    import ast
    for init in PACKAGE.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "May import:" in doc, str(init.relative_to(ROOT))
