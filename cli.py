"""Command-line entry point: `python cli.py ...` (the same as the `customlayers` script).

The package is imported behind the KeyboardInterrupt handler of customlayers/__main__.py: Ctrl-C
in the first moments, while the CLI's modules load, is "interrupted" and exit 130."""
import sys

if __name__ == "__main__":
    try:
        from customlayers.__main__ import main
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(main())
