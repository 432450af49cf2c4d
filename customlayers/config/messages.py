"""How values appear in messages: a descriptor value can be megabytes long and a list of numbers
can be millions long, but a diagnostic must stay one readable line (a message of 89 MB listing
every missing arg-index is not a message)."""
from __future__ import annotations

from typing import Iterable

CLIP = 80          # characters of a value shown in a message
LIST_ITEMS = 10    # items of a list shown in a message


def clipped(text: str, limit: int = CLIP) -> str:
    """`text` for a message: control characters escaped (a message is one line; an attribute
    may hold a newline as `&#10;`), cut to `limit` characters with its length said when it was
    longer."""
    shown = text if text.isprintable() else "".join(
        repr(c)[1:-1] if ord(c) < 32 or ord(c) == 127 else c for c in text)
    if len(shown) <= limit:
        return shown
    return f"{shown[:limit]}... ({len(text)} characters)"


def ranges(numbers: Iterable[int]) -> str:
    """Sorted, de-duplicated numbers as runs: [0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8'; at most
    LIST_ITEMS runs, then how many more numbers there are."""
    values = sorted(set(numbers))
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    shown = [str(a) if a == b else f"{a}-{b}" for a, b in runs[:LIST_ITEMS]]
    if len(runs) > LIST_ITEMS:
        rest = sum(b - a + 1 for a, b in runs[LIST_ITEMS:])
        shown.append(f"and {rest} more")
    return ", ".join(shown)


def gap_ranges(present: Iterable[int], upto: int) -> list[tuple[int, int]]:
    """The runs of 0..upto (inclusive) missing from `present`, computed from the present values
    (never by building range(upto + 1): upto may be huge)."""
    gaps, expected = [], 0
    for v in sorted(set(present)):
        if v > upto:
            break
        if v > expected:
            gaps.append((expected, v - 1))
        expected = v + 1
    if expected <= upto:
        gaps.append((expected, upto))
    return gaps


def runs_text(runs: list[tuple[int, int]]) -> str:
    """[(3, 9), (12, 12)] -> '3-9, 12' (at most LIST_ITEMS runs, then how many more)."""
    shown = [str(a) if a == b else f"{a}-{b}" for a, b in runs[:LIST_ITEMS]]
    if len(runs) > LIST_ITEMS:
        shown.append(f"and {len(runs) - LIST_ITEMS} more runs")
    return ", ".join(shown)


def listed(items: list[str]) -> str:
    """'a, b, c' with at most LIST_ITEMS items, then how many more."""
    shown = [clipped(i) for i in items[:LIST_ITEMS]]
    if len(items) > LIST_ITEMS:
        shown.append(f"and {len(items) - LIST_ITEMS} more")
    return ", ".join(shown)
