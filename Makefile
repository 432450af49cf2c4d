# The two commands of the README. Both install what is missing (PoCL, .venv, the package);
# `make demo` only what the demo uses, `make test` the test extra and oclgrind too (setup.sh).
VENV ?= .venv
PY := $(VENV)/bin/python
export VENV

.PHONY: setup setup-test test demo validate bench clean

setup:
	@bash scripts/setup.sh

setup-test:
	@bash scripts/setup.sh test

test: setup-test
	$(PY) -m pytest -q tests

demo: setup
	$(PY) cli.py demo

validate: setup
	$(PY) cli.py validate examples/layers/*/*.xml

bench: setup
	$(PY) bench/jit_cache.py
	$(PY) bench/layer_overhead.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
