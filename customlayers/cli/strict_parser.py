"""An argparse parser that never misreads a word starting with one dash.

OpenVINO's tools spell long options with one dash (-niter, -data_shape, -hint), and our users
type them. Plain argparse reads an unknown one as a short option glued to its value
(`-data_shape x[1,3,8,8]` became `-d ata_shape`; `-hint latency` became `-h`, printed the help
and exited 0), or as an abbreviation of a longer option. Here a word of one dash and two or
more letters must be one of the command's options exactly (or OPTION=VALUE); anything else is
a usage error that names it and what it may have meant (exit 2).
"""
from __future__ import annotations

import argparse
import difflib
import re
import sys

# what argparse would take apart: one dash, a letter, more characters ("-5" and "-.5" are
# numbers, "--x" is a long option and is never split)
_SINGLE_DASH_WORD = re.compile(r"-[A-Za-z_].+")


class StrictParser(argparse.ArgumentParser):
    """ArgumentParser without abbreviations and without short options glued to a value."""

    def __init__(self, *args, commands: bool = False, **kwargs):
        """commands: this parser takes a subcommand, whose own parser checks the words after
        it (the words before it are this parser's options, none of which takes a value)."""
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._stop_at_command = commands

    def parse_known_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        self._refuse_unknown_single_dash(args)
        return super().parse_known_args(args, namespace)

    def _refuse_unknown_single_dash(self, args: list[str]) -> None:
        # _option_string_actions is argparse's table of every option string of this parser and
        # its groups (stable since Python 3.2); there is no public view of it
        known = self._option_string_actions
        for arg in args:
            if arg == "--" or (self._stop_at_command and not arg.startswith("-")):
                return
            if not _SINGLE_DASH_WORD.fullmatch(arg):
                continue
            name = arg.split("=", 1)[0]
            if name in known:
                continue
            message = f"unknown option '{name}'"
            close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.75)
            if close:
                message += f"; did you mean {' or '.join(close)}?"
            if name[:2] in known:
                message += (f" (an option and its value are written apart: "
                            f"{name[:2]} {arg[2:]})")
            self.error(message)
