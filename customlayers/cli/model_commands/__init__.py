"""cli/model_commands: the commands that run a whole model: run, benchmark (with OpenVINO
benchmark_app's options and its summary), demo; model_args.py is what run and benchmark share
(-m/-c/-d/-i, shapes, loading).

May import: cli/layer_commands (demo validates and runs the example layers), cli/user_files,
cli's shared modules, and every floor below cli.
"""
