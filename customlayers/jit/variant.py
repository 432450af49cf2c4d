"""Kernel variants as objects: the ways one layer implementation can run a call.

An implementation lists the variants that apply to a call (LayerImpl.variants, the heuristic's
best first); the tuner (runtime/tuning/tuning.py) builds and times them and hands the fastest back
through CompileContext.variant; the implementation then runs that object's launches. Nothing
reads a variant's name back: `name` is stable text for people and files (the tuning cache's
record, trace and profile labels), and every parameter a variant needs is a field of its own.

A variant's `applies` and `launches` receive the implementation's plan of the call: whatever
that implementation prepared once for it (a convolution's geometry, kernel arguments and fused
epilogue; a custom layer's bound launch). Each implementation defines its plan; a variant is
only ever handed the plan of the implementation that listed it.
"""
from __future__ import annotations

from typing import Any, Iterable

from .launch import KernelLaunch


class KernelVariant:
    """Base of kernel variants. Subclasses are frozen dataclasses (hashable, compared by their
    fields) whose `name` is derived from the fields."""
    # what the variant needs of a call, for the message when it is asked for one it does not
    # apply to ("" : the implementation says it does not apply)
    needs = ""

    @property
    def name(self) -> str:
        raise NotImplementedError

    def applies(self, plan: Any) -> bool:
        """Whether this variant can run the call `plan` describes."""
        return True

    def launches(self, plan: Any) -> list[KernelLaunch]:
        """The kernels that compute the call `plan` describes, in order."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.name


def variant_named(variants: Iterable[KernelVariant], name: str | None) -> KernelVariant | None:
    """The variant of `variants` whose name is `name` (a tuning cache's record), else None."""
    return next((v for v in variants if v.name == name), None)
