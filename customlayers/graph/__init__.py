"""Models as graphs: the Graph types and the readers that make them (OpenVINO IR, ONNX)."""
from .graph import Edge, Graph, Node, Port
from .ir import read_ir, read_ir_string
from .onnx.reader import read_onnx

__all__ = ["Edge", "Graph", "Node", "Port", "read_ir", "read_ir_string", "read_onnx"]
