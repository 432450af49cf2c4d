"""Seeded random inputs, for every command that makes them (`run` and `benchmark` without -i,
`check`, `validate --check-bounds`, the demo): one place decides how a seed becomes values.

The rule: one generator per set of inputs that runs together (a run, a case of `check`), which
draws each input in turn. Two inputs of one set therefore never share values, even when their
shapes are the same; a fresh generator with the same seed per input did that, and a reference
that swapped two same-shaped inputs passed `check`. The seed alone still decides every value.
"""
from __future__ import annotations

import numpy as np


def generator(seed: int, *stream: int) -> np.random.Generator:
    """The generator of one set of inputs: `seed` alone, or (seed, *stream) for one of several
    sets made from one seed (`check`'s case k is stream k). numpy's SeedSequence hashes the
    whole key, so the streams of one seed and of other seeds are independent: (0, 1) shares
    nothing with (1, 0) or with seed 1."""
    return np.random.default_rng([seed, *stream] if stream else seed)


def random_array(rng: np.random.Generator, shape, dtype, high: int = 10) -> np.ndarray:
    """The next array from `rng`: standard normal for a float dtype, integers in [0, high)
    for an integer or bool one (small values: a valid index or count for most layers)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(0, high, size=shape).astype(dtype)
