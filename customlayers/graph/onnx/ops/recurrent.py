"""ONNX's recurrent ops, LSTM, GRU and RNN, each translated into one IR node of the same type
(ops/recurrent/rnn.py), whose attributes are the ONNX node's, checked here, plus the optional
inputs it reads (`inputs`) and the outputs the model asks for (`outputs`).

The activations' alpha and beta are handed out here, once per function, as ONNX Runtime does:
the functions that take an alpha (a beta) take the next value of activation_alpha
(activation_beta) in order, or their default once the list is used up.
"""
from __future__ import annotations

from ..translate import dtype_of, float_text, optional_input, text_attr, translates

# name -> (default alpha, default beta), None where the function takes none (ONNX Runtime's
# defaults: the spec gives none)
ACTIVATIONS = {
    "Sigmoid": (None, None), "Tanh": (None, None), "Relu": (None, None),
    "Affine": (0.0, 0.0), "LeakyRelu": (0.01, None), "ThresholdedRelu": (0.0, None),
    "ScaledTanh": (0.0, 0.0), "HardSigmoid": (0.2, 0.5), "Elu": (1.0, None),
    "Softsign": (None, None), "Softplus": (None, None),
}
_BY_KEY = {name.lower(): name for name in ACTIVATIONS}

# op -> (activations per direction with their defaults, optional inputs, outputs, flag attribute)
CELLS = {
    "LSTM": (("Sigmoid", "Tanh", "Tanh"), ("B", "sequence_lens", "initial_h", "initial_c", "P"),
             ("Y", "Y_h", "Y_c"), "input_forget"),
    "GRU": (("Sigmoid", "Tanh"), ("B", "sequence_lens", "initial_h"), ("Y", "Y_h"),
            "linear_before_reset"),
    "RNN": (("Tanh",), ("B", "sequence_lens", "initial_h"), ("Y", "Y_h"), None),
}
DIRECTIONS = ("forward", "reverse", "bidirectional")


def _activations(r, attrs: dict, per: tuple, directions: int) -> tuple[list, list, list]:
    """The activations as keys, and one alpha and one beta for each."""
    names = [text_attr(r, {"activations": a}, "activations", "")
             for a in attrs.get("activations", [])] or list(per) * directions
    if len(names) != len(per) * directions:
        r.refuse(f"{len(names)} activations given; {len(per) * directions} are needed "
                 f"({', '.join(per)} per direction, {directions} direction(s))")
    alphas = [float(a) for a in attrs.get("activation_alpha", [])]
    betas = [float(b) for b in attrs.get("activation_beta", [])]
    keys, alpha_out, beta_out = [], [], []
    for name in names:
        canonical = _BY_KEY.get(name.lower())
        if canonical is None:
            r.refuse(f"activation '{name}' is not one of {', '.join(ACTIVATIONS)}")
        alpha, beta = ACTIVATIONS[canonical]
        keys.append(canonical.lower())
        alpha_out.append((alphas.pop(0) if alphas else alpha) if alpha is not None else 0.0)
        beta_out.append((betas.pop(0) if betas else beta) if beta is not None else 0.0)
    if alphas or betas:
        r.refuse(f"activation_alpha/activation_beta hold {len(alphas)}/{len(betas)} value(s) "
                 f"more than the activations {names} take")
    return keys, alpha_out, beta_out


def _check_shapes(r, node, op: str, directions: int, layout: int, hidden: int) -> None:
    """W's and R's leading dims against the direction and hidden_size, where the shapes are
    known at load (the op checks every shape again once the input shapes are)."""
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    for k, what in ((1, "W"), (2, "R")):
        shape = r.known_shape(node.input[k])
        if shape is None:
            continue
        if len(shape) != 3:
            r.refuse(f"{what} has rank {len(shape)}; [num_directions, {gates}*hidden_size, "
                     f"...] is expected")
        if shape[0] is not None and shape[0] != directions:
            r.refuse(f"{what} is for {shape[0]} direction(s); the direction attribute says "
                     f"{directions}")
        if hidden and shape[1] is not None and shape[1] != gates * hidden:
            r.refuse(f"{what}'s dim 1 is {shape[1]}; {gates} gates of hidden_size {hidden} "
                     f"make {gates * hidden}")
    x = r.known_shape(node.input[0])
    if x is not None and len(x) != 3:
        r.refuse(f"X has rank {len(x)}; [seq_length, batch_size, input_size] (layout 0) or "
                 f"[batch_size, seq_length, input_size] (layout 1) is expected")


@translates("LSTM", "GRU", "RNN")
def _recurrent(r, node, name: str, attrs: dict) -> None:
    op = node.op_type
    per, optional, output_names, flag = CELLS[op]
    direction = text_attr(r, attrs, "direction", "forward", DIRECTIONS)
    directions = 2 if direction == "bidirectional" else 1
    layout = int(attrs.get("layout", 0))
    if layout not in (0, 1):
        r.refuse(f"layout {layout} is not 0 or 1")
    hidden = int(attrs.get("hidden_size", 0))
    if "hidden_size" in attrs and hidden <= 0:
        r.refuse(f"hidden_size {hidden} must be positive")
    clip = float(attrs.get("clip", 0.0))
    if "clip" in attrs and not clip > 0:
        r.refuse(f"clip {clip} must be positive")
    flag_value = int(attrs.get(flag, 0)) if flag else 0
    if flag_value not in (0, 1):
        r.refuse(f"{flag}={flag_value} is not 0 or 1")
    keys, alphas, betas = _activations(r, attrs, per, directions)
    for k, what in enumerate(("X", "W", "R")):
        dtype = dtype_of(r, node.input[k])
        if dtype not in ("f32", "f64", ""):
            r.refuse(f"{what} is {dtype}; float32 and float64 are supported")
    lens = optional_input(node, 4)
    if lens is not None and dtype_of(r, lens) not in ("i32", ""):
        r.refuse(f"sequence_lens is {dtype_of(r, lens)}; ONNX gives it as int32")
    _check_shapes(r, node, op, directions, layout, hidden)
    present = [n for k, n in enumerate(optional, 3) if optional_input(node, k)]
    inputs = list(node.input[:3]) + [node.input[3 + optional.index(n)] for n in present]
    wanted = [(n, node.output[k]) for k, n in enumerate(output_names)
              if len(node.output) > k and node.output[k]]
    if not wanted:
        return                                     # nothing asked for: nothing to compute
    ir = {"hidden_size": str(hidden), "direction": direction, "layout": str(layout),
          "clip": float_text(clip), "activations": ",".join(keys),
          "activation_alpha": ",".join(float_text(a) for a in alphas),
          "activation_beta": ",".join(float_text(b) for b in betas),
          "inputs": ",".join(present), "outputs": ",".join(n for n, _ in wanted)}
    if flag:
        ir[flag] = str(flag_value)
    r.emit(op, inputs, [value for _, value in wanted], name, ir)
