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

# two processes (pytest-xdist): PoCL compiles a program on one core, and compiling is most of
# the suite; tests that share a Ray instance or hold whole models are grouped into one process
# (tests/conftest.py). TEST_WORKERS=0 runs it in this process.
# --max-worker-restart=0: a worker that dies (a driver's crash) ends the run at once, naming its
# test; pytest-xdist 3.8 with --dist loadgroup otherwise starts a new worker and then waits for
# good at the end (seen once with PoCL's cache empty; a test that kills its worker shows it)
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup --max-worker-restart=0)

# --durations: the ten slowest tests at the end of every run (issue 22 asks for them)
test: setup-test
	$(PY) -m pytest -q $(XDIST) --durations=10 tests --ignore=$(NODE_SUITE)

# one process: its last test sums up the cases that pass unlisted, which the cases before it
# collected in this process (and it takes half a minute)
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
