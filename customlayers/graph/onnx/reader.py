"""ONNX reader: model.onnx -> Graph in OpenVINO IR spelling.

Initializers become Const nodes (made when first used, so folded-away weights leave nothing
behind), graph inputs Parameter nodes, graph outputs Result nodes. Standard ONNX nodes are
translated into the IR ops and attribute text the built-in ops read (Conv -> Convolution + Add of
the bias, Gemm -> MatMul + Multiply + Add, BatchNormalization -> Multiply + Add of folded
constants, ...). A node of another domain, or whose op_type ONNX does not define, becomes a Node
of that type with its attributes as text, for a custom layer to implement. A standard op with no
translation here is refused with the list of the ones there are.

Port shapes come from the model's value_info and ONNX shape inference. A dim without a value
(a symbolic "N", or none at all) is None; a value whose shape nothing knows (past a custom node,
where inference cannot see, unless the model's value_info says it) gets shape None, not (): ()
is a real scalar, and the Network checks declared shapes that are fully static. It infers the
rest per concrete input shape, and shapes a custom node's outputs from the value_info dims it
has, the descriptor's Tensor `shape` formula, or input 0 (runtime/compile/network.py).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...dtypes import BOOL_ONNX, ONNX_SUPPORTED_TEXT, ONNX_TYPES, from_numpy, numpy_of
from ...errors import BindingError, ModelError, ModelFileError
from ..graph import Graph, Node, Port
from ..custom_shapes import (CustomLayers, as_custom_layers, custom_nodes, node_name,
                            propagate_custom_shapes)
from ..fold_eval import shape_text
from ..guard import located
from .deferred import InferredShapes, value_symbols
from .checks import (check_attribute_types, check_input_types, check_model, check_node,
                     element_types, enum_name,
                     own_layer_hint, schema_of, tensor_array, value_shape)
from .control import rewrite_control_flow
from .refusals import Refusals
from .file import in_memory_model, load_external_data, load_model_file
from .shapes import infer_shapes
from .table import TRANSLATIONS, translated_ops
from .translate import NOT_TRANSLATED, float_text, ints_text


def read_onnx(path, custom_shapes: CustomLayers | None = None) -> Graph:
    """Read an ONNX model: its file (external data files are found relative to its folder) or
    an onnx.ModelProto (file.py's in_memory_model).
    `custom_shapes` (custom_shapes.py: the runtime's resolver, or a bare callable of static
    shapes) says which custom nodes nothing implements, before anything else is refused, and
    answers their output shapes."""
    import onnx
    if isinstance(path, onnx.ModelProto):       # made in memory (onnx.helper): no file
        model, where = in_memory_model(onnx, path)
        with located(where):
            check_model(onnx, model, where)
            return _read(onnx, model, where, custom_shapes, {})
    path = Path(path)
    try:
        # protobuf reads 0 bytes as a valid empty model (a FIFO's size is 0 too: refused below)
        if path.is_file() and path.stat().st_size == 0:
            raise ModelError(f"{path}: empty file (0 bytes), not an ONNX model")
        model, raw_data = load_model_file(onnx, path)
    except ModelError:
        raise
    except FileNotFoundError as e:
        raise ModelFileError(f"cannot read {e.filename or path}: no such file",
                             e.filename or path, e) from e
    except OSError as e:
        raise ModelFileError(f"cannot read {path}: {e.strerror or e}", path, e) from e
    except Exception as e:                      # protobuf's DecodeError and friends
        raise ModelError(f"{path}: not an ONNX model ({type(e).__name__}: {e})") from e
    with located(str(path)):
        check_model(onnx, model, str(path))     # names are text before they become paths
        load_external_data(onnx, model, path)
        return _read(onnx, model, str(path), custom_shapes, raw_data)


def _read(onnx, model, where: str, custom_shapes, raw_data: dict) -> Graph:
    """The checked model's graph; `where` names it in every error (its file, or in_memory_model's
    label)."""
    model = rewrite_control_flow(onnx, model, where)
    return _OnnxReader(model, where, custom_shapes, raw_data).read()


def _attr_text(value) -> str:
    """A custom node's attribute as the text an IR would hold."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, float):
        return float_text(value)
    if isinstance(value, (list, tuple)):
        return ",".join(_attr_text(v) for v in value)
    if isinstance(value, np.ndarray):
        return ",".join(_attr_text(v.item()) for v in value.ravel())
    return str(value)


