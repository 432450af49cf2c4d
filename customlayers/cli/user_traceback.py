"""The traceback of an exception raised in the user's own Python code (a Python layer), as the
CLI shows it under our one-line error: the user's frames (their file and line) and the
exception, without this package's frames or importlib's, which say nothing about their bug."""
from __future__ import annotations

import traceback
from pathlib import Path

PACKAGE_DIR = str(Path(__file__).resolve().parents[1])


def is_ours(filename: str) -> bool:
    return filename.startswith("<frozen ") or str(Path(filename).resolve()).startswith(
        PACKAGE_DIR)


def user_traceback(error: BaseException) -> str:
    """'Traceback (most recent call last):' and the user's frames, then the exception line(s)
    (a SyntaxError's with its file, line and caret)."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not is_ours(f.filename)]
    lines = []
    if frames:
        lines.append("Traceback (most recent call last):\n")
        lines += traceback.format_list(frames)
    lines += traceback.format_exception_only(type(error), error)
    return "".join(lines).rstrip("\n")
