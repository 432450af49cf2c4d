"""customlayers: custom neural-network layers in OpenCL, in OpenVINO's CustomLayer format."""
__version__ = "0.1.0"
