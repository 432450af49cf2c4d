"""`python -m customlayers ...`, and the `customlayers` script (pyproject.toml): the command line
(customlayers/cli).

The import of the CLI runs behind a KeyboardInterrupt handler: Ctrl-C while Python is still
loading it is a one-line message and exit 130, as everywhere else in the CLI, not a traceback.
This module imports nothing else first, so the script's own import of it is over at once.
"""
import sys


def main() -> int:
    try:
        from .cli import main as cli_main
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
