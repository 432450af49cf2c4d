"""The one walk that turns a KernelLaunch's arguments (jit/launch.py Arg) into kernel arguments.

Every place that binds a launch (the request, the tuner, the bounds checker, the sanitizer,
BoundKernel's numpy call) and the compiler's count of the bytes a plan needs go through
`bind_args`: it asks the caller's ArgumentSource for the value of each argument by its kind, so
a new kind of argument is added here once, and an unknown one is refused here with its layer
named, the same for every caller. The source decides what a buffer is (a request's slot, a
guarded sub-buffer, bytes for Oclgrind's worker, a count) and keeps what it makes alive:
pyopencl's set_args does not. No OpenCL here: the sanitizer's parent process binds to bytes.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...errors import ModelError
from ...jit.launch import Arg


class ArgumentSource:
    """What one caller binds each kind of argument to. `arg` is the launch's Arg, `position` its
    kernel argument number. A subclass overrides the kinds its launches use; the defaults pass a
    scalar by value and refuse the rest (a kind the caller cannot bind)."""

    def input(self, arg: Arg, position: int):
        raise self._cannot(arg)

    def output(self, arg: Arg, position: int):
        raise self._cannot(arg)

    def const(self, arg: Arg, position: int):
        raise self._cannot(arg)

    def scratch(self, arg: Arg, position: int):
        raise self._cannot(arg)

    def scalar(self, arg: Arg, position: int):
        return arg.value

    def local(self, arg: Arg, position: int):
        raise self._cannot(arg)

    def state_flag(self, arg: Arg, position: int):
        """Whether the state was written (jit/launch.py): a request binds its own flag; a
        launch run alone reads its state as reset."""
        return np.int32(0)

    def _cannot(self, arg: Arg) -> Exception:
        return ModelError(f"{type(self).__name__} cannot bind an argument of kind {arg.kind!r}")


KINDS = ("input", "output", "const", "scratch", "scalar", "local", "state_flag")


def bind_args(args: Sequence[Arg], source: ArgumentSource, layer: str) -> list:
    """The kernel arguments of `args`, in order, each what `source` gives for its kind.
    ModelError naming `layer` for a kind that jit/launch.py does not define."""
    bound = []
    for position, arg in enumerate(args):
        if arg.kind not in KINDS:
            raise ModelError(f"layer '{layer}': unknown argument kind {arg.kind!r}")
        bound.append(getattr(source, arg.kind)(arg, position))
    return bound
