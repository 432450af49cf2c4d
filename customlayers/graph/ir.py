"""OpenVINO IR reader (versions 10 and 11): model.xml + model.bin -> Graph.

The XML lists layers, each with numbered ports, and edges between (layer id, port id) pairs. Port
ids are unique within a layer only and mix inputs and outputs, so they are mapped to the Graph's
input-port and output-port indices (order among <input> ports, order among <output> ports).
Attributes of <data> are kept as text: Define params must see them exactly as written (SPEC §3).
Const layers are read-only views of the .bin at (offset, size), read once.

Every problem raises ModelError naming the layer and, where it helps, the file:line of its element.
The XML is parsed without entity expansion, DTD loading or network access; a DOCTYPE that declares
entities is refused outright (an IR never needs one, and it is how "billion laughs" starts).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from lxml import etree

from ..dtypes import BOOL_IR_PRECISIONS, IR_ELEMENT_TYPES, IR_PRECISIONS, numpy_of
from ..errors import ModelError, ModelFileError, shape_text
from ..files import read_user_file
from .graph import Graph, Node, Port
from .guard import located
from .ir_lowering import lower_ir
from .variables import check_variables
from .limits import MAX_DIM, MAX_MODEL_BYTES, check_shape, element_count, parse_int

SUPPORTED_VERSIONS = ("10", "11")

# Precisions OpenVINO knows that the device side here cannot hold: named in a clear refusal.
UNSUPPORTED_PRECISIONS = ("FP64", "BF16", "I16", "U16", "U32", "U64", "U1", "I4", "U4", "NF4",
                          "F8E4M3", "F8E5M2", "STRING")

UNSUPPORTED_ELEMENT_TYPES = ("f64", "bf16", "i16", "u16", "u32", "u64", "u1", "i4", "u4", "nf4",
                             "f8e4m3", "f8e5m2", "string")


def read_ir(xml_path, bin_path=None) -> Graph:
    """Read an IR model; `bin_path` defaults to the .xml's sibling with the suffix .bin."""
    xml_path = Path(xml_path)
    try:
        xml = read_user_file(xml_path, MAX_MODEL_BYTES)
    except OSError as e:
        raise ModelFileError(f"cannot read the model file {xml_path}: {e.strerror}", xml_path,
                             e) from e
    bin_path = Path(bin_path) if bin_path is not None else xml_path.with_suffix(".bin")
    weights: bytes | None
    try:
        weights = read_user_file(bin_path)
    except FileNotFoundError:
        weights = None      # fine as long as no Const needs it; _WeightFile says so otherwise
    except OSError as e:
        raise ModelFileError(f"cannot read the weights file {bin_path}: {e.strerror}", bin_path,
                             e) from e
    return _Reader(str(xml_path), _WeightFile(weights, str(bin_path))).read(xml)


def read_ir_string(xml: str | bytes, weights: bytes | None = None, name: str = "<string>") -> Graph:
    """Read an IR model from its XML text and the .bin contents (None: the model has no Const)."""
    if isinstance(xml, str):
        xml = xml.encode("utf-8")
    return _Reader(name, _WeightFile(weights, f"{name} weights")).read(xml)


class _WeightFile:
    """The .bin contents and the checks on each Const's slice of it."""

    def __init__(self, data: bytes | None, name: str):
        # immutable: the Consts are views of it (a caller's bytearray could change under them)
        self.data = data if data is None or isinstance(data, bytes) else bytes(data)
        self.name = name

    def constant(self, where: str, shape: tuple[int, ...], np_dtype, offset: int,
                 size: int) -> np.ndarray:
        if self.data is None:
            raise ModelFileError(f"{where}: needs the weights file {self.name}, which does not "
                                 f"exist", self.name)
        itemsize = np.dtype(np_dtype).itemsize
        count = element_count(shape)           # Python ints: np.prod would wrap around
        if size != count * itemsize:
            raise ModelError(f"{where}: size={size} bytes does not match shape {list(shape)} x "
                             f"{itemsize} bytes per element = {count * itemsize} bytes")
        if offset < 0 or offset + size > len(self.data):
            raise ModelError(f"{where}: offset {offset} + size {size} = {offset + size} is past the "
                             f"end of {self.name} ({len(self.data)} bytes)")
        raw = np.frombuffer(self.data, dtype=np_dtype, count=count, offset=offset)
        # a read-only view of the .bin as read (copying every Const was a tenth of a warm load
        # of ResNet-50); copied only where an offset leaves the elements unaligned
        if not raw.flags.aligned:
            raw = raw.copy()
        raw.flags.writeable = False
        return raw.reshape(shape)


