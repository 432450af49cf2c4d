"""Comments are comments: DOCTYPE-like text inside a comment, a CDATA section or a processing
instruction used to be taken for a DOCTYPE, and every layer between it and the next ']>' vanished
without a word. A real DOCTYPE (only possible in the prolog) is still ignored with CL005, and one
that declares entities still refused with CL002."""
from __future__ import annotations

import pytest

from customlayers.config import load_config_string

SOURCES = {"k.cl": "__kernel void k(const __global float* a, __global float* o) {}\n"}


def layer(name: str) -> str:
    return f"""<CustomLayer name="{name}" type="SimpleGPU" version="1">
  <Kernel entry="k"><Source filename="k.cl"/></Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0"/>
    <Tensor arg-index="1" type="output" port-index="0"/>
  </Buffers>
</CustomLayer>
"""


@pytest.mark.parametrize("opening, closing", [
    ("<!-- <!DOCTYPE x [ -->", "<!-- ]> -->"),
    ("<?note <!DOCTYPE x [ ?>", "<?note ]> ?>"),
    ('<!-- <!DOCTYPE x [ <!ENTITY e "boom"> -->', "<!-- ]> -->"),
], ids=["comment", "pi", "comment-with-entity"])
def test_doctype_like_text_between_top_level_layers_hides_nothing(opening, closing):
    text = opening + "\n" + layer("A") + closing + "\n" + layer("B")
    configs = load_config_string(text, SOURCES)
    assert list(configs.diagnostics) == []
    assert sorted(configs.layers) == ["A", "B"]


def test_cdata_inside_a_container_hides_nothing():
    text = ("<Layers><Note><![CDATA[ <!DOCTYPE x [ ]]></Note>\n" + layer("A")
            + "<Note><![CDATA[ ]> ]]></Note>\n" + layer("B") + "</Layers>")
    configs = load_config_string(text, SOURCES)
    assert sorted(configs.layers) == ["A", "B"]
    assert {d.code for d in configs.diagnostics} == {"CL010"}  # <Note> is unknown, nothing else


def test_real_doctype_after_a_comment_is_still_ignored_with_a_warning():
    text = "<!-- header -->\n<!DOCTYPE x [ <!-- ]> --> <!ELEMENT x ANY> ]>\n" + layer("A")
    configs = load_config_string(text, SOURCES)
    assert [(d.line, d.column, d.code) for d in configs.diagnostics] == [(2, 1, "CL005")]
    assert list(configs.layers) == ["A"]


@pytest.mark.parametrize("subset", [
    '<!-- ]> --> <!ENTITY e "x">',
    '<!ENTITY e "]>">',
    '<!ELEMENT x ANY> <!ENTITY % p SYSTEM "file:///etc/passwd"> %p;',
])
def test_entities_in_the_prolog_doctype_are_still_refused(subset):
    text = f"<?xml version=\"1.0\"?>\n<!-- c -->\n<!DOCTYPE x [ {subset} ]>\n" + layer("A")
    configs = load_config_string(text, SOURCES)
    assert [(d.line, d.code) for d in configs.diagnostics] == [(3, "CL002")]
    assert configs.layers == {}


def test_doctype_after_the_first_element_is_not_well_formed():
    text = layer("A") + '<!DOCTYPE x [ <!ENTITY e "boom"> ]>\n' + layer("B")
    configs = load_config_string(text, SOURCES)
    assert [d.code for d in configs.diagnostics] == ["CL001"]
    assert configs.layers == {}


def test_unclosed_doctype_is_reported():
    configs = load_config_string('<!DOCTYPE x [ <!ELEMENT x ANY>\n' + layer("A"), SOURCES)
    assert [(d.line, d.code) for d in configs.diagnostics] == [(1, "CL001")]
