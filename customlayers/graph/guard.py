"""The readers' last line of defence: a failure that no explicit check foresaw still becomes a
located ModelError, never a traceback.

Every defect the readers know of is checked before it can fail (limits.py, onnx/checks.py, the
checks in ir.py and the translations). What slips through a check that is missing is caught here,
named by its place ("node 3 'conv' (Conv)"), and marked `unchecked = True`, so that the fuzz
campaign (scripts/fuzz_models.py) and the property tests count it as a missing check to add,
while a user sees a message.
"""
from __future__ import annotations

from contextlib import contextmanager

from ..errors import CustomLayersError, ModelError

# What Python and numpy raise on malformed data; anything else (KeyboardInterrupt, SystemExit)
# passes through untouched.
UNFORESEEN = (IndexError, KeyError, ValueError, TypeError, AttributeError, OverflowError,
              ZeroDivisionError, MemoryError, RecursionError, UnicodeError, AssertionError)


@contextmanager
def located(where: str):
    """Run the body; an unforeseen builtin exception becomes ModelError(`where`: ...)."""
    try:
        yield
    except CustomLayersError:
        raise
    except UNFORESEEN as e:
        detail = str(e) or type(e).__name__
        if len(detail) > 300:
            detail = detail[:300] + "..."
        err = ModelError(f"{where}: cannot be read: {type(e).__name__}: {detail}")
        err.unchecked = True
        raise err from e


def is_unchecked(error: BaseException) -> bool:
    """Whether a ModelError came from `located` rather than from an explicit check."""
    return bool(getattr(error, "unchecked", False))
