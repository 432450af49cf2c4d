"""Models as graphs: the Graph types and the readers that make them (OpenVINO IR, ONNX).

graph.py (Graph, Node, Port), ir.py (OpenVINO IR), ir_lowering.py (IR layers the built-ins
take in another form: static ShapeOf arithmetic, GRUSequence/LSTMSequence), variables.py (a
stateful model's ReadValue/Assign variables, checked), onnx/ (the ONNX reader and its one
translation table), load.py (either, by file), custom_shapes.py (output shapes of custom nodes
asked of the resolver).

May import: errors, settings, files, dtypes. Not jit/, ops/, runtime/ or pyopencl.
"""
from .graph import Edge, Graph, Node, Port
from .ir import read_ir, read_ir_string
from .onnx.reader import read_onnx

__all__ = ["Edge", "Graph", "Node", "Port", "read_ir", "read_ir_string", "read_onnx"]
