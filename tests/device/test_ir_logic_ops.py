"""Issue 20, elementwise ops on data (ops/logic) read from an OpenVINO IR: the reader passes
the op types through (Less, NotEqual, Select), a Result of a BOOL port returns a numpy bool
array, and a BitwiseNot of booleans is their negation (held as u8, ~1 would be 254)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from customlayers.api import Network


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _ir_dims(shape) -> str:
    return "".join(f"<dim>{d}</dim>" for d in shape)


def _ir(path: Path, middle: list[str], edges, shape=(2, 3)) -> Path:
    """An IR (v11) of f32 Parameters a (id 0) and b (id 1), the `middle` layers, and the
    `edges` (from-layer, from-port, to-layer, to-port) between them."""
    params = [f'<layer id="{i}" name="{n}" type="Parameter" version="opset1"><data '
              f'shape="{",".join(map(str, shape))}" element_type="f32"/><output>'
              f'{_port(0, "FP32", shape, n)}</output></layer>' for i, n in enumerate("ab")]
    path.write_text(f'<?xml version="1.0"?>\n<net name="logic" version="11"><layers>'
                    f'{"".join(params + middle)}</layers><edges>' + "".join(
                        f'<edge from-layer="{a}" from-port="{p}" to-layer="{b}" to-port="{q}"/>'
                        for a, p, b, q in edges) + '</edges></net>\n')
    path.with_suffix(".bin").write_bytes(b"")
    return path


def _port(pid: int, precision: str, shape, names: str = "") -> str:
    named = f' names="{names}"' if names else ""
    return f'<port id="{pid}" precision="{precision}"{named}>{_ir_dims(shape)}</port>'


def _ab(shape=(2, 3)) -> dict:
    rng = np.random.default_rng(19)
    return {n: rng.standard_normal(shape).astype(np.float32) for n in "ab"}


def test_an_ir_of_less_and_select_runs(tmp_path, engine):
    """The IR reader passes the op types through: Less (a BOOL port) and Select."""
    s = (2, 3)
    middle = [
        f'<layer id="2" name="less" type="Less" version="opset1"><data auto_broadcast="numpy"/>'
        f'<input>{_port(0, "FP32", s)}{_port(1, "FP32", s)}</input>'
        f'<output>{_port(2, "BOOL", s, "m")}</output></layer>',
        f'<layer id="3" name="select" type="Select" version="opset1">'
        f'<data auto_broadcast="numpy"/><input>{_port(0, "BOOL", s)}{_port(1, "FP32", s)}'
        f'{_port(2, "FP32", s)}</input><output>{_port(3, "FP32", s, "y")}</output></layer>',
        f'<layer id="4" name="y/sink" type="Result" version="opset1"><input>'
        f'{_port(0, "FP32", s)}</input></layer>']
    edges = [(0, 0, 2, 0), (1, 0, 2, 1), (2, 2, 3, 0), (0, 0, 3, 1), (1, 0, 3, 2), (3, 3, 4, 0)]
    feeds = _ab(s)
    got = Network(_ir(tmp_path / "logic.xml", middle, edges), engine=engine).infer(feeds)["y"]
    np.testing.assert_array_equal(got, np.minimum(feeds["a"], feeds["b"]))


def test_an_ir_boolean_output_comes_back_as_bool(tmp_path, engine):
    s = (2, 3)
    middle = [
        f'<layer id="2" name="ne" type="NotEqual" version="opset1"><data auto_broadcast="numpy"/>'
        f'<input>{_port(0, "FP32", s)}{_port(1, "FP32", s)}</input>'
        f'<output>{_port(2, "BOOL", s, "m")}</output></layer>',
        f'<layer id="3" name="m/sink" type="Result" version="opset1"><input>'
        f'{_port(0, "BOOL", s)}</input></layer>']
    feeds = _ab(s)
    feeds["b"][0] = feeds["a"][0]
    path = _ir(tmp_path / "ne.xml", middle, [(0, 0, 2, 0), (1, 0, 2, 1), (2, 2, 3, 0)])
    got = Network(path, engine=engine).infer(feeds)["m"]
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, feeds["a"] != feeds["b"])


def test_an_ir_bitwise_not_of_booleans_is_their_negation(tmp_path, engine):
    """OpenVINO's BitwiseNot of booleans is a logical not; held as u8, ~1 would be 254."""
    s = (2, 3)
    middle = [
        f'<layer id="2" name="lt" type="Less" version="opset1"><data auto_broadcast="numpy"/>'
        f'<input>{_port(0, "FP32", s)}{_port(1, "FP32", s)}</input>'
        f'<output>{_port(2, "BOOL", s, "m")}</output></layer>',
        f'<layer id="3" name="not" type="BitwiseNot" version="opset13">'
        f'<input>{_port(0, "BOOL", s)}</input><output>{_port(1, "BOOL", s, "n")}</output>'
        f'</layer>',
        f'<layer id="4" name="n/sink" type="Result" version="opset1"><input>'
        f'{_port(0, "BOOL", s)}</input></layer>']
    feeds = _ab(s)
    path = _ir(tmp_path / "not.xml", middle,
               [(0, 0, 2, 0), (1, 0, 2, 1), (2, 2, 3, 0), (3, 1, 4, 0)])
    got = Network(path, engine=engine).infer(feeds)["n"]
    np.testing.assert_array_equal(got, ~(feeds["a"] < feeds["b"]))
