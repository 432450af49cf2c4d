"""Ctrl-C in the first moments of every entry point (`python cli.py`, the `customlayers` script,
`python -m customlayers`): "interrupted" and exit 130, never a traceback. SIGINT in the first
90 ms used to arrive while cli.py and the script's wrapper imported customlayers.cli, before the
CLI's handler existed. Here an import hook raises KeyboardInterrupt at a module the CLI imports
early, where the signal would have landed."""
from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

HOOK = """import sys
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            raise KeyboardInterrupt
sys.meta_path.insert(0, Interrupt())
sys.argv = ['customlayers', 'validate', 'x.xml']
"""


def run(module: str, entry: str) -> subprocess.CompletedProcess:
    code = HOOK.format(module=module) + entry
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def script_entry() -> str:
    """What the `customlayers` script's wrapper runs (pip writes it from pyproject.toml)."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["customlayers"].partition(":")
    return f"from {module} import {function}\nsys.exit({function}())\n"


CLI_PY = "import runpy\nrunpy.run_path('cli.py', run_name='__main__')\n"
PYTHON_M = "import runpy\nrunpy.run_module('customlayers', run_name='__main__', alter_sys=True)\n"


@pytest.mark.parametrize("module", ["customlayers.cli", "customlayers.errors", "argparse",
                                    "customlayers.cli.strict_parser"])
@pytest.mark.parametrize("entry", ["cli.py", "script", "python -m"])
def test_ctrl_c_while_the_cli_is_imported(module, entry):
    proc = run(module, {"cli.py": CLI_PY, "script": script_entry(), "python -m": PYTHON_M}[entry])
    assert (proc.returncode, proc.stderr) == (130, "interrupted\n"), proc.stderr[-1500:]


MISSING = """import sys
sys.modules[{module!r}] = None      # as in a Python where it was never installed
sys.argv = ['customlayers', 'validate', 'x.xml']
"""


@pytest.mark.parametrize("entry", ["cli.py", "script", "python -m"])
def test_a_python_without_a_dependency_says_so_in_one_line(entry):
    """`python cli.py ...` run by a Python that `make demo` did not set up (the system's, not
    .venv's) names the missing package and what to run, exit 2, never a traceback."""
    code = MISSING.format(module="lxml") + {"cli.py": CLI_PY, "script": script_entry(),
                                            "python -m": PYTHON_M}[entry]
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 2, proc.stderr[-1500:]
    assert "Traceback" not in proc.stderr
    assert "lacks the package 'lxml'" in proc.stderr and "make demo" in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_the_dependencies_named_for_that_message_are_pyproject_s():
    from customlayers.__main__ import DEPENDENCIES
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {d.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip() for d in deps}
    assert set(DEPENDENCIES) == names
