"""Property tests of both model readers: a small valid model, mutated (bytes flipped or cut, dims,
attributes, port ids, initializer data, element types, op types, names changed: the mutators of
tests/model_mutators.py, which scripts/fuzz_models.py runs for longer), is either read or refused
with a CustomLayersError that an explicit check raised: never another exception, and never the
"unchecked" net of graph/guard.py. Bounded to a few seconds each."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import model_mutators as mm
from customlayers.errors import CustomLayersError
from customlayers.graph.guard import is_unchecked
from customlayers.graph.load import read_model

IR_SEEDS = mm.ir_seeds()
ONNX_SEEDS = mm.onnx_seeds()
FUZZ = settings(max_examples=600, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


def read_or_refuse(path: Path) -> None:
    try:
        read_model(path)
    except CustomLayersError as e:
        assert not is_unchecked(e), f"no explicit check met this model: {e}"


@pytest.mark.parametrize("index", range(len(IR_SEEDS)))
def test_ir_seeds_read(tmp_path, index):
    read_model(mm.write_ir(tmp_path, *IR_SEEDS[index]))


@pytest.mark.parametrize("index", range(len(ONNX_SEEDS)))
def test_onnx_seeds_read(tmp_path, index):
    read_model(mm.write_onnx(tmp_path, ONNX_SEEDS[index]))


@FUZZ
@given(rng=st.randoms(use_true_random=False), rounds=st.integers(1, 3))
def test_mutated_ir_is_read_or_refused_with_a_message(rng, rounds):
    xml, weights = rng.choice(IR_SEEDS)
    for _ in range(rounds):
        xml, weights = mm.mutate_ir(xml, weights, rng)
    with tempfile.TemporaryDirectory() as folder:
        read_or_refuse(mm.write_ir(Path(folder), xml, weights))


@FUZZ
@given(rng=st.randoms(use_true_random=False), rounds=st.integers(1, 3))
def test_mutated_onnx_is_read_or_refused_with_a_message(rng, rounds):
    data = rng.choice(ONNX_SEEDS)
    for _ in range(rounds):
        data = mm.mutate_onnx(data, rng)
    with tempfile.TemporaryDirectory() as folder:
        read_or_refuse(mm.write_onnx(Path(folder), data))


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300))
def test_arbitrary_bytes_as_onnx(data):
    with tempfile.TemporaryDirectory() as folder:
        read_or_refuse(mm.write_onnx(Path(folder), data))


@settings(max_examples=300, deadline=None)
@given(xml=st.binary(max_size=300), weights=st.binary(max_size=64))
def test_arbitrary_bytes_as_ir(xml, weights):
    with tempfile.TemporaryDirectory() as folder:
        read_or_refuse(mm.write_ir(Path(folder), xml, weights))