def parse_shape_text(text: str, allow_dynamic: bool) -> tuple | None:
    """'1, 3, 224, 224' -> (1, 3, 224, 224); '' -> () (a scalar). With allow_dynamic, '?', '-1'
    and ranges ('1..10', '..8', '2..') become None. Returns None if a dim is not understood."""
    text = text.strip().strip("[]").strip()
    if not text:
        return ()
    dims: list[int | None] = []
    for part in text.split(","):
        dim = _parse_dim(part, allow_dynamic)
        if dim is False:
            return None
        dims.append(dim)  # type: ignore[arg-type]
    return tuple(dims)


_RANGE = re.compile(r"[0-9]{0,20}\.\.[0-9]{0,20}")   # a dynamic dim with bounds: 1..10, ..8, 2..


def _parse_dim(text: str, allow_dynamic: bool):
    """A dim's text -> int (0 to MAX_DIM), None (dynamic, when allowed) or False (not a dim)."""
    t = text.strip()
    value = parse_int(t)
    if value is not None:
        if 0 <= value <= MAX_DIM:
            return value
        return None if (allow_dynamic and value == -1) else False
    if allow_dynamic and (t == "?" or _RANGE.fullmatch(t)):
        return None
    return False


DIM_TEXT = f"an integer from 0 to {MAX_DIM}"


