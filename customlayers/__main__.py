"""`python -m customlayers ...`, and the `customlayers` script (pyproject.toml): the command line
(customlayers/cli).

The import of the CLI runs behind a KeyboardInterrupt handler: Ctrl-C while Python is still
loading it is a one-line message and exit 130, as everywhere else in the CLI, not a traceback.
This module imports nothing else first, so the script's own import of it is over at once.
"""
import sys


# the import names of pyproject.toml's dependencies: a Python without one of them is one that
# `make demo`/`pip install` never set up (`python cli.py` run by the system's python, outside
# .venv), which deserves a line that says so, not a ModuleNotFoundError traceback
DEPENDENCIES = ("lxml", "pyopencl", "numpy", "jsonschema", "platformdirs", "onnx")


def missing_dependency() -> str | None:
    """The first dependency this Python cannot import, found without importing any (the CLI
    imports its commands' modules late, so a failed import would surface anywhere)."""
    from importlib.util import find_spec
    return next((name for name in DEPENDENCIES if find_spec(name) is None), None)


def main() -> int:
    try:
        missing = missing_dependency()
        if missing is not None:
            print(f"customlayers: error: this Python ({sys.executable}) lacks the package "
                  f"'{missing}' that customlayers needs: run `make demo` in the repository (it "
                  f"creates .venv), then .venv/bin/customlayers or .venv/bin/python cli.py; "
                  f"or `pip install customlayers`", file=sys.stderr)
            return 2
        from .cli import main as cli_main
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
