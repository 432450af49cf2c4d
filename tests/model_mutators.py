"""Small valid models and the mutators that break them, shared by the property tests
(tests/unit/test_model_fuzz.py) and the long campaign (scripts/fuzz_models.py).

A mutated model is plain bytes: IR as (xml, bin), ONNX as the serialized protobuf. Every mutator
takes a random.Random, so one integer seed reproduces a case. Mutations are of two kinds: blind
byte edits (flip, truncate, insert, delete, duplicate) and structural ones that keep the file
well-formed so that the reader's checks, not the parser, meet them (dims, attributes, port ids,
initializer data, element types, op types, names that are not UTF-8).
"""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data" / "models"

# Texts a number in a model may be replaced with: each is wrong in its own way
NUMBER_TEXTS = ["-1", "-7", "0", "1", "3", "2147483647", "2147483648", "99999999999999999999",
                "9" * 5000, "1e3", "1.5", "", " ", "abc", "?", "1..4", "0x10", "\u00b2",
                "\u0663", "+2", "--1", "1,2", "nan"]
IR_TYPES = ["Convolution", "Add", "ReLU", "Result", "Parameter", "Const", "MaxPool", "SoftMax",
            "Reshape", "Concat", "Transpose", "MatMul", "GroupConvolution", "Multiply",
            "ReduceMean", "Squeeze", "Gather", "Broadcast", "Tile", "Interpolate", "NoSuchOp"]
ONNX_OPS = ["Conv", "Relu", "Add", "Gemm", "MatMul", "Reshape", "Transpose", "Concat", "Slice",
            "Gather", "Split", "Pad", "ConstantOfShape", "Shape", "Cast", "Flatten", "Squeeze",
            "Unsqueeze", "Softmax", "LogSoftmax", "ReduceMean", "ReduceL2", "Clip", "MaxPool",
            "AveragePool", "GlobalAveragePool", "BatchNormalization", "InstanceNormalization",
            "LRN", "DepthToSpace", "Tile", "Expand", "Constant", "PRelu", "LeakyRelu", "Mean",
            "Identity", "Dropout", "ConvTranspose", "Sum", "LayerNormalization", "Erf", "Where",
            "Equal", "CumSum", "TopK", "GatherElements", "ScatterND", "ArgMax", "Resize",
            "GridSample", "LSTM", "GRU", "Einsum", "OneHot", "Trilu", "NoSuchOp"]


# -- seeds -------------------------------------------------------------------------------------
def ir_seeds() -> list[tuple[bytes, bytes]]:
    """(xml, bin) of small valid IR models."""
    return [((DATA / "tiny.xml").read_bytes(), (DATA / "tiny.bin").read_bytes()), _conv_ir()]


def _port(pid: int, dims, precision: str = "FP32") -> str:
    return (f'<port id="{pid}" precision="{precision}">'
            + "".join(f"<dim>{d}</dim>" for d in dims) + "</port>")


