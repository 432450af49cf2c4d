# The two commands of the README. Both install what is missing (PoCL, .venv, the package);
# `make demo` only what the demo uses, `make test` the test extra and oclgrind too (setup.sh).
VENV ?= .venv
PY := $(VENV)/bin/python
export VENV

.PHONY: setup setup-test test node-suite demo validate bench clean

setup:
	@bash scripts/setup.sh

setup-test:
	@bash scripts/setup.sh test

# the ONNX backend node suite (1,800+ generated cases, each a compiled network) is its own step
# (`make node-suite`, run by .ci/run after this one): it compiles a thousand programs cold
NODE_SUITE := tests/conformance/test_onnx_node_suite.py

test: setup-test
	$(PY) -m pytest -q tests --ignore=$(NODE_SUITE)

node-suite: setup-test
	$(PY) -m pytest -q $(NODE_SUITE)

demo: setup
	$(PY) cli.py demo

validate: setup
	$(PY) cli.py validate examples/layers/*/*.xml

bench: setup
	$(PY) bench/jit_cache.py
	$(PY) bench/layer_overhead.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
