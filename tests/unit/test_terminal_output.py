"""What the CLI prints has the control characters of user text escaped (terminal.py): a name or a
path with an escape sequence, a carriage return or a right-to-left override is shown, not obeyed
by the terminal; a file name that is not UTF-8 is shown with its byte, not a UnicodeEncodeError.
The program text `jit` prints stays as is when it goes to a file or a pipe (compilable)."""
from __future__ import annotations

import os
from pathlib import Path

from customlayers.cli import main
from customlayers.terminal import escaped, one_line

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLES = ROOT / "examples" / "layers"
RAW = ("\x1b", "\x07", "\x9b", "\r", "\u202e")


def test_the_escapes():
    assert escaped("a\x1b[2Jb\rc\u202ed\n\te\x7f\x9b") == "a\\x1b[2Jb\\rc\\u202ed\n\te\\x7f\\x9b"
    assert one_line("two\nlines\tand\x00") == "two\\nlines\\tand\\x00"
    assert escaped(os.fsdecode(b"caf\xe9.xml")) == "caf\\xe9.xml"
    assert escaped("plain text, caf\u00e9 \u4e2d") == "plain text, caf\u00e9 \u4e2d"


def test_a_path_with_escape_sequences_is_shown_escaped(tmp_path, capsys):
    evil = tmp_path / "a\x1b]0;owned\x07\x1b[2J\rb\u202e.xml"
    assert main(["validate", str(evil)]) == 2
    out, err = capsys.readouterr()
    assert not any(c in out + err for c in RAW), repr(out + err)
    assert "a\\x1b]0;owned\\x07\\x1b[2J\\rb\\u202e.xml: error[CL000]: cannot read the " \
           "config" in out


def test_an_error_naming_a_path_that_is_not_utf8(tmp_path, capsys):
    """The path is in a message on stdout, whose encoding is strict: printing the surrogate
    that stands for the byte raised UnicodeEncodeError."""
    missing = os.fsdecode(bytes(tmp_path) + b"/nowhere\xff.xml")
    assert main(["validate", missing]) == 2
    out = capsys.readouterr().out
    assert f"{tmp_path}/nowhere\\xff.xml: error[CL000]: cannot read the config" in out


def test_jit_writes_the_program_as_is_to_a_pipe(tmp_path, capsys):
    source = (EXAMPLES / "relu" / "relu.cl").read_text()
    (tmp_path / "relu.cl").write_text(source.replace("\n", "\r\n", 3) + "// \x0c\n")
    (tmp_path / "relu.xml").write_text((EXAMPLES / "relu" / "relu.xml").read_text())
    assert main(["jit", "-c", str(tmp_path / "relu.xml"), "--input", "1x2x3x4"]) == 0
    out = capsys.readouterr().out
    assert "\r\n" in out and "// \x0c\n" in out


def test_layers_lists_a_name_with_a_newline_on_one_line(tmp_path, capsys):
    """`layers` printed a layer's name, entry and files as the config wrote them: a name with
    `&#10;` in it split its line, a C1 control (CSI, the escape of 8-bit terminals) or a
    right-to-left override reached the terminal."""
    (tmp_path / "relu.cl").write_text((EXAMPLES / "relu" / "relu.cl").read_text())
    text = (EXAMPLES / "relu" / "relu.xml").read_text()
    (tmp_path / "relu.xml").write_text(text.replace('name="ReLU"',
                                                    'name="Re&#10;LU&#x9b;2J&#x202e;"'))
    assert main(["layers", "-c", str(tmp_path / "relu.xml")]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0].startswith("Re\\nLU\\x9b2J\\u202e  (")
    assert not any(c in out + err for c in RAW)