def _conv_ir() -> tuple[bytes, bytes]:
    """x[1,2,5,5] -> Convolution(w[3,2,3,3]) -> Add(b[1,3,1,1]) -> ReLU -> MaxPool -> Result."""
    w = np.arange(54, dtype=np.float32) / 54
    b = np.array([0.1, -0.2, 0.3], np.float32).reshape(1, 3, 1, 1)
    layers = [
        '<layer id="0" name="x" type="Parameter" version="opset1"><data shape="1,2,5,5" '
        f'element_type="f32"/><output>{_port(0, [1, 2, 5, 5])}</output></layer>',
        '<layer id="1" name="w" type="Const" version="opset1"><data element_type="f32" '
        f'shape="3,2,3,3" offset="0" size="216"/><output>{_port(0, [3, 2, 3, 3])}</output></layer>',
        '<layer id="2" name="conv" type="Convolution" version="opset1"><data strides="1,1" '
        'dilations="1,1" pads_begin="1,1" pads_end="1,1" auto_pad="explicit"/><input>'
        f'{_port(0, [1, 2, 5, 5])}{_port(1, [3, 2, 3, 3])}</input><output>'
        f'{_port(2, [1, 3, 5, 5])}</output></layer>',
        '<layer id="3" name="b" type="Const" version="opset1"><data element_type="f32" '
        f'shape="1,3,1,1" offset="216" size="12"/><output>{_port(0, [1, 3, 1, 1])}</output>'
        '</layer>',
        '<layer id="4" name="add" type="Add" version="opset1"><data auto_broadcast="numpy"/>'
        f'<input>{_port(0, [1, 3, 5, 5])}{_port(1, [1, 3, 1, 1])}</input><output>'
        f'{_port(2, [1, 3, 5, 5])}</output></layer>',
        '<layer id="5" name="relu" type="ReLU" version="opset1"><input>'
        f'{_port(0, [1, 3, 5, 5])}</input><output>{_port(1, [1, 3, 5, 5])}</output></layer>',
        '<layer id="6" name="pool" type="MaxPool" version="opset1"><data strides="2,2" '
        'kernel="2,2" pads_begin="0,0" pads_end="0,0" rounding_type="floor" auto_pad="explicit"/>'
        f'<input>{_port(0, [1, 3, 5, 5])}</input><output>{_port(1, [1, 3, 2, 2])}</output>'
        '</layer>',
        '<layer id="7" name="y" type="Result" version="opset1"><input>'
        f'{_port(0, [1, 3, 2, 2])}</input></layer>',
    ]
    edges = [(0, 0, 2, 0), (1, 0, 2, 1), (2, 2, 4, 0), (3, 0, 4, 1), (4, 2, 5, 0), (5, 1, 6, 0),
             (6, 1, 7, 0)]
    xml = ('<?xml version="1.0"?>\n<net name="conv" version="11">\n<layers>\n'
           + "\n".join(layers) + "\n</layers>\n<edges>\n"
           + "\n".join(f'<edge from-layer="{a}" from-port="{p}" to-layer="{c}" to-port="{q}"/>'
                       for a, p, c, q in edges)
           + "\n</edges>\n</net>\n")
    return xml.encode(), w.tobytes() + b.tobytes()