def _clip(text, limit: int = 40) -> str:
    """Attribute or element text for a message: a 50,000-digit dim is shown by its start."""
    text = "" if text is None else str(text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


class _Reader:
    def __init__(self, file: str, weights: _WeightFile):
        self.file = file
        self.weights = weights
        self.fed: set[tuple[str, int]] = set()     # (layer id, input port index) with a producer

    def at(self, line) -> str:
        return f"{self.file}:{line}" if line else self.file

    # -- XML ------------------------------------------------------------------------------
    def parse(self, xml: bytes):
        parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                                 huge_tree=False, remove_comments=True)
        try:
            root = etree.fromstring(xml, parser)
        except etree.XMLSyntaxError as e:
            line = e.position[0] if e.position else 0
            raise ModelError(f"{self.at(line)}: not well-formed XML: {e.msg}") from None
        dtd = root.getroottree().docinfo.internalDTD
        if dtd is not None and (list(dtd.iterentities()) or list(dtd.iterelements())):
            raise ModelError(f"{self.file}: the model declares a DOCTYPE with entities or "
                             f"elements; IR files have none, and entity expansion is refused")
        return root

    def read(self, xml: bytes) -> Graph:
        with located(self.file):
            return self.read_net(xml)

    def read_net(self, xml: bytes) -> Graph:
        root = self.parse(xml)
        if root.tag != "net":
            raise ModelError(f"{self.at(root.sourceline)}: the root element is <{root.tag}>, "
                             f"expected <net> (an OpenVINO IR .xml)")
        version = root.get("version", "")
        if version not in SUPPORTED_VERSIONS:
            raise ModelError(f"{self.at(root.sourceline)}: IR version '{_clip(version)}' is not supported; "
                             f"expected one of {', '.join(SUPPORTED_VERSIONS)}")
        graph = Graph(root.get("name", "model"))
        layers = root.find("layers")
        if layers is None:
            raise ModelError(f"{self.at(root.sourceline)}: <net> has no <layers>")
        port_maps: dict[str, dict[str, tuple[str, int]]] = {}
        for elem in layers.iterchildren("layer"):
            with located(f"{self.at(elem.sourceline)}: layer '{_clip(elem.get('name'))}' "
                         f"({_clip(elem.get('type'))})"):
                node, ports = self.read_layer(elem)
            if node.id in graph.nodes:
                other = graph.nodes[node.id]
                raise ModelError(f"{node.location}: layer '{node.name}' has the id '{node.id}', "
                                 f"already used by layer '{other.name}' at {other.location}")
            graph.add_node(node)
            port_maps[node.id] = ports
        edges = root.find("edges")
        for elem in (edges.iterchildren("edge") if edges is not None else ()):
            with located(f"{self.at(elem.sourceline)}: <edge>"):
                self.read_edge(graph, port_maps, elem)
        self.check_connected(graph)
        try:
            order = graph.topological_order()
        except ModelError as e:                  # a cycle: Graph names the layers, we the file
            raise ModelError(f"{self.file}: {e}") from e
        _fill_missing_dtypes(graph, order)
        graph = lower_ir(graph)                  # static shape arithmetic, GRU/LSTMSequence
        check_variables(graph)                   # ReadValue/Assign: the variables they name
        return graph

    # -- layers ---------------------------------------------------------------------------
    def read_layer(self, elem) -> tuple[Node, dict[str, tuple[str, int]]]:
        loc = self.at(elem.sourceline)
        lid, name, ltype = elem.get("id"), elem.get("name"), elem.get("type")
        for attr, value in (("id", lid), ("type", ltype)):
            if not value:
                raise ModelError(f"{loc}: layer '{name or '?'}' has no '{attr}' attribute")
        name = name or f"layer{lid}"
        node = Node(id=lid, name=name, type=ltype, version=elem.get("version", ""), location=loc)
        where = f"{loc}: layer '{name}' ({ltype})"
        data = elem.find("data")
        if data is not None:
            node.attrs = {k: v for k, v in data.attrib.items()}
        ports: dict[str, tuple[str, int]] = {}
        for kind, target in (("input", node.inputs), ("output", node.outputs)):
            group = elem.find(kind)
            for port in (group.iterchildren("port") if group is not None else ()):
                pid = port.get("id")
                if pid is None:
                    raise ModelError(f"{self.at(port.sourceline)}: layer '{name}' ({ltype}): an "
                                     f"{kind} port has no 'id'")
                if pid in ports:
                    raise ModelError(f"{self.at(port.sourceline)}: layer '{name}' ({ltype}): port "
                                     f"id {pid} is used twice")
                ports[pid] = (kind, len(target))
                target.append(self.read_port(port, name, ltype))
        if ltype == "Const":
            self.check_ports(node, where, inputs=0, outputs=1)
            node.value = self.read_const(node, where)
        elif ltype == "Parameter":
            self.check_ports(node, where, inputs=0, outputs=1)
            self.check_parameter(node, where)
        elif ltype == "Result":
            # a Result ends the graph: with an output port it could feed other layers (a Result
            # in mid-graph), which no IR means
            self.check_ports(node, where, inputs=1, outputs=0)
            if _bool_port(elem.find("input/port")):   # held as u8, returned as numpy bool
                node.attrs["boolean"] = "true"
        elif ltype == "BitwiseNot" and _bool_port(elem.find("input/port")):
            # booleans are held as u8, whose bitwise complement is not their negation: a
            # BitwiseNot of booleans is OpenVINO's logical not
            node.type = "LogicalNot"
        elif not node.outputs and ltype != "Assign":
            # every other op makes something; the compiler and its passes read output 0 (an
            # Assign stores its input, with or without an output port)
            raise ModelError(f"{where}: has no output port; every layer but a Result or an "
                             f"Assign has at least one <port> in <output>")
        return node, ports

    @staticmethod
    def check_ports(node: Node, where: str, inputs: int, outputs: int) -> None:
        """The port counts of the layers that structure the graph (Parameter, Const, Result)."""
        for kind, ports, want in (("input", node.inputs, inputs),
                                  ("output", node.outputs, outputs)):
            if len(ports) != want:
                raise ModelError(f"{where}: a {node.type} has {want} {kind} port(s), found "
                                 f"{len(ports)}")

    def read_port(self, port, layer: str, ltype: str) -> Port:
        where = f"{self.at(port.sourceline)}: layer '{layer}' ({ltype}) port {port.get('id')}"
        dims = []
        for dim in port.iterchildren("dim"):
            value = _parse_dim(dim.text or "", allow_dynamic=True)
            if value is False:
                raise ModelError(f"{self.at(dim.sourceline)}: layer '{layer}' ({ltype}) port "
                                 f"{port.get('id')}: dim '{_clip(dim.text)}' is not a size "
                                 f"(expected {DIM_TEXT}, or -1 / ? / a range for a dynamic dim)")
            dims.append(value)
        check_shape(dims, where, "dims")
        precision = port.get("precision")
        dtype = ""          # unknown: filled from the producer or the layer's other ports
        if precision is not None:
            key = precision.upper()
            if key in IR_PRECISIONS:
                dtype = IR_PRECISIONS[key]
            elif key in UNSUPPORTED_PRECISIONS:
                raise ModelError(f"{where}: precision {_clip(precision)} is not supported; "
                                 f"supported: {', '.join(IR_PRECISIONS)}")
            else:
                raise ModelError(f"{where}: unknown precision '{_clip(precision)}'; expected one "
                                 f"of {', '.join(IR_PRECISIONS)}")
        names = tuple(n.strip() for n in port.get("names", "").split(",") if n.strip())
        return Port(shape=tuple(dims), dtype=dtype, names=names)

    def element_type(self, node: Node, where: str) -> tuple[str, np.dtype]:
        et = node.attrs.get("element_type")
        if et is None:
            raise ModelError(f"{where}: <data> has no element_type")
        key = et.strip().lower()
        if key in IR_ELEMENT_TYPES:
            return IR_ELEMENT_TYPES[key], numpy_of(IR_ELEMENT_TYPES[key])
        if key in UNSUPPORTED_ELEMENT_TYPES:
            raise ModelError(f"{where}: element_type {_clip(et)} is not supported; supported: "
                             f"{', '.join(IR_ELEMENT_TYPES)}")
        raise ModelError(f"{where}: unknown element_type '{_clip(et)}'; expected one of "
                         f"{', '.join(IR_ELEMENT_TYPES)}")

    def read_const(self, node: Node, where: str) -> np.ndarray:
        dtype, np_dtype = self.element_type(node, where)
        shape = parse_shape_text(node.attrs.get("shape", ""), allow_dynamic=False)
        if shape is None:
            raise ModelError(f"{where}: shape='{_clip(node.attrs.get('shape'))}' is not a list of "
                             f"sizes (each {DIM_TEXT})")
        check_shape(shape, where)
        numbers = {}
        for key in ("offset", "size"):
            text = node.attrs.get(key)
            value = parse_int(text) if text is not None else None
            if value is None or value < 0:
                raise ModelError(f"{where}: {key}='{_clip(text)}' is not a byte count "
                                 f"(expected an integer >= 0)")
            numbers[key] = value
        self.check_declared(node.outputs[0], shape, where)
        node.outputs[0].dtype = node.outputs[0].dtype or dtype
        return self.weights.constant(where, shape, np_dtype, numbers["offset"], numbers["size"])

    def check_parameter(self, node: Node, where: str) -> None:
        dtype, _ = self.element_type(node, where)
        text = node.attrs.get("shape")
        if text is not None:
            shape = parse_shape_text(text, allow_dynamic=True)
            if shape is None:
                raise ModelError(f"{where}: shape='{_clip(text)}' is not a list of sizes (each "
                                 f"{DIM_TEXT}, or -1 / ? / a range for a dynamic dim)")
            self.check_declared(node.outputs[0], shape, where)
        node.outputs[0].dtype = node.outputs[0].dtype or dtype

    @staticmethod
    def check_declared(port: Port, shape: tuple, where: str) -> None:
        if not _compatible(port.shape, shape):
            raise ModelError(f"{where}: <data shape> {shape_text(shape, ',')} does not match "
                             f"the output port's dims {shape_text(port.shape, ',')}")

    # -- edges ----------------------------------------------------------------------------
    def read_edge(self, graph: Graph, port_maps, elem) -> None:
        loc = self.at(elem.sourceline)
        keys = ("from-layer", "from-port", "to-layer", "to-port")
        values = [elem.get(k) for k in keys]
        missing = [k for k, v in zip(keys, values) if v is None]
        if missing:
            raise ModelError(f"{loc}: <edge> lacks {', '.join(missing)}")
        src, sport, dst, dport = values
        for lid in (src, dst):
            if lid not in graph.nodes:
                raise ModelError(f"{loc}: the edge {src}:{sport} -> {dst}:{dport} refers to layer "
                                 f"id '{lid}', which does not exist")
        s, d = graph.nodes[src], graph.nodes[dst]
        skind, sidx = port_maps[src].get(sport, (None, -1))
        if skind != "output":
            raise ModelError(f"{loc}: the edge leaves port {sport} of layer '{s.name}' ({s.type}), "
                             f"which has no output port with that id (output ports: "
                             f"{_ids(port_maps[src], 'output')})")
        dkind, didx = port_maps[dst].get(dport, (None, -1))
        if dkind != "input":
            raise ModelError(f"{loc}: the edge enters port {dport} of layer '{d.name}' ({d.type}), "
                             f"which has no input port with that id (input ports: "
                             f"{_ids(port_maps[dst], 'input')})")
        if (dst, didx) in self.fed:
            psrc, _ = graph.producer(dst, didx)
            raise ModelError(f"{loc}: input port {dport} of layer '{d.name}' ({d.type}) at "
                             f"{d.location} has two producers: '{graph.nodes[psrc].name}' and "
                             f"'{s.name}'")
        out, inp = s.outputs[sidx], d.inputs[didx]
        if not _compatible(inp.shape, out.shape):
            raise ModelError(f"{loc}: input port {dport} of layer '{d.name}' ({d.type}) at "
                             f"{d.location} has shape {shape_text(inp.shape, ',')}, but its "
                             f"producer '{s.name}' ({s.type}) port {sport} gives "
                             f"{shape_text(out.shape, ',')}")
        graph.connect(src, sidx, dst, didx)
        self.fed.add((dst, didx))

    def check_connected(self, graph: Graph) -> None:
        for node in graph:
            for i in range(len(node.inputs)):
                if (node.id, i) not in self.fed:
                    raise ModelError(f"{node.location}: input port {i} of layer '{node.name}' "
                                     f"({node.type}) is not connected to any producer")


def _fill_missing_dtypes(graph: Graph, order: list[Node]) -> None:
    """Ports written without a precision: an input takes its producer's type, an output the
    layer's first input's (f32 when it has none). Rare in practice; in model order so a filled
    output feeds the next layer."""
    for node in order:
        for i, port in enumerate(node.inputs):
            if not port.dtype:
                src, sport = graph.producer(node.id, i)
                port.dtype = graph.nodes[src].outputs[sport].dtype
        for port in node.outputs:
            if not port.dtype:
                port.dtype = node.inputs[0].dtype if node.inputs else "f32"


def _ids(ports: dict[str, tuple[str, int]], kind: str) -> str:
    found = [pid for pid, (k, _) in ports.items() if k == kind]
    return ", ".join(found) if found else "none"


def _compatible(a: tuple, b: tuple) -> bool:
    """Same rank, and equal wherever both dims are static."""
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def _bool_port(port) -> bool:
    """Whether a <port> element says its tensor is boolean (its precision)."""
    return port is not None and (port.get("precision") or "").upper() in BOOL_IR_PRECISIONS


__all__ = ["read_ir", "read_ir_string", "parse_shape_text"]
