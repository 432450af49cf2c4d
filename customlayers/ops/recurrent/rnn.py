"""ONNX's recurrent ops, LSTM, GRU and RNN, as built-in ops with ONNX's semantics: every
direction (forward, reverse, bidirectional), both layouts, sequence_lens, initial states,
peepholes, clip, the activations with their alpha/beta, input_forget and linear_before_reset.

Two launches, whatever the sequence length: rnn_project.cl computes X . W^T + biases for every
step at once (the bulk of the arithmetic, in parallel over steps), then rnn_recur.cl runs the
recurrence in one launch, a work-group per (direction, batch row) looping over the steps with a
barrier between them. Both read W and R transposed, made at compile time when they are
constants (the usual case), else by a transpose launch each before them. Dimensions are
kernel arguments: one program per op and variant (dtype, flags, activations), not per shape.

The IR node reads X, W, R and then the optional inputs its `inputs` attribute names, in ONNX's
order; it produces the outputs its `outputs` attribute names (Y, Y_h, Y_c), in that order.
"""
from __future__ import annotations

import numpy as np

from ...errors import BindingError
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch
from .._program import c_float, global_1d, in_double, program_text, shape_of
from ..base import Attr, Op, register_op
from . import activations

OPTIONAL_INPUTS = ("B", "sequence_lens", "initial_h", "initial_c", "P")
DIRECTIONS = ("forward", "reverse", "bidirectional")
# work-items per work-group of the recurrence, each 8 hidden units (capped by the device's
# limit and by H)
GROUP_CAP = 256
# rows of X per work-item of the projection (each one REAL8 accumulator)
ROWS_PER_ITEM = 4
INT_MAX = 2 ** 31 - 1


