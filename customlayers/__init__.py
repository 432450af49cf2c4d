"""customlayers: custom neural-network layers in OpenCL, in OpenVINO's CustomLayer format.

The package in floors, top to bottom: cli | integrations > runtime > passes > ops > jit >
config | graph > settings, files, terminal, dtypes > errors (import-linter contracts in
pyproject.toml; ARCHITECTURE.md says where each concern lives).

May import: nothing of its own (the version only), so that `import customlayers` is free.
"""
__version__ = "0.1.0"
