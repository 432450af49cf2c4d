"""cli/layer_commands: the commands about one layer type and its descriptor: validate (with
--compile, --check-bounds, --sanitize; mvcl_validate.py for MVCL), jit, layers, run-layer, check;
what each does per dialect (dialects.py), build errors as diagnostics (build_diagnostics.py),
the output formats of validate (diagnostic_formats.py), which files validate reads
(config_files.py).

May import: cli's shared modules (common, strict_parser, user_traceback), cli/user_files, and
every floor below cli.
"""