class _Recurrent(Op):
    """What LSTM, GRU and RNN share; a subclass sets the cell, its gates and its activations."""
    cell = 0                           # rnn_recur.cl's CELL: 1 RNN, 2 GRU, 3 LSTM
    gates = 1
    default_activations: tuple[str, ...] = ()
    inputs_allowed = OPTIONAL_INPUTS
    outputs_allowed = ("Y", "Y_h")
    input_count = (3, 8)
    attributes = (Attr("hidden_size", "int", 0), Attr("direction", "str", "forward"),
                  Attr("layout", "int", 0), Attr("clip", "float", 0.0),
                  Attr("activations", "str", ""), Attr("activation_alpha", "floats", ()),
                  Attr("activation_beta", "floats", ()), Attr("input_forget", "int", 0),
                  Attr("linear_before_reset", "int", 0), Attr("inputs", "str", ""),
                  Attr("outputs", "str", "Y,Y_h"))

    # -- reading the call ------------------------------------------------------------------
    def _names(self, attrs, key: str, allowed) -> list[str]:
        names = [n.strip() for n in attrs[key].split(",") if n.strip()]
        bad = [n for n in names if n not in allowed]
        if bad or len(set(names)) != len(names):
            raise BindingError(f"{self.type}: attribute {key}='{attrs[key]}' must list distinct "
                               f"names of {', '.join(allowed)}")
        return names

    def _geometry(self, attrs, inputs) -> dict:
        """The dimensions, checked: S, NB (batch), I, H, D, and each optional input's index."""
        optional = self._names(attrs, "inputs", self.inputs_allowed)
        if len(inputs) != 3 + len(optional):
            raise BindingError(f"{self.type}: expected X, W, R and {optional or 'no others'} "
                               f"({3 + len(optional)} inputs), found {len(inputs)}")
        at = {name: 3 + k for k, name in enumerate(optional)}
        if attrs["direction"] not in DIRECTIONS:
            raise BindingError(f"{self.type}: direction '{attrs['direction']}' is not one of "
                               f"{', '.join(DIRECTIONS)}")
        if attrs["layout"] not in (0, 1):
            raise BindingError(f"{self.type}: layout {attrs['layout']} is not 0 or 1")
        x, w, r = (shape_of(t) for t in inputs[:3])
        if len(x) != 3 or len(w) != 3 or len(r) != 3:
            raise BindingError(f"{self.type}: X, W and R must each have rank 3; found "
                               f"{[list(x), list(w), list(r)]}")
        S, NB, I = (x[1], x[0], x[2]) if attrs["layout"] else x
        D, H = 2 if attrs["direction"] == "bidirectional" else 1, r[2]
        G = self.gates
        if attrs["hidden_size"] and attrs["hidden_size"] != H:
            raise BindingError(f"{self.type}: hidden_size {attrs['hidden_size']} but R's last "
                               f"dim is {H}")
        expect = {"W": (D, G * H, I), "R": (D, G * H, H), "B": (D, 2 * G * H),
                  "sequence_lens": (NB,), "P": (D, 3 * H),
                  "initial_h": (NB, D, H) if attrs["layout"] else (D, NB, H)}
        expect["initial_c"] = expect["initial_h"]
        found = {"W": w, "R": r, **{n: shape_of(inputs[k]) for n, k in at.items()}}
        for name, shape in found.items():
            if tuple(shape) != expect[name]:
                raise BindingError(f"{self.type}: input {name} has shape {list(shape)}; "
                                   f"expected {list(expect[name])} (X {list(x)}, "
                                   f"{attrs['direction']}, hidden size {H}, layout "
                                   f"{attrs['layout']})")
        dtype = inputs[0].dtype
        if dtype not in ("f32", "f64"):
            raise BindingError(f"{self.type}: X is {dtype}; f32 and f64 are supported")
        for k, t in enumerate(inputs):
            want = "i32" if at.get("sequence_lens") == k else dtype
            if t.dtype != want:
                raise BindingError(f"{self.type}: input {k} is {t.dtype}; expected {want}")
        if min(S, NB, I, H) <= 0 or D * S * NB * G * H > INT_MAX or D * G * H * I > INT_MAX:
            raise BindingError(f"{self.type}: sizes S={S} batch={NB} input={I} hidden={H} are "
                               f"empty or too large for 32-bit indices")
        return dict(S=S, NB=NB, I=I, H=H, D=D, at=at, dtype=dtype)

    def _activations(self, attrs, D: int) -> list[tuple[str, float, float]]:
        """(key, alpha, beta) per activation, direction 0's first."""
        names = [n.strip() for n in attrs["activations"].split(",") if n.strip()] or \
            list(self.default_activations) * D
        per = len(self.default_activations)
        if len(names) != per * D:
            raise BindingError(f"{self.type}: {len(names)} activations given; {attrs['direction']}"
                               f" takes {per * D} ({per} per direction)")
        values = []
        for key in ("activation_alpha", "activation_beta"):
            given = list(attrs[key]) or [0.0] * len(names)
            if len(given) != len(names):
                raise BindingError(f"{self.type}: {key} has {len(given)} values; one per "
                                   f"activation ({len(names)}) is expected")
            values.append(given)
        for name, alpha, beta in zip(names, *values):
            activations.c_text(name, alpha, beta, self.type)       # refuses an unknown name
        return list(zip(names, *values))

    def infer_shapes(self, attrs, inputs, consts):
        g = self._geometry(attrs, inputs)
        self._activations(attrs, g["D"])
        S, NB, H, D = g["S"], g["NB"], g["H"], g["D"]
        state = (NB, D, H) if attrs["layout"] else (D, NB, H)
        shapes = {"Y": (NB, S, D, H) if attrs["layout"] else (S, D, NB, H),
                  "Y_h": state, "Y_c": state}
        outs = self._names(attrs, "outputs", self.outputs_allowed)
        if not outs:
            raise BindingError(f"{self.type}: no output asked for")
        return [(shapes[o], g["dtype"]) for o in outs]

    # -- the kernels -----------------------------------------------------------------------
    def _rb_folded(self, attrs) -> str:
        """Which gate rows' R bias the projection adds (rnn_project.cl's RB_FOLDED(n))."""
        return "1"

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        g = self._geometry(attrs, inputs)
        S, NB, I, H, D, at = g["S"], g["NB"], g["I"], g["H"], g["D"], g["at"]
        G, f64 = self.gates, g["dtype"] == "f64"
        real, size = ("double", 8) if f64 else ("float", 4)
        outs = self._names(attrs, "outputs", self.outputs_allowed)
        layout = attrs["layout"]
        dummy = Arg.scratch(9, size)

        def arg_in(name):
            return Arg.input(at[name]) if name in at else dummy

        def arg_out(name):
            return Arg.output(outs.index(name)) if name in outs else dummy

        real8 = "double8" if f64 else "float8"
        i32 = np.int32
        M = S * NB
        project = program_text(f"{self.type.lower()}_project", {
            "REAL": real, "REAL8": real8, "MB": ROWS_PER_ITEM, "HAS_B": int("B" in at),
            "RB_FOLDED(n)": self._rb_folded(attrs)}, "rnn_project.cl")
        label = self.type.lower()

        def transposed(k: int, n: int, depth: int, scratch: int):
            """Input k ([D][n][depth]) transposed: a constant made here when the input is one
            (no launch), else a launch into scratch `scratch`. (The launch or None, the arg.)"""
            count = D * n * depth
            if k in consts:
                value = np.asarray(consts[k], np.float64 if f64 else np.float32)
                return None, Arg.const(value.reshape(D, n, depth).transpose(0, 2, 1))
            dst = Arg.scratch(scratch, count * size)
            return KernelLaunch(project, "rnn_transpose", (
                Arg.input(k), dst, *(Arg.scalar(i32(v)) for v in (count, n, depth))),
                global_1d(count), label=f"{label}_transpose"), dst

        transpose_w, wt = transposed(1, G * H, I, 4)
        transpose_r, rt = transposed(2, G * H, H, 5)
        # the projection: xw[d][m][n], m a row of X in memory
        xw = Arg.scratch(0, D * M * G * H * size)
        first = KernelLaunch(project, "rnn_project", (
            Arg.input(0), wt, arg_in("B"), xw, *(Arg.scalar(i32(v)) for v in (M, I, G * H))),
            (-(-G * H // 8), -(-M // ROWS_PER_ITEM), D), label=f"{label}_project")

        # the recurrence: one work-group per (direction, batch row)
        limit = ctx.device.max_work_group_size if ctx.device is not None else GROUP_CAP
        group = max(1, min(-(-H // 8), GROUP_CAP, limit))
        fns = self._activations(attrs, D)
        per = len(self.default_activations)
        values = {"REAL": real, "REAL8": real8, "CELL": self.cell, "G": G,
                  "REVERSE(d)": {"forward": "0", "reverse": "1",
                                 "bidirectional": "((d) == 1)"}[attrs["direction"]],
                  "CLIP(v)": f"fmin(fmax((v), -{c_float(attrs['clip'])}), "
                             f"{c_float(attrs['clip'])})" if attrs["clip"] > 0 else "(v)",
                  "HAS_B": int("B" in at), "HAS_SEQ_LENS": int("sequence_lens" in at),
                  "HAS_H0": int("initial_h" in at), "HAS_C0": int("initial_c" in at),
                  "HAS_P": int("P" in at), "INPUT_FORGET": int(bool(attrs["input_forget"])),
                  "LINEAR_BEFORE_RESET": int(bool(attrs["linear_before_reset"])),
                  "WRITE_Y": int("Y" in outs), "WRITE_YH": int("Y_h" in outs),
                  "WRITE_YC": int("Y_c" in outs)}
        for slot, macro in enumerate(("F", "GG", "HH")[:per]):
            texts = [activations.c_text(*fns[d * per + slot], self.type) for d in range(D)]
            body = texts[0] if D == 1 else f"((d) == 0 ? {texts[0]} : {texts[1]})"
            values[f"{macro}(d, x)"] = in_double(body) if f64 else body
        if f64:
            values["CLIP(v)"] = in_double(values["CLIP(v)"])
        rows = (1, S) if layout else (NB, 1)      # xw's row of (t, b): t * rows[0] + b * rows[1]
        if layout:
            y_t, y_d, y_b, s_d, s_b = D * H, H, S * D * H, H, D * H
        else:
            y_t, y_d, y_b, s_d, s_b = D * NB * H, NB * H, H, NB * H, H
        state = D * NB * H * size
        recur = program_text(f"{self.type.lower()}_recur", values, "rnn_recur.cl")
        second = KernelLaunch(recur, "rnn_recur", (
            xw, rt, arg_in("B"), arg_in("sequence_lens"), arg_in("initial_h"),
            arg_in("initial_c"), arg_in("P"), arg_out("Y"), arg_out("Y_h"), arg_out("Y_c"),
            Arg.scratch(1, 2 * state), Arg.scratch(2, state), Arg.scratch(3, 2 * state),
            *(Arg.scalar(i32(v)) for v in (S, NB, H, *rows, y_t, y_d, y_b, s_d, s_b))),
            (D * NB * group,), (group,), label=f"{self.type.lower()}_recur")
        return [launch for launch in (transpose_w, transpose_r, first, second) if launch]


@register_op
class LSTM(_Recurrent):
    type = "LSTM"
    cell, gates = 3, 4
    default_activations = ("sigmoid", "tanh", "tanh")
    outputs_allowed = ("Y", "Y_h", "Y_c")


@register_op
class GRU(_Recurrent):
    type = "GRU"
    cell, gates = 2, 3
    default_activations = ("sigmoid", "tanh")
    inputs_allowed = OPTIONAL_INPUTS[:3]

    def _rb_folded(self, attrs) -> str:
        # with linear_before_reset, the h rows' R bias is inside r * (R_h . h + Rb_h)
        return f"((n) < {2 if attrs['linear_before_reset'] else 3} * (GH / 3))"


@register_op
class RNN(_Recurrent):
    type = "RNN"
    cell, gates = 1, 1
    default_activations = ("tanh",)
    inputs_allowed = OPTIONAL_INPUTS[:3]
