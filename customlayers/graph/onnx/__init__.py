"""The ONNX reader: model.onnx -> Graph in OpenVINO IR spelling (reader.read_onnx).

What is here: reading the file with its large initializers left in its bytes (file.py), checks
of the model and of each node against ONNX's schemas (checks.py), shape inference (shapes.py),
and the translations of standard ONNX ops into IR ops: the helpers they share and the
@translates registration (translate.py), shape arithmetic folded at load or kept for the
shape-folding pass (deferred.py), the translations by kind of op (the ops/ room), and the one
table of them the reader asks (table.py).

May import: the rest of graph/ (graph.py, guard.py, limits.py, custom_shapes.py),
errors, files and dtypes, numpy and onnx; nothing above the graph floor (pyproject.toml's
floors). Inside, imports go one way: reader -> table -> ops/* -> translate, deferred, checks (no
module imports one that imports it back; tests/unit/test_onnx_layout.py). This file imports
nothing, so that importing one module of the room does not import the others.
"""
