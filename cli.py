"""Command-line entry point: `python cli.py ...` (the same as the `customlayers` script)."""
import sys

from customlayers.cli import main

if __name__ == "__main__":
    sys.exit(main())