class _OnnxReader:
    def __init__(self, model, file: str, custom_shapes: CustomLayers | None = None,
                 raw_data: dict | None = None):
        import onnx
        from onnx import numpy_helper
        self.onnx, self.numpy_helper = onnx, numpy_helper
        self.file = file
        self.opset = {(o.domain or "ai.onnx"): o.version for o in model.opset_import}
        g = model.graph
        for kind, infos in (("graph input", g.input), ("value_info", g.value_info),
                            ("graph output", g.output)):
            for vi in infos:                      # what the model declares must be in bounds
                value_shape(vi, f"{file}: {kind} '{vi.name}'")
        # the values of initializers from the model as read: inference gives their large ones
        # back without data (shapes.py)
        self.initializers = model.graph.initializer
        # initializer index -> its raw_data, left in the file's bytes (file.py)
        self.raw_data = raw_data or {}
        self.source = model                   # as read: before inference, for InferredShapes
        model = infer_shapes(onnx, model)
        # value name -> ONNX element type, as the model and inference say; before the custom
        # nodes' outputs get their input 0's type, a guess (custom_shapes.py)
        self.elem_types = element_types(model)
        layers = self.layers = as_custom_layers(custom_shapes)
        # value name -> why the custom node producing it could not shape it
        self.unknown_why: dict[str, str] = {}
        if layers is not None:
            nodes = custom_nodes(model, self.is_custom, _attr_text, onnx)
            # what nothing implements comes first: a shape error after such a node says less
            layers.check_implemented([n for _, _, n in nodes])
            try:
                model, self.unknown_why = propagate_custom_shapes(onnx, model, nodes, layers,
                                                                  infer_shapes)
            except BindingError as e:          # a descriptor that does not fit its node
                if e.context is None:
                    e.context = str(file)
                raise
        self.layers_asked = layers is not None
        self.model = model
        self.graph = Graph(model.graph.name or Path(file).stem)
        self.info: dict[str, tuple[tuple, str]] = {}     # value name -> (shape, dtype)
        self.values: dict[str, tuple[str, int]] = {}     # value name -> (node id, output port)
        self.consts: dict[str, np.ndarray] = {}          # constant values, folded at will
        self.alias: dict[str, str] = {}                  # Identity/Dropout outputs
        # outputs of a node that its translation does not compute (a Dropout's mask): value
        # name -> which output of which node it is
        self.dropped: dict[str, str] = {}
        self.uses: dict[str, int] = {}
        self.where = ""
        self.node_inputs: list[str] = []                 # the inputs of the node translated
        # value of unknown shape -> the custom node it comes from, and why (for messages)
        self.unknown_from: dict[str, str] = {}
        # values computed by fold-only nodes (deferred.py); value name -> its dims with the
        # model's symbol names where inference gave one (the pass binds them per request)
        self.pending: set[str] = set()
        self.symbols: dict[str, tuple] = {}

    # -- graph building ---------------------------------------------------------------------
    def read(self) -> Graph:
        g = self.model.graph
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            self.info[vi.name] = self.value_info(vi)
            self.symbols[vi.name] = value_symbols(vi)
        for node in g.node:
            for name in node.input:
                self.uses[name] = self.uses.get(name, 0) + 1
        for index, t in enumerate(self.initializers):
            if t.name in self.consts:
                raise ModelError(f"{self.file}: two initializers are named '{t.name}'")
            self.consts[t.name] = self.tensor(t, f"initializer '{t.name}'",
                                              self.raw_data.get(index))
        for vi in g.input:
            if vi.name not in self.consts:
                shape, dtype = self.info[vi.name]
                if not dtype:
                    self.refuse_input(vi)
                text = "?" if shape is None else ",".join("?" if d is None else str(d)
                                                          for d in shape)
                attrs = {"shape": text, "element_type": dtype}
                if vi.type.tensor_type.elem_type == BOOL_ONNX:   # held as u8: x != 0 in
                    attrs["boolean"] = "true"
                names = self.symbols.get(vi.name)
                if names and any(isinstance(d, str) for d in names):
                    attrs["dim_names"] = shape_text(names)    # bound per request's shapes
                self.emit("Parameter", [], [vi.name], vi.name, attrs=attrs)
        refusals = Refusals(self.file)
        missing = [(i, node_name(n, i), n) for i, n in enumerate(g.node)
                   if not self.is_custom(n) and n.op_type not in TRANSLATIONS]
        if len(missing) > 1:     # told grouped by op (one alone: refused at its node below)
            refusals.missing = missing
        skipped = {i for i, _, _ in refusals.missing}
        for index, node in enumerate(g.node):
            # a node after a refused one is skipped (its cause is told once, where it is),
            # but an op we lack is told whatever feeds it
            lacking = not self.is_custom(node) and node.op_type not in TRANSLATIONS
            if index in skipped or (refusals.reads_refused(node) and not lacking):
                refusals.skip(node)
                continue
            name = node_name(node, index)
            self.where = f"{self.file}: node {index} '{name}' ({node.op_type})"
            self.node_inputs = [i for i in node.input if i]
            try:
                with located(self.where):
                    self.check_outputs_are_new(node)
                    self.translate(node, name, index)
                    self.note_dropped_outputs(node)
            except ModelError as e:              # told with every other refusal at the end
                refusals.add(node, e)
        self.where = ""
        self.node_inputs = []
        if self.pending:        # shape arithmetic left for the pass: the dims it may ask for
            self.graph.value_shapes = InferredShapes(self.onnx, self.source, self.consts)
        for vi in g.output:
            if vi.name in refusals.refused_values:
                continue
            self.where = f"{self.file}: graph output '{vi.name}'"
            try:
                result = self.emit("Result", [vi.name], [], f"{vi.name}/sink")
            except ModelError as e:
                refusals.errors.append(e)
                continue
            if vi.type.tensor_type.elem_type == BOOL_ONNX:   # held as u8, returned as bool
                result.attrs["boolean"] = "true"
            # the output is returned under the graph's name for it, not its producer's (an
            # Identity or Dropout makes it another name's value: runtime/compiler._output_name)
            result.inputs[0].names = (vi.name,)
        refusals.raise_if_any(self.is_custom, TRANSLATIONS, translated_ops())
        return self.graph

    def value_info(self, vi) -> tuple[tuple | None, str]:
        """(shape, dtype): shape None when unknown, a dim None when symbolic or unknown. The
        declared shapes were checked before shape inference; one that inference derived out of
        bounds (a Split size of -1, a ConstantOfShape of 2**31) is left unknown, so that the
        translation of the node responsible says what is wrong with it."""
        dtype = ONNX_TYPES.get(vi.type.tensor_type.elem_type, "")
        try:
            return value_shape(vi, ""), dtype
        except ModelError:
            return None, dtype

    def check_outputs_are_new(self, node) -> None:
        """Each value is produced once (ONNX graphs are in SSA form): a second producer would
        silently replace the first for the nodes after it."""
        for out in node.output:
            if out and (out in self.values or out in self.consts or out in self.alias):
                self.refuse(f"output '{out}' is already produced by an earlier node, an "
                            f"initializer or a graph input")

    def note_dropped_outputs(self, node) -> None:
        """Remember the named outputs the translation left out (optional outputs that only
        training or a variant we do not run computes), so that a node or a graph output reading
        one is refused naming the op and the output, not as a value nobody produces."""
        schema = schema_of(self.onnx, node.op_type, self.opset.get("ai.onnx")) \
            if not self.is_custom(node) else None
        for k, out in enumerate(node.output):
            if out and out not in self.values and out not in self.alias and \
                    out not in self.consts:
                param = schema.outputs[min(k, len(schema.outputs) - 1)].name \
                    if schema is not None and schema.outputs else ""
                producer = self.where.split(": ", 1)[-1]         # node N 'name' (Op)
                self.dropped[out] = f"output {k}{f' ({param})' if param else ''} of {producer}"

    def refuse_input(self, vi) -> None:
        elem = vi.type.tensor_type.elem_type
        kind = enum_name(self.onnx.TensorProto.DataType, elem) if elem else "none given"
        raise ModelError(f"{self.file}: graph input '{vi.name}' has element type {kind}, which "
                         f"is not supported; supported: {ONNX_SUPPORTED_TEXT}")

    def tensor(self, proto, what: str, raw_data=None) -> np.ndarray:
        """A TensorProto's value, checked (checks.tensor_array); `what` names it;
        `raw_data` is its raw_data where the proto no longer holds it (file.py)."""
        where = what if what.startswith(self.file) else f"{self.file}: {what}"
        value = tensor_array(self.onnx, proto, where, raw_data)
        return value.astype(numpy_of(ONNX_TYPES[proto.data_type]), copy=False)

    def ref(self, name: str) -> tuple[str, int]:
        """The (node id, port) producing value `name`, making its Const node on first use."""
        name = self.alias.get(name, name)
        if name not in self.values:
            if name in self.dropped:
                raise ModelError(f"{self.where}: reads '{name}', {self.dropped[name]}, which "
                                 f"is not supported (not computed here)")
            if name not in self.consts:
                raise ModelError(f"{self.where}: input '{name}' is produced by no node, "
                                 f"initializer or graph input")
            value = self.consts[name]
            self.info[name] = (tuple(value.shape), from_numpy(value.dtype))
            self.emit("Const", [], [name], name, value=value, attrs={
                "element_type": self.info[name][1], "shape": ints_text(value.shape)})
        return self.values[name]

    def emit(self, op_type: str, inputs: list[str], outputs: list[str], name: str,
             attrs: dict[str, str] | None = None, version: str = "opset1", domain: str = "",
             value: np.ndarray | None = None, shapes: list[tuple] | None = None) -> Node:
        """Add an IR node reading `inputs` (value names) and producing `outputs`."""
        sources = [self.ref(i) for i in inputs]      # first: this may add Const nodes
        node = Node(id=str(len(self.graph.nodes)), name=name, type=op_type,
                    attrs=attrs or {}, version=version, domain=domain, value=value,
                    location=self.where or self.file)
        for src in sources:
            out = self.graph.nodes[src[0]].outputs[src[1]]
            node.inputs.append(Port(out.shape, out.dtype, out.names))
        # A translation computes shapes from shape_of, which answers () for an unknown shape;
        # past an input of unknown shape such a result means nothing: leave it to the Network.
        blind = any(p.shape is None for p in node.inputs)
        origin = next((self.unknown_from[self.alias.get(i, i)] for i in inputs
                       if self.alias.get(i, i) in self.unknown_from), None)
        for k, out in enumerate(outputs):
            if shapes is not None:
                shape = None if blind or shapes[k] is None else tuple(shapes[k])
                self.info[out] = (shape, node.inputs[0].dtype if node.inputs else "f32")
            shape, dtype = self.info.get(out, (None, ""))
            if not dtype:
                dtype = node.inputs[0].dtype if node.inputs else "f32"
            node.outputs.append(Port(shape, dtype, (out,)))
            self.values[out] = (node.id, k)
            if shape is None and origin is not None:     # unknown because of a custom node
                self.unknown_from[out] = origin
        self.graph.add_node(node)
        for port, src in enumerate(sources):
            self.graph.connect(src[0], src[1], node.id, port)
        return node

    def const(self, name: str, value) -> str:
        """A new constant value (folded weights, axes, shapes); returns its value name."""
        self.consts[name] = np.asarray(value)
        return name

    def shape_of(self, name: str) -> tuple:
        """The value's shape; () when unknown (see emit: such results are not trusted)."""
        shape = self.known_shape(name)
        return () if shape is None else shape

    def known_shape(self, name: str) -> tuple | None:
        name = self.alias.get(name, name)
        if name in self.consts:
            return tuple(self.consts[name].shape)
        return self.info.get(name, (None, ""))[0]

    def symbolic_dims(self, name: str) -> tuple | None:
        """The value's dims: ints, the model's symbol names, None where neither is known;
        None when its rank is unknown."""
        name = self.alias.get(name, name)
        shape = self.known_shape(name)
        names = self.symbols.get(name)
        if shape is None or names is None or len(names) != len(shape):
            return shape
        return tuple(d if d is not None else n for d, n in zip(shape, names))

    def folded(self, name: str) -> np.ndarray | None:
        return self.consts.get(self.alias.get(name, name))

    def is_graph_input(self, name: str) -> bool:
        """Whether the value is a graph input (a Parameter): the Network compiles a value that
        an op needs as a constant in per value given (runtime/compile/network.py, value inputs)."""
        name = self.alias.get(name, name)
        source = self.values.get(name)
        return source is not None and self.graph.nodes[source[0]].type == "Parameter"

    def refuse(self, why: str):
        raise ModelError(f"{self.where}: {why}{self.unknown_note()}")

    def unknown_note(self) -> str:
        """Where the unknown shape of an input of the node being translated comes from: the
        custom node that could not shape it, and why ('' when no input is such)."""
        for name in self.node_inputs:
            origin = self.unknown_from.get(self.alias.get(name, name))
            if origin is not None and self.known_shape(name) is None:
                return f"; the shape of input '{name}' is unknown: {origin}"
        return ""

    def describe_shape(self, name: str) -> str:
        """'shape [1, ?, 4]', or 'an unknown shape' (never the () shape_of stands in with)."""
        shape = self.known_shape(name)
        if shape is None:
            return "an unknown shape"
        return f"shape [{', '.join('?' if d is None else str(d) for d in shape)}]"

    # -- translation ------------------------------------------------------------------------
    def is_custom(self, node) -> bool:
        """A node of another domain, or whose op_type ONNX does not define, or a standard op we
        have no translation for that a loaded layer implements (the user wrote the op we lack)."""
        if node.domain not in ("", "ai.onnx") or not self.onnx.defs.has(node.op_type):
            return True
        return node.op_type not in TRANSLATIONS and self.layers is not None \
            and self.layers.implements(node.op_type)

    def translate(self, node, name: str, index: int) -> None:
        domain = node.domain if node.domain not in ("", "ai.onnx") else ""
        check_attribute_types(self.onnx, node, self.where)
        attrs = {a.name: self.onnx.helper.get_attribute_value(a) for a in node.attribute}
        op = node.op_type
        if self.is_custom(node):
            return self.custom(node, name, domain, attrs)
        check_node(self.onnx, node, self.opset.get("ai.onnx"), self.where)
        check_input_types(self.onnx, node, self.opset.get("ai.onnx"), self.elem_types,
                          self.where)
        handler = TRANSLATIONS.get(op)
        if handler is not None:
            return handler(self, node, name, attrs)
        why = f" ({NOT_TRANSLATED[op]})" if op in NOT_TRANSLATED else ""
        self.refuse(f"the ONNX op {op} has no translation to IR ops here{why}; "
                    f"{own_layer_hint('type ' + op)}; "
                    f"translated: {', '.join(translated_ops())}")

    def custom(self, node, name: str, domain: str, attrs: dict) -> None:
        if node.op_type in STRUCTURAL:
            self.refuse(f"a node of type {node.op_type} would be taken for the graph's own "
                        f"{node.op_type} nodes; rename the op type")
        if not all(node.output):
            self.refuse("an output of a custom node has no name")
        for key, value in attrs.items():
            if isinstance(value, (self.onnx.GraphProto, self.onnx.TensorProto,
                                  self.onnx.SparseTensorProto, self.onnx.TypeProto)) or (
                    isinstance(value, list) and value and not isinstance(value[0],
                                                                         (int, float, bytes))):
                self.refuse(f"attribute '{key}' holds a graph or tensor, which a custom layer "
                            f"cannot take as text")
        version = f"{domain or 'ai.onnx'}:{self.opset.get(domain or 'ai.onnx', '')}"
        emitted = self.emit(node.op_type, [i for i in node.input if i], list(node.output), name,
                            attrs={k: _attr_text(v) for k, v in attrs.items()},
                            version=version, domain=domain)
        kind = f"{node.op_type}, domain {domain}" if domain else node.op_type
        for out, port in zip(node.output, emitted.outputs):
            if port.shape is None and out not in self.unknown_from:   # (else: an input's)
                why = self.unknown_why.get(out) or (
                    "no custom layers were asked (none loaded)" if not self.layers_asked
                    else "its inputs' shapes are unknown")
                self.unknown_from[out] = f"it comes from custom node '{name}' ({kind}), " \
                                         f"whose output shape is unknown: {why}"


# IR types the Graph gives a meaning of its own (inputs, outputs, constants)
STRUCTURAL = ("Parameter", "Result", "Const")
