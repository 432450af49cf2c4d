"""`python -m customlayers ...`: the command line (customlayers/cli).

The import of the CLI runs behind a KeyboardInterrupt handler: Ctrl-C while Python is still
loading it is a one-line message and exit 130, as everywhere else in the CLI, not a traceback.
"""
import sys


def _run() -> int:
    try:
        from .cli import main
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(_run())
