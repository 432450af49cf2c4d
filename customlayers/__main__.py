"""`python -m customlayers ...`: the command-line tool, the same as the `customlayers` script."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
