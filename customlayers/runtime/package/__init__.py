"""runtime/package: compiled packages (`customlayers compile -o model.clpkg`): one file holding a
network's compiled plans for one device and its program binaries, loaded without sources,
descriptors, graph rewrites or tuning.

codec.py: the plans as tagged JSON and one binary blob of arrays (no pickle); container.py:
the file (magic, format version, a manifest with a sha256 of every part, the parts);
programs.py: the program binaries out of built programs and back into the driver, and the
device the package was made for; host_layers.py: Python layers' host steps as records.

May import: runtime's layers, execute and device rooms, and every floor below runtime. The
compile room above (compile/packaged.py) turns a Network's plans into package parts and back.
"""