def onnx_seeds() -> list[bytes]:
    """Serialized small valid ONNX models covering the translated ops."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def vi(name, shape, elem=TensorProto.FLOAT):
        return helper.make_tensor_value_info(name, elem, shape)

    def init(name, array):
        return numpy_helper.from_array(np.asarray(array), name)

    def model(nodes, inputs, outputs, inits=(), opset=13, domains=()):
        graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
        opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
        m = helper.make_model(graph, opset_imports=opsets)
        m.ir_version = 8
        return m.SerializeToString()

    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    n = helper.make_node
    seeds = []
    # convolutional: Conv (bias, group), BatchNorm, Relu, MaxPool, GlobalAveragePool, Gemm
    seeds.append(model([
        n("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[1, 1]),
        n("BatchNormalization", ["c", "s", "bb", "m", "v"], ["bn"], name="bn", epsilon=1e-5),
        n("Relu", ["bn"], ["r"], name="relu"),
        n("Conv", ["r", "wg"], ["g"], name="gconv", group=2, kernel_shape=[1, 1]),
        n("MaxPool", ["g"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        n("GlobalAveragePool", ["p"], ["gp"], name="gap"),
        n("Flatten", ["gp"], ["fl"], name="flat", axis=1),
        n("Gemm", ["fl", "fw", "fb"], ["y"], name="fc", alpha=0.5, beta=2.0, transB=1)],
        [vi("x", [1, 2, 6, 6])], [vi("y", [1, 3])],
        [init("w", f32(4, 2, 3, 3)), init("b", f32(4)), init("s", f32(4)), init("bb", f32(4)),
         init("m", f32(4)), init("v", np.abs(f32(4)) + 1), init("wg", f32(4, 2, 1, 1)),
         init("fw", f32(3, 4)), init("fb", f32(3))]))
    # shape plumbing, folded where constant
    seeds.append(model([
        n("Shape", ["x"], ["sh"], name="shape"),
        n("Gather", ["sh", "i0"], ["d0"], name="gather", axis=0),
        n("ConstantOfShape", ["cs"], ["zeros"], name="cos",
          value=numpy_helper.from_array(np.array([1.5], np.float32))),
        n("Add", ["x", "zeros"], ["a"], name="add"),
        n("Transpose", ["a"], ["t"], name="tr", perm=[0, 2, 1]),
        n("Reshape", ["t", "rs"], ["re"], name="reshape"),
        n("Slice", ["re", "st", "en", "ax", "sp"], ["sl"], name="slice"),
        n("Pad", ["sl", "pads", "pv"], ["pd"], name="pad", mode="constant"),
        n("Split", ["pd", "split"], ["s1", "s2"], name="split", axis=1),
        n("Concat", ["s2", "s1"], ["cc"], name="concat", axis=1),
        n("Unsqueeze", ["cc", "ua"], ["us"], name="unsq"),
        n("Squeeze", ["us", "ua"], ["sq"], name="sq"),
        n("Cast", ["sq"], ["ca"], name="cast", to=TensorProto.FLOAT),
        n("Tile", ["ca", "reps"], ["ti"], name="tile"),
        n("Expand", ["ti", "exs"], ["y"], name="expand")],
        [vi("x", [2, 3, 4])], [vi("y", [2, 24])],
        [init("i0", np.array([0], np.int64)), init("cs", np.array([2, 3, 4], np.int64)),
         init("rs", np.array([2, 12], np.int64)), init("st", np.array([1], np.int64)),
         init("en", np.array([11], np.int64)), init("ax", np.array([1], np.int64)),
         init("sp", np.array([1], np.int64)), init("pads", np.array([0, 1, 0, 1], np.int64)),
         init("pv", np.array(0.5, np.float32)), init("split", np.array([6, 6], np.int64)),
         init("ua", np.array([0], np.int64)), init("reps", np.array([1, 2], np.int64)),
         init("exs", np.array([2, 1], np.int64))]))
    # elementwise maths, reductions, the softmax family
    seeds.append(model([
        n("Clip", ["x", "lo", "hi"], ["c"], name="clip"),
        n("LeakyRelu", ["c"], ["l"], name="leaky", alpha=0.1),
        n("PRelu", ["l", "slope"], ["p"], name="prelu"),
        n("ReduceMean", ["p"], ["rm"], name="rmean", axes=[1], keepdims=1),
        n("Sub", ["p", "rm"], ["d"], name="sub"),
        n("ReduceL2", ["d"], ["l2"], name="l2", axes=[-1], keepdims=1),
        n("Div", ["d", "l2"], ["nrm"], name="div"),
        n("Softmax", ["nrm"], ["sm"], name="softmax", axis=-1),
        n("LogSoftmax", ["nrm"], ["ls"], name="logsoftmax", axis=1),
        n("Mean", ["sm", "ls", "nrm"], ["mean"], name="mean"),
        n("Constant", [], ["k"], name="const", value=numpy_helper.from_array(
            np.array([2.0], np.float32))),
        n("Mul", ["mean", "k"], ["y"], name="mul")],
        [vi("x", [2, 5])], [vi("y", [2, 5])],
        [init("lo", np.array(-1.0, np.float32)), init("hi", np.array(1.0, np.float32)),
         init("slope", f32(5))], opset=11))
    # a custom node next to standard ones, an old opset with attribute forms
    seeds.append(model([
        n("MyNorm", ["x"], ["m"], name="custom", domain="com.example", eps=1e-3, k=[1, 2]),
        n("Reshape", ["m"], ["r"], name="reshape_v1", shape=[1, 8]),
        n("Softmax", ["r"], ["y"], name="softmax_v1", axis=1)],
        [vi("x", [1, 2, 2, 2])], [vi("y", [1, 8])], opset=4, domains=("com.example",)))
    # 2-D pooling, normalizations and depth/space
    seeds.append(model([
        n("InstanceNormalization", ["x", "is", "ib"], ["in"], name="inorm", epsilon=1e-5),
        n("LRN", ["in"], ["lrn"], name="lrn", size=3),
        n("AveragePool", ["lrn"], ["ap"], name="apool", kernel_shape=[2, 2], pads=[0, 0, 1, 1]),
        n("DepthToSpace", ["ap"], ["ds"], name="d2s", blocksize=2, mode="CRD"),
        n("ConvTranspose", ["ds", "tw", "tb"], ["y"], name="deconv", strides=[2, 2])],
        [vi("x", [1, 4, 4, 4])], [vi("y", [1, 2, 16, 16])],
        [init("is", f32(4)), init("ib", f32(4)), init("tw", f32(1, 2, 2, 2)),
         init("tb", f32(2))]))
    # issue 20's ops: a transformer block (LayerNormalization, Linear + bias, the erf GELU,
    # a masked Softmax through Where), the index ops and Resize
    seeds.append(model([
        n("LayerNormalization", ["x", "lw", "lb"], ["ln"], name="ln", axis=-1),
        n("MatMul", ["ln", "mw"], ["mm"], name="linear"),
        n("Add", ["mm", "mb"], ["lin"], name="bias"),
        n("Div", ["lin", "sq2"], ["gd"], name="gdiv"), n("Erf", ["gd"], ["ge"], name="erf"),
        n("Add", ["ge", "one"], ["ga"], name="gadd"), n("Mul", ["lin", "ga"], ["gm"], name="gmul"),
        n("Mul", ["gm", "half"], ["gl"], name="ghalf"),
        n("Equal", ["gl", "gl"], ["eq"], name="eq"),
        n("Where", ["eq", "gl", "neg"], ["wh"], name="where"),
        n("Softmax", ["wh"], ["sm"], name="softmax", axis=-1),
        n("CumSum", ["sm", "cax"], ["cs"], name="cumsum", exclusive=1),
        n("TopK", ["cs", "k"], ["tv", "ti"], name="topk", axis=-1),
        n("GatherElements", ["cs", "ti"], ["gel"], name="gather_el", axis=-1),
        n("ScatterND", ["gel", "sidx", "supd"], ["sc"], name="scatter_nd", reduction="add"),
        n("ArgMax", ["sc"], ["am"], name="argmax", axis=1, keepdims=1),
        n("Unsqueeze", ["sc", "uax"], ["u4"], name="unsq4"),
        n("Resize", ["u4", "", "rsc"], ["y"], name="resize", mode="linear")],
        [vi("x", [2, 3, 8])], [vi("y", [1, 2, 6, 6]), vi("am", [2, 1, 3], TensorProto.INT64)],
        [init("lw", f32(8)), init("lb", f32(8)), init("mw", f32(8, 6)), init("mb", f32(6)),
         init("sq2", np.array(1.4142135, np.float32)), init("one", np.array(1.0, np.float32)),
         init("half", np.array(0.5, np.float32)), init("neg", np.array(-1e4, np.float32)),
         init("cax", np.array(-1, np.int64)), init("k", np.array([3], np.int64)),
         init("sidx", np.array([[0, 1], [1, -1]], np.int64)), init("supd", f32(2, 3)),
         init("uax", np.array([0], np.int64)),
         init("rsc", np.array([1, 1, 2, 2], np.float32))], opset=18))
    for data in seeds:
        onnx.checker.check_model(onnx.load_from_string(data))
    return seeds


# -- byte mutators (both formats) --------------------------------------------------------------
def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return bytes([rng.randrange(256)])
    b = bytearray(data)
    kind = rng.randrange(6)
    i = rng.randrange(len(b))
    if kind == 0:                                  # flip bits of one byte
        b[i] ^= 1 << rng.randrange(8)
    elif kind == 1:                                # truncate
        del b[i:]
    elif kind == 2:                                # insert random bytes
        b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    elif kind == 3:                                # delete a range
        del b[i:i + rng.randint(1, 16)]
    elif kind == 4:                                # duplicate a range
        j = min(len(b), i + rng.randint(1, 32))
        b[j:j] = b[i:j]
    else:                                          # set a byte to an interesting value
        b[i] = rng.choice([0, 0x7F, 0x80, 0xFF, 0x01])
    return bytes(b)


# -- IR mutators -------------------------------------------------------------------------------
def _tree(xml: bytes):
    from lxml import etree
    return etree.fromstring(xml, etree.XMLParser(remove_comments=True, resolve_entities=False,
                                                 no_network=True))


def mutate_ir(xml: bytes, weights: bytes, rng: random.Random) -> tuple[bytes, bytes]:
    """One mutation of an IR model: of its XML tree, its text, or its weights."""
    kind = rng.randrange(10)
    if kind == 0:
        return mutate_bytes(xml, rng), weights
    if kind == 1:
        return xml, mutate_bytes(weights, rng)
    from lxml import etree
    try:
        root = _tree(xml)
    except etree.XMLSyntaxError:                   # an earlier byte edit broke the XML
        return mutate_bytes(xml, rng), weights
    elements = list(root.iter())
    if kind == 2:                                  # a dim's text
        dims = [e for e in elements if e.tag == "dim"] or elements
        rng.choice(dims).text = rng.choice(NUMBER_TEXTS)
    elif kind == 3:                                # an attribute's value
        elem = rng.choice([e for e in elements if e.attrib] or elements)
        if elem.attrib:
            key = rng.choice(list(elem.attrib))
            elem.set(key, rng.choice(NUMBER_TEXTS + ["f32", "i64", "u1", "FP64", "bogus"]))
    elif kind == 4:                                # drop an attribute
        elem = rng.choice([e for e in elements if e.attrib] or elements)
        if elem.attrib:
            del elem.attrib[rng.choice(list(elem.attrib))]
    elif kind == 5:                                # drop an element
        elem = rng.choice(elements[1:] or elements)
        if elem.getparent() is not None:
            elem.getparent().remove(elem)
    elif kind == 6:                                # duplicate an element
        import copy
        elem = rng.choice(elements[1:] or elements)
        if elem.getparent() is not None:
            elem.addnext(copy.deepcopy(elem))
    elif kind == 7:                                # change a layer's type
        layers = [e for e in elements if e.tag == "layer"]
        if layers:
            rng.choice(layers).set("type", rng.choice(IR_TYPES))
    elif kind == 8:                                # an edge to another (maybe missing) port
        edges = [e for e in elements if e.tag == "edge"]
        if edges:
            edge = rng.choice(edges)
            key = rng.choice(["from-layer", "from-port", "to-layer", "to-port"])
            edge.set(key, str(rng.randint(-1, 9)))
    else:                                          # add a port to a layer
        groups = [e for e in elements if e.tag in ("input", "output")]
        if groups:
            group = rng.choice(groups)
            port = etree.SubElement(group, "port", id=str(rng.randint(0, 9)), precision="FP32")
            for _ in range(rng.randint(0, 4)):
                etree.SubElement(port, "dim").text = str(rng.choice([1, 2, 3]))
    return etree.tostring(root), weights


# -- ONNX mutators -----------------------------------------------------------------------------
def mutate_onnx(data: bytes, rng: random.Random) -> bytes:
    """One mutation of a serialized ONNX model."""
    try:
        return _mutate_onnx(data, rng)
    except (ValueError, TypeError, UnicodeError):
        # protobuf refuses to copy a name an earlier mutation made invalid UTF-8 (bytes)
        return mutate_bytes(data, rng)


def _mutate_onnx(data: bytes, rng: random.Random) -> bytes:
    kind = rng.randrange(15)
    if kind == 0:
        return mutate_bytes(data, rng)
    import onnx
    try:
        model = onnx.load_from_string(data)
    except Exception:                               # an earlier byte edit broke it
        return mutate_bytes(data, rng)
    g = model.graph
    node = rng.choice(g.node) if len(g.node) else None
    if kind == 1 and node is not None:              # inputs: drop, add, empty a name
        choice = rng.randrange(3)
        if choice == 0 and len(node.input):
            del node.input[rng.randrange(len(node.input))]
        elif choice == 1:
            node.input.append(rng.choice([v.name for v in g.initializer] + ["x", "nowhere"]))
        elif len(node.input):
            node.input[rng.randrange(len(node.input))] = ""
    elif kind == 2 and node is not None:            # outputs: drop, duplicate, rename
        choice = rng.randrange(3)
        if choice == 0 and len(node.output):
            del node.output[rng.randrange(len(node.output))]
        elif choice == 1:
            node.output.append(rng.choice([o for n in g.node for o in n.output] or ["z"]))
        elif len(node.output):
            other = rng.choice(g.node)
            node.output[0] = other.output[0] if len(other.output) else "x"
    elif kind == 3 and node is not None:            # attributes: drop, duplicate
        if len(node.attribute):
            k = rng.randrange(len(node.attribute))
            if rng.random() < 0.5:
                del node.attribute[k]
            else:
                node.attribute.append(node.attribute[k])
    elif kind == 4 and node is not None:            # an attribute's type or value
        if len(node.attribute):
            a = node.attribute[rng.randrange(len(node.attribute))]
            choice = rng.randrange(5)
            if choice == 0:
                a.type = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 11])
            elif choice == 1:
                a.i = rng.choice([-2**63, -1, 0, 2, 3, 2**31, 2**63 - 1])
            elif choice == 2:
                del a.ints[:]
                a.ints.extend(rng.choice([[], [0], [-1], [1, 2, 3], [2**40, 1], [0, 0, 0, 0, 0]]))
            elif choice == 3:
                a.f = rng.choice([float("nan"), float("inf"), -1.0, 0.0, 1e30])
            else:
                a.s = rng.choice([b"", b"\xff\xfe", b"SAME_UPPER", b"bogus", b"CRD"])
    elif kind == 5 and node is not None:            # op type, domain
        if rng.random() < 0.8:
            node.op_type = rng.choice(ONNX_OPS)
        else:
            node.domain = rng.choice(["com.example", "ai.onnx", "bogus"])
    elif kind == 6 and len(g.initializer):          # initializer dims
        t = g.initializer[rng.randrange(len(g.initializer))]
        choice = rng.randrange(4)
        if choice == 0 and len(t.dims):
            t.dims[rng.randrange(len(t.dims))] = rng.choice([-1, 0, 2**31, 2**40, 7])
        elif choice == 1:
            t.dims.append(rng.choice([1, 2, 3]))
        elif choice == 2 and len(t.dims):
            del t.dims[-1]
        else:
            del t.dims[:]
    elif kind == 7 and len(g.initializer):          # initializer data
        t = g.initializer[rng.randrange(len(g.initializer))]
        choice = rng.randrange(5)
        if choice == 0 and t.raw_data:
            t.raw_data = t.raw_data[:rng.randrange(len(t.raw_data))]
        elif choice == 1:
            t.raw_data = t.raw_data + bytes(rng.randint(1, 9))
        elif choice == 2:
            t.data_type = rng.choice([0, 2, 4, 8, 10, 11, 16, 99])
        elif choice == 3:
            t.ClearField("raw_data")
            t.float_data.extend([1.0] * rng.randint(0, 3))
        else:
            t.data_location = onnx.TensorProto.EXTERNAL
            entry = t.external_data.add()
            entry.key, entry.value = "location", rng.choice(["missing.bin", "../x", "", "/etc"])
    elif kind == 8:                                 # declared shapes of inputs and outputs
        infos = list(g.input) + list(g.output)
        if infos:
            v = rng.choice(infos)
            dims = v.type.tensor_type.shape.dim
            if len(dims):
                dims[rng.randrange(len(dims))].dim_value = rng.choice([-3, 0, 2**31, 2**62])
            else:
                v.type.tensor_type.elem_type = rng.choice([0, 8, 16, 99])
    elif kind == 9:                                 # opsets, graph outputs
        choice = rng.randrange(3)
        if choice == 0 and len(model.opset_import):
            model.opset_import[0].version = rng.choice([0, 1, 6, 12, 99, 2**40])
        elif choice == 1:
            del g.output[:]
        elif len(g.output):
            g.output[0].name = rng.choice(["nowhere", "x", ""])
    elif kind == 10:                                # a name that is not UTF-8
        text = rng.choice([node.name if node is not None else "", g.name,
                           g.input[0].name if len(g.input) else ""])
        if text:
            raw = model.SerializeToString()
            needle = text if isinstance(text, bytes) else text.encode()
            if needle in raw:
                k = raw.index(needle)
                return raw[:k] + b"\xff" + raw[k + 1:]
    elif kind in (12, 13) and node is not None and len(node.attribute):
        # a plausible but wrong attribute value (axis 5, group 3, perm of the wrong length):
        # the model stays well-formed, so the translations' own checks meet it
        a = node.attribute[rng.randrange(len(node.attribute))]
        if a.type == onnx.AttributeProto.INT:
            a.i = rng.randint(-5, 5)
        elif a.type == onnx.AttributeProto.INTS:
            del a.ints[:]
            a.ints.extend(rng.randint(-3, 5) for _ in range(rng.randint(0, 6)))
        elif a.type == onnx.AttributeProto.FLOAT:
            a.f = rng.choice([-1.0, 0.0, 1e-30, 3.5])
        elif a.type == onnx.AttributeProto.TENSOR:
            a.t.CopyFrom(onnx.numpy_helper.from_array(np.array(
                rng.choice([[], [1.0, 2.0], [[1]], 7]), rng.choice([np.float32, np.int64]))))
    elif kind == 14 and len(g.initializer):         # an integer constant's values
        ints = [t for t in g.initializer if t.data_type == onnx.TensorProto.INT64]
        if ints:
            t = rng.choice(ints)
            size = rng.choice([0, 1, 2, 3, 4, 6]) if rng.random() < 0.3 else \
                int(np.prod(t.dims, dtype=np.int64))
            values = np.array([rng.choice([-2**62, -5, -1, 0, 1, 2, 3, 7, 2**40])
                               for _ in range(size)], np.int64)
            t.CopyFrom(onnx.numpy_helper.from_array(values.reshape(
                tuple(t.dims) if values.size == int(np.prod(t.dims, dtype=np.int64)) else -1),
                t.name))
    else:                                           # a node moved, removed or copied
        if node is not None:
            choice = rng.randrange(3)
            k = list(g.node).index(node)
            if choice == 0:
                del g.node[k]
            elif choice == 1:
                g.node.add().CopyFrom(node)
            else:                                   # moved to the front
                copies = [type(n)() for n in g.node]
                for c, n in zip(copies, g.node):
                    c.CopyFrom(n)
                del g.node[:]
                g.node.extend([copies[k]] + copies[:k] + copies[k + 1:])
    return model.SerializeToString()


def mutated_ir(seed: int, rounds: int | None = None) -> tuple[bytes, bytes]:
    """The IR case of this seed: a seed model with 1 to 3 mutations."""
    rng = random.Random(seed)
    xml, weights = rng.choice(ir_seeds())
    for _ in range(rounds or rng.randint(1, 3)):
        xml, weights = mutate_ir(xml, weights, rng)
    return xml, weights


_ONNX_SEEDS: list[bytes] = []


def mutated_onnx(seed: int, rounds: int | None = None) -> bytes:
    """The ONNX case of this seed: a seed model with 1 to 3 mutations."""
    if not _ONNX_SEEDS:
        _ONNX_SEEDS.extend(onnx_seeds())
    rng = random.Random(seed)
    data = rng.choice(_ONNX_SEEDS)
    for _ in range(rounds or rng.randint(1, 3)):
        data = mutate_onnx(data, rng)
    return data


def write_ir(folder: Path, xml: bytes, weights: bytes) -> Path:
    path = folder / "model.xml"
    path.write_bytes(xml)
    (folder / "model.bin").write_bytes(weights)
    return path


def write_onnx(folder: Path, data: bytes) -> Path:
    path = folder / "model.onnx"
    path.write_bytes(data)
    return path
