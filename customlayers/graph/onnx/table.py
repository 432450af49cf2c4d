"""The one table of ONNX -> IR translations that the reader asks: ONNX op_type -> translation.

Importing the op modules is what registers their translations (@translates in translate.py);
this is the one module that imports them all, so a table read from here is complete. Nothing
in graph/onnx/ other than reader.py imports this module, and of this room the op modules (ops/) import
only translate.py, deferred.py and checks.py: no module imports one that imports it back.
"""
from __future__ import annotations

# importing the op modules registers their translations
from .ops import (arith, attention, einsum, fold, image, index, logic, nn, norm,  # noqa: F401
                  quant, recurrent, tensor)  # noqa: F401
from . import control  # noqa: F401 - If/Loop/Scan/sequences: rewritten before translation
from .translate import REGISTERED

TRANSLATIONS: dict = REGISTERED


def translated_ops() -> list[str]:
    """The ONNX op types with a translation, sorted (the reader's refusal lists them)."""
    return sorted(TRANSLATIONS)
