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
