"""The XML parser expands no entity, loads no DTD, touches no network; and never crashes:
whatever the input, the loader answers with diagnostics, not exceptions."""
from __future__ import annotations

import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from customlayers.config import load_config_string, load_configs

DATA = Path(__file__).resolve().parent.parent / "data" / "configs"


def test_billion_laughs_refused_at_once():
    start = time.perf_counter()
    configs = load_configs([DATA / "bad" / "billion_laughs.xml"])
    assert time.perf_counter() - start < 1.0
    (d,) = configs.diagnostics
    assert (d.line, d.code, d.severity) == (2, "CL002", "error")
    assert "entities are refused" in d.message
    assert configs.layers == {}


def test_external_entity_refused_and_file_not_read():
    configs = load_configs([DATA / "bad" / "external_entity.xml"])
    (d,) = configs.diagnostics
    assert (d.line, d.code) == (2, "CL002")
    assert "root:" not in d.message  # nothing of /etc/passwd leaks into any message


def test_entity_reference_without_declaration_is_a_syntax_error():
    configs = load_config_string('<CustomLayer name="&xxe;" type="SimpleGPU" version="1"/>')
    assert [d.code for d in configs.diagnostics] == ["CL001"]


def test_doctype_without_entities_is_ignored_with_a_warning():
    text = ('<?xml version="1.0"?>\n<!DOCTYPE CustomLayer SYSTEM "http://example.invalid/x.dtd">'
            '\n<CustomLayer name="L" type="SimpleGPU" version="1"/>\n')
    codes = [(d.line, d.code) for d in load_config_string(text).diagnostics]
    assert codes[0] == (2, "CL005")
    assert (3, "CL012") in codes  # the rest of the file is still checked, at its own lines


VALID = """<?xml version="1.0"?>
<!-- c -->
<CustomLayer name="L" type="SimpleGPU" version="1">
  <Kernel entry="k">
    <Source filename="k.cl"/>
    <Define name="A" type="int[]" default="1,2"/>
  </Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0" format="byxf"/>
    <Data name="w" arg-index="1"/>
    <Tensor arg-index="2" type="output" port-index="0" shape="B,F,Y,X"/>
  </Buffers>
  <CompilerOptions options="-cl-mad-enable"/>
  <WorkSizes global="X,Y,B*F" local="1,1,1" dim="input,0"/>
</CustomLayer>
"""
SOURCES = {"k.cl": "__kernel void k(__global float* a, __global float* w, __global float* o)"
                   " {}\n"}


def test_the_fuzz_seed_is_valid():
    configs = load_config_string(VALID, SOURCES)
    assert list(configs.diagnostics) == [] and "L" in configs.layers


def _check_never_raises(data):
    configs = load_config_string(data, SOURCES)
    for d in configs.diagnostics:  # every diagnostic is complete and renders
        assert d.severity in ("error", "warning", "info") and d.code.startswith("CL")
        assert d.line >= 0 and d.column >= 1
        d.render()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=300), st.binary(max_size=300)))
def test_arbitrary_input_gives_diagnostics_not_exceptions(data):
    _check_never_raises(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(VALID) - 1), st.integers(0, 40),
       st.text(alphabet='<>/="\' ,&;!-?xX0123456789abcdefgh[]\n', max_size=8))
def test_mutated_valid_configs_give_diagnostics_not_exceptions(pos, cut, insert):
    _check_never_raises(VALID[:pos] + insert + VALID[pos + cut:])
