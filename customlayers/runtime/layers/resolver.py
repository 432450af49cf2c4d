"""The resolver: what implements each node of a graph. One lookup for every kind of layer
implementation (the ONNX reference evaluator's `_load_impl` and OpenVINO's ProgramBuilder work
the same way): the registry's loaded layers first (custom layers, which override a built-in of
the same type with an informational message), then the built-in ops.

A node of a non-standard ONNX domain (`com.example::Swish`) binds to a loaded layer only: a
built-in of the same name would run with the node's attributes ignored, a silently wrong number.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from ...config.dialects import dialect_of
from ...errors import UnsupportedLayersError
from ...graph.graph import Node
from ...jit.layer import LayerImpl
from ...ops import OPS

if TYPE_CHECKING:
    from .registry import Registry

# graph nodes that are not layers: the compiler handles them itself
STRUCTURAL_TYPES = ("Parameter", "Const", "Result")


class Resolver:
    """`registry`: the loaded layers (runtime/layers/registry.py; None = built-ins only), asked
    only what it catalogs (membership, implementation, location, output shapes, types). `say`
    receives informational messages (the override notes)."""

    def __init__(self, registry: Registry | None = None, builtins: Mapping[str, LayerImpl] = OPS,
                 say: Callable[[str], None] | None = None):
        self.registry = registry
        self.builtins = builtins
        self._say = say or (lambda message: None)
        self._loaded: dict[str, LayerImpl] = {}
        self._noted: set[str] = set()      # layer types whose guessed output shapes were said
        self._said: set[str] = set()       # the override lines said (once, not once a plan)

    def is_loaded(self, node: Node) -> bool:
        """Whether a loaded (user) layer implements the node."""
        return self.registry is not None and node.type in self.registry

    def find(self, node: Node) -> LayerImpl | None:
        """The node's implementation, or None when nothing implements it."""
        if self.is_loaded(node):
            impl = self._loaded.get(node.type)
            if impl is None:
                impl = self._loaded[node.type] = self.registry.implementation(node.type)
            return impl
        if node.domain:           # a custom domain's node never runs a same-named built-in
            return None
        return self.builtins.get(node.type)

    def resolve(self, nodes: Iterable[Node]) -> tuple[dict[str, LayerImpl], list[str]]:
        """(node id -> implementation for every layer node, the informational messages).
        UnsupportedLayersError lists every node that nothing implements, in one error."""
        found: dict[str, LayerImpl] = {}
        missing: list[Node] = []
        overrides: dict[str, list[str]] = {}
        types: set[str] = set()
        for node in nodes:
            if node.type in STRUCTURAL_TYPES:
                continue
            types.add(node.type)
            impl = self.find(node)
            if impl is None:
                missing.append(node)
                continue
            found[node.id] = impl
            if self.is_loaded(node) and node.type in self.builtins and not node.domain:
                overrides.setdefault(node.type, []).append(node.name)
        if missing:
            raise self._unsupported(missing)
        messages = []
        for layer_type, names in overrides.items():
            loc = self.registry.location(layer_type)
            message = (f"info: custom layer '{layer_type}' ({loc.file}:{loc.line}) overrides "
                       f"the built-in {layer_type} for {len(names)} layer(s)")
            messages.append(message)
        messages += self._near_misses(types)
        for message in messages:
            if message not in self._said:
                self._said.add(message)
                self._say(message)
        return found, messages

    def _near_misses(self, types: set[str]) -> list[str]:
        """A warning for each loaded layer that replaces no layer of the model while a layer
        type of the model differs from its name only in case: a layer named after the ONNX op
        ('Relu', 'Softmax') where the model's nodes read as the built-in's type (ReLU, SoftMax)
        ran the built-in, the layer silently unused (a new user's trial). Only case: a letter
        more or less pairs real, different ops (HSigmoid and Sigmoid, PReLU and ReLU), and a
        config shared by several models holds such layers."""
        if self.registry is None:
            return []
        said = []
        for layer_type in self.registry.layer_types():
            if layer_type in types:
                continue
            near = [t for t in sorted(types) if t.casefold() == layer_type.casefold()]
            if near and near[0] not in self.registry:
                loc = self.registry.location(layer_type)
                said.append(f"warning: custom layer '{layer_type}' ({loc.file}:{loc.line}) "
                            f"replaces no layer of this model, whose {near[0]} layers run the "
                            f"built-in: a layer replaces the layers of its own type (an ONNX "
                            f"Relu reads as ReLU); name it '{near[0]}' to replace them")
        return said

    # -- what a model reader asks (graph/custom_shapes.py: CustomLayers) ----------------------
    def check_implemented(self, nodes: Iterable) -> None:
        """UnsupportedLayersError listing every node (anything with name, type and domain:
        graph Nodes, or the custom nodes of a model being read) that nothing implements."""
        missing = [n for n in nodes if n.type not in STRUCTURAL_TYPES and self.find(n) is None]
        if missing:
            raise self._unsupported(missing)

    def implements(self, op_type: str) -> bool:
        """Whether a loaded layer has this type (custom_shapes.CustomLayers)."""
        return self.registry is not None and op_type in self.registry

    def output_shapes(self, node):
        """The output shapes of a custom node of a model being read (CustomNode), by its loaded
        layer's rules (Registry.output_shapes); None when no loaded layer implements it."""
        if not self.is_loaded(node):
            return None
        shapes = self.registry.output_shapes(
            node.type, node.domain, node.attrs, [i.shape for i in node.inputs],
            input_names=[i.name for i in node.inputs],
            constant_inputs=[k for k, i in enumerate(node.inputs) if i.constant],
            output_count=node.outputs, where=f"node '{node.name}' ({node.type})")
        self._note_guessed(node, shapes)
        return shapes

    def _note_guessed(self, node, shapes) -> None:
        """Say which output of a SimpleGPU layer takes input 0's shape because the model
        declares none and the descriptor has no formula: right for an elementwise layer, a
        wrong shape for one like ReorgYolo, and nothing else would tell (once per layer type:
        a model of fifty such nodes gets one note)."""
        if node.type in self._noted or node.type in self.registry.python_layer_types():
            return                      # a Python layer gives its shapes (output_shapes)
        spec = self.registry.spec(node.type)
        if not dialect_of(spec).one_kernel:
            return
        for binding in spec.outputs:
            port = binding.port_index
            declared = node.declared[port] if port < len(node.declared) else None
            if binding.shape or port >= len(shapes or ()) or shapes[port] is None or (
                    declared is not None and any(d is not None for d in declared)):
                continue
            shown = [d if d is not None else "?" for d in shapes[port]]
            self._noted.add(node.type)
            self._say(f"note: node '{node.name}' ({node.type}): output {port} takes input 0's "
                      f"shape {shown}: the model declares no shape for it and layer "
                      f"'{spec.name}' has no shape formula ({binding.location}); if its output "
                      f"has another shape, give the Tensor a formula (shape=\"...\") or the "
                      f"model a value_info for it (one note for all {node.type} nodes)")

    def _unsupported(self, missing: list[Node]) -> UnsupportedLayersError:
        lines = [f"  {n.name} (type {n.type}{', domain ' + n.domain if n.domain else ''})"
                 for n in missing]
        known = ", ".join(sorted(self.builtins))
        custom = ", ".join(self.registry.layer_types()) if self.registry is not None else "none"
        hint = ("write a CustomLayer for them and pass its config with -c, or a Python layer "
                "(@cpu_layer) and pass its module with -l")
        if any(n.domain and n.type in self.builtins for n in missing):
            hint += ("\n(a node of a custom domain runs only a loaded layer of its type, never "
                     "the built-in of the same name, which would ignore its attributes)")
        return UnsupportedLayersError(
            f"{len(missing)} layer(s) of the model have no implementation:\n" + "\n".join(lines)
            + f"\nbuilt-in types: {known}\ncustom layers loaded: {custom}\n" + hint,
            [(n.name, n.type, n.domain) for n in missing])
