"""MVCL descriptors (SPEC section 6) in config/: loading next to SimpleGPU layers, variants and
stages grouped into one MvclLayer, Where selection, the kernel-signature scanner, and every
MVCL diagnostic at its line with its code."""
from __future__ import annotations

from pathlib import Path

import pytest

from customlayers.config import LayerSpec, MvclLayer, load_config_string, load_configs
from customlayers.config.kernel_signature import kernel_parameters
from customlayers.config.mvcl.spec import MvclData, MvclLocalData, MvclScalar, MvclTensor
from customlayers.errors import BindingError

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLES = ROOT / "examples" / "layers"

K = ("__kernel void k(__global const float* restrict src, __global float* dst,\n"
     "                int W, float alpha) { }\n")
PARAMS = ('<Parameters>\n'
          '<Tensor arg-name="src" type="input" port-index="0"/>\n'
          '<Tensor arg-name="dst" type="output" port-index="0"/>\n'
          '<Scalar arg-name="W" type="int" port-index="0" source="I.X"/>\n'
          '<Scalar arg-name="alpha" type="float" source="alpha"/>\n'
          '</Parameters>\n')
WORK = '<WorkSizes dim="input,0" global="X,Y,B*F"/>\n'


def mvcl(body: str = "", *, name="L", attrs="", where="", kernel=None, params=PARAMS,
         work=WORK) -> str:
    kernel = kernel if kernel is not None else \
        '<Kernel entry="k">\n<Source filename="k.cl"/>\n</Kernel>\n'
    return (f'<CustomLayer name="{name}" type="MVCL" version="1"{attrs}>\n{where}{kernel}'
            f'{params}{work}{body}</CustomLayer>\n')


def load(xml: str, sources=None):
    return load_config_string(xml, {"k.cl": K} if sources is None else sources, name="t.xml")


def codes(configs):
    return [(d.line, d.code, d.severity) for d in configs.diagnostics]


# -- valid configs ---------------------------------------------------------------------------
def test_the_examples_load_without_errors():
    configs = load_configs(sorted(EXAMPLES.glob("*/*.xml")))
    assert configs.diagnostics.errors == []
    kinds = {name: layer.kind for name, layer in configs.layers.items()}
    assert kinds["ReorgYoloNHWC"] == kinds["MVN"] == kinds["SelectActivation"] == "MVCL"
    assert kinds["ReorgYolo"] == "SimpleGPU" and isinstance(configs.layers["ReLU"], LayerSpec)
    assert [d.code for d in configs.diagnostics] == ["CL101"]   # reorg.bin -> reorg.cl


def test_seed_config_reads_every_binding():
    layer = load_configs([EXAMPLES / "reorg_nhwc" / "reorg_nhwc.xml"]).layers["ReorgYoloNHWC"]
    assert isinstance(layer, MvclLayer) and layer.location.line == 4
    (spec,) = layer.select({"stride": "2"})
    assert spec.entry == "reorg_nhwc" and spec.stage == 0 and spec.where == ()
    assert [s.filename for s in spec.sources] == ["reorg.cl"]
    assert spec.sources[0].path == str(EXAMPLES / "reorg_nhwc" / "reorg.cl")
    assert [k.name for k in spec.kernel_parameters] == ["src", "out", "w", "h", "c", "stride"]
    src, out, w, h, c, stride = (p for _, p in spec.arguments)
    assert (src.kind, src.port_index, src.format, src.layout) == ("input", 0, "BYXF", "BYXF")
    assert isinstance(out, MvclTensor) and out.kind == "output"
    assert (w.source, w.source_kind, w.port_index) == ("I.X", "dim", 0)
    assert (stride.source, stride.source_kind, stride.port_index) == ("stride", "attribute", None)
    ws = spec.work_sizes
    assert (ws.global_, ws.local, ws.dim) == (("(Y+7)/8*8", "1", "1"), ("8", "1", "1"),
                                              ("input", 0))


def test_stages_and_buffers_of_the_two_stage_mvn():
    layer = load_configs([EXAMPLES / "mvn_two_stage" / "mvn_two_stage.xml"]).layers["MVN"]
    (variant,) = layer.variants
    first, second = layer.select({"eps": "1e-9", "normalize_variance": "1"})
    assert (first.stage, first.entry, second.stage, second.entry) == \
        (0, "mvn_statistics", 1, "mvn_normalize")
    assert [(t.arg_name, t.port_index, t.dim, t.size) for t in first.tensors("output_buffer")] \
        == [("mean", 0, ("input", 0), "B*F*4"), ("variance", 1, ("input", 0), "B*F*4")]
    assert [t.arg_name for t in second.tensors("input_buffer")] == ["mean", "variance"]


def test_local_data_and_list_attribute_scalars():
    grn = load_configs([EXAMPLES / "grn_local" / "grn_local.xml"]).layers["GRNLocal"]
    (spec,) = grn.select({"bias": "1"})
    (line,) = [p for p in spec.parameters if isinstance(p, MvclLocalData)]
    assert (line.arg_name, line.dim, line.size) == ("line", ("input", 0), "X*F*4")
    act = load_configs([EXAMPLES / "activation_where" / "activation_where.xml"])
    layer = act.layers["SelectActivation"]
    assert [v.where[0].value for v in layer.variants] == ["relu", "leaky", "clamp"]
    (clamp,) = layer.select({"mode": "clamp", "range": "-1,1"})
    lo, hi = (p for p in clamp.parameters if isinstance(p, MvclScalar))
    assert (lo.source, lo.port_index, hi.port_index) == ("range", 0, 1)


def test_one_file_mixes_simplegpu_and_mvcl_and_variants_are_no_redefinition():
    simple = ('<CustomLayer name="Plain" type="SimpleGPU" version="1">\n'
              '<Kernel entry="p"><Source filename="p.cl"/></Kernel>\n'
              '<Buffers><Tensor arg-index="0" type="input" port-index="0"/>'
              '<Tensor arg-index="1" type="output" port-index="0"/></Buffers>\n'
              '</CustomLayer>\n')
    xml = (simple + mvcl(where='<Where mode="a"/>\n') + mvcl(where='<Where mode="b"/>\n'))
    configs = load(xml, {"k.cl": K, "p.cl": "__kernel void p(__global float* a, "
                                             "__global float* b) { }"})
    assert codes(configs) == []
    assert configs.layers["Plain"].kind == "SimpleGPU"
    assert len(configs.layers["L"].variants) == 2
    assert [name for name, _ in configs.definitions] == ["Plain", "L"]


def test_an_mvcl_name_defined_again_in_a_later_file_replaces_it_with_a_warning():
    configs = load(mvcl())
    load_config_string(mvcl(where='<Where mode="x"/>\n'), {"k.cl": K}, name="second.xml",
                       into=configs)
    assert [(d.file, d.code) for d in configs.diagnostics] == [("second.xml", "CL070")]
    assert configs.layers["L"].variants[0].where[0].value == "x"


def test_stages_as_several_kernels_with_parameters_inside():
    kernel = ('<Kernel entry="k" stage="1">\n<Source filename="k.cl"/>\n' + PARAMS + WORK +
              '</Kernel>\n<Kernel entry="k" stage="0">\n<Source filename="k.cl"/>\n' + PARAMS +
              WORK + '</Kernel>\n')
    configs = load(mvcl(kernel=kernel, params="", work=""))
    assert codes(configs) == []
    stages = configs.layers["L"].select({"alpha": "1"})
    assert [s.stage for s in stages] == [0, 1]
    assert [s.kernel_location.line for s in stages] == [12, 2]


def test_lower_rank_formats_map_onto_4d_layouts():
    params = PARAMS.replace('port-index="0"/>\n<Tensor arg-name="dst" type="output" '
                            'port-index="0"/>',
                            'port-index="0" format="fyx"/>\n<Tensor arg-name="dst" '
                            'type="output" port-index="0" format="YXF"/>')
    configs = load(mvcl(params=params))
    spec = configs.layers["L"].specs[0]
    src, dst = spec.tensors("input")[0], spec.tensors("output")[0]
    assert (src.format, src.layout, dst.format, dst.layout) == ("FYX", "BFYX", "YXF", "BYXF")


# -- Where -------------------------------------------------------------------------------------
def variants_layer(*wheres):
    xml = "".join(mvcl(where=w) for w in wheres)
    configs = load(xml)
    assert configs.diagnostics.errors == [], codes(configs)
    return configs.layers["L"]


def test_select_picks_the_matching_variant_and_explains_a_miss():
    layer = variants_layer('<Where mode="relu"/>\n', '<Where mode="clamp" mask="0,1,2"/>\n')
    assert layer.select({"mode": "relu"})[0].where[0].location.line == 2
    assert layer.select({"mode": "CLAMP", "mask": "0, 1, 2"})[0].location.line == 14
    with pytest.raises(BindingError) as e:
        layer.select({"mode": "clamp", "mask": "3,4,5"})
    assert str(e.value) == (
        "no definition of MVCL layer 'L' matches the layer's attributes (mask=\"3,4,5\", "
        "mode=\"clamp\"); tried <Where mode=\"relu\"> at t.xml:1:1: mode is 'clamp', not 'relu'; "
        "<Where mode=\"clamp\" mask=\"0,1,2\"> at t.xml:14:1: mask is '3,4,5', not '0,1,2'")


def test_select_refuses_two_matching_variants():
    layer = variants_layer('<Where mode="relu"/>\n', '')
    with pytest.raises(BindingError, match="2 definitions of MVCL layer 'L' match") as e:
        layer.select({"mode": "relu"})
    assert "no <Where> (matches any attributes) at t.xml:14:1" in str(e.value)
    assert layer.select({"mode": "other"})[0].location.line == 14


@pytest.mark.parametrize("condition, value, matches", [
    (">=2", "2", True), (">=2", "1.5", False), ("&lt;3", "2", True), ("!=1", "1.0", False),
    ("1", "1.0", True), ("5", "4", False), ("3,3", "3, 3", True), ("yes", "YES", True),
])
def test_where_compares_numbers_and_texts_as_openvino_did(condition, value, matches):
    layer = variants_layer(f'<Where n="{condition}"/>\n')
    if matches:
        assert layer.select({"n": value})
    else:
        with pytest.raises(BindingError):
            layer.select({"n": value})


# -- the kernel's parameter list ---------------------------------------------------------------
def test_scanner_reads_qualifiers_comments_attributes_and_macros():
    source = """#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#define KERNEL_HEAD(name) __kernel void name( \\
    int ignored)
// __kernel void k(int wrong);
__kernel void __dma_preload_k(__global half* a) { }
__kernel __attribute__((reqd_work_group_size(8, 1, 1)))
void k(const __global half* restrict src, /* the input */
       __global INPUT_TYPE *dst,
       __local float* line, unsigned int n, float bias)
{ }
#if 0
__kernel void k(__global half* src, __global half* dst, __local float* line, uint n, float b)
{ }
#endif
"""
    params = kernel_parameters(source, "k")
    assert [(p.name, p.address_space, p.is_pointer, p.base_type) for p in params] == [
        ("src", "global", True, "half"), ("dst", "global", True, "INPUT_TYPE"),
        ("line", "local", True, "float"), ("n", "private", False, "uint"),
        ("bias", "private", False, "float")]
    assert params[0].declaration == "const __global half* restrict src"
    assert kernel_parameters("kernel void e(void) {}", "e") == ()
    assert kernel_parameters("#define K(n) __kernel void n(int a)\nK(e) {}", "e") is None


# -- diagnostics -------------------------------------------------------------------------------
@pytest.mark.parametrize("xml, sources, expected", [
    # max-shaves: an informational note; .bin -> .cl
    (mvcl(attrs=' max-shaves="4"'), None, [(1, "CL100", "info")]),
    (mvcl(kernel='<Kernel entry="k">\n<Source filename="k.bin"/>\n</Kernel>\n'), None,
     [(3, "CL101", "info")]),
    (mvcl(kernel='<Kernel entry="k">\n<Source filename="x.bin"/>\n</Kernel>\n'), None,
     [(3, "CL102", "error")]),
    # Parameters children: unknown element, bad types and formats
    (mvcl(params=PARAMS.replace("</Parameters>", '<Blob arg-name="z"/>\n</Parameters>')), None,
     [(10, "CL010", "warning")]),
    (mvcl(params=PARAMS.replace('type="output"', 'type="data"')), None,
     [(7, "CL103", "error")]),
    (mvcl(params=PARAMS.replace('type="float"', 'type="double"')), None,
     [(9, "CL103", "error")]),
    (mvcl(params=PARAMS.replace('port-index="0"/>', 'port-index="0" format="NCHW"/>', 1)),
     None, [(6, "CL104", "error")]),
    # Scalar sources
    (mvcl(params=PARAMS.replace('source="alpha"', 'source="2 * alpha"')), None,
     [(9, "CL105", "error")]),
    (mvcl(params=PARAMS.replace('source="I.X"', 'source="1.5"')), None,
     [(8, "CL105", "error")]),
    (mvcl(params=PARAMS.replace('source="I.X"', 'source="I1.X"')), None,
     [(8, "CL105", "error")]),
    # Parameters / WorkSizes missing, or given twice
    (mvcl(work=""), None, [(2, "CL106", "error")]),
    (mvcl(kernel='<Kernel entry="k">\n<Source filename="k.cl"/>\n' + WORK + '</Kernel>\n'),
     None, [(12, "CL106", "error")]),
    # entry missing, not defined, or not readable
    (mvcl(kernel='<Kernel>\n<Source filename="k.cl"/>\n</Kernel>\n'), None,
     [(2, "CL013", "error")]),
    (mvcl(kernel='<Kernel entry="kk">\n<Source filename="k.cl"/>\n</Kernel>\n'), None,
     [(2, "CL044", "error")]),
    (mvcl(), {"k.cl": "__kernel void k(__global float* src, int W\n"},
     [(2, "CL109", "error")]),
    # bindings against the kernel's parameters
    (mvcl(params=PARAMS.replace('arg-name="W"', 'arg-name="w"')), None,
     [(5, "CL110", "error"), (8, "CL111", "error")]),
    (mvcl(params=PARAMS.replace('arg-name="alpha"', 'arg-name="W"')), None,
     [(5, "CL110", "error"), (9, "CL112", "error")]),
    (mvcl(params=PARAMS.replace('arg-name="src" type="input"', 'arg-name="src" '
                                'type="input_buffer" dim="input,0" size="X*"')), None,
     [(6, "CL060", "error")]),
    (mvcl(params=PARAMS.replace('type="int" port-index="0" source="I.X"',
                                'type="float" port-index="0" source="I.X"')), None,
     [(8, "CL113", "error")]),
    (mvcl(params=PARAMS.replace('<Scalar arg-name="W" type="int" port-index="0" source="I.X"/>',
                                '<Data arg-name="W" type="local_data" dim="input,0" '
                                'size="X*4"/>')), None,
     [(8, "CL113", "error")]),
    # buffers and ports across stages
    (mvcl(params=PARAMS.replace('<Tensor arg-name="src" type="input" port-index="0"/>',
                                '<Tensor arg-name="src" type="input_buffer" port-index="0" '
                                'dim="output,0" size="X*4"/>')), None,
     [(6, "CL114", "error"), (8, "CL115", "error"), (11, "CL115", "error")]),
    (mvcl(work='<WorkSizes dim="input,1" global="X"/>\n'), None, [(11, "CL115", "error")]),
    (mvcl(params=PARAMS.replace('port-index="0" source="I.X"', 'source="O2.X"')), None,
     [(8, "CL115", "error")]),
    # stages and variants
    (mvcl(attrs=' stage="0"') + mvcl(attrs=' stage="2"'), None, [(14, "CL107", "error")]),
    (mvcl(attrs=' stage="1"') + mvcl(attrs=' stage="1"'), None, [(14, "CL107", "error")]),
    (mvcl(attrs=' stage="x"'), None, [(1, "CL107", "error")]),
    (mvcl(kernel='<Kernel entry="k"><Source filename="k.cl"/></Kernel>\n' * 2), None,
     [(2, "CL107", "error"), (3, "CL107", "error"), (4, "CL106", "error"),
      (10, "CL106", "error")]),
    (mvcl(where='<Where mode="a" n="1"/>\n') + mvcl(where='<Where n="1" mode="A"/>\n'), None,
     [(14, "CL108", "error")]),
])
def test_each_mvcl_problem_is_reported_at_its_line(xml, sources, expected):
    configs = load(xml, sources)
    assert codes(configs) == expected, [d.render() for d in configs.diagnostics]
    if any(severity == "error" for _, _, severity in expected):
        assert "L" not in configs.layers
    else:
        assert configs.layers["L"].kind == "MVCL"


def test_mvcl_messages_say_expected_and_found():
    configs = load(mvcl(params=PARAMS.replace('arg-name="W"', 'arg-name="Ww"')))
    text = [d.render() for d in configs.diagnostics]
    assert text == [
        "t.xml:5:1: error[CL110]: parameter 2 of kernel 'k' ('int W') is bound by nothing; "
        "expected a <Tensor>, <Scalar> or <Data> with arg-name=\"W\" (layer L)",
        "t.xml:8:9: error[CL111]: arg-name 'Ww' is not a parameter of kernel 'k'; its "
        "parameters are src, dst, W, alpha (did you mean 'W'?) (layer L)"]
    configs = load(mvcl(kernel='<Kernel entry="k">\n<Source filename="x.bin"/>\n</Kernel>\n'))
    (missing,) = [d.render() for d in configs.diagnostics]
    assert missing.startswith("t.xml:3:9: error[CL102]: source 'x.bin' is an offline VPU "
                              "binary, which OpenCL devices cannot run, and its OpenCL C source "
                              "'x.cl' is not there") or "'x.cl' is not next to it" in missing
    configs = load(mvcl(where='<Where mode="a"/>\n') + mvcl(where='<Where mode="a"/>\n'))
    (twice,) = [d.render() for d in configs.diagnostics]
    assert twice == ("t.xml:14:1: error[CL108]: MVCL layer 'L' is defined twice with "
                     "<Where mode=\"a\">; the first is at t.xml:1:1; both would match the same "
                     "layers: give each definition its own <Where> conditions (or stage "
                     "numbers, for stages) (layer L)")


def test_bin_with_its_cl_on_disk(tmp_path):
    (tmp_path / "k.cl").write_text(K)
    (tmp_path / "a.xml").write_text(mvcl(kernel='<Kernel entry="k">\n<Source filename="k.bin"/>'
                                              '\n</Kernel>\n'))
    configs = load_configs([tmp_path / "a.xml"])
    (note,) = configs.diagnostics
    assert note.code == "CL101" and "using 'k.cl' next to it" in note.message
    assert configs.layers["L"].specs[0].sources[0].path == str(tmp_path / "k.cl")
    (tmp_path / "b.xml").write_text(mvcl(kernel='<Kernel entry="k">\n<Source filename="z.bin"/>'
                                              '\n</Kernel>\n'))
    (missing,) = load_configs([tmp_path / "b.xml"]).diagnostics
    assert missing.code == "CL102" and str(tmp_path / "z.cl") in missing.message


def test_blob_data_is_kept():
    kernel = "__kernel void k(__global const float* src, __global float* dst, " \
             "__global const float* w, int W, float alpha) { }"
    params = PARAMS.replace("</Parameters>",
                            '<Data arg-name="w" type="data" source="weights" format="FYX"/>\n'
                            '</Parameters>')
    configs = load(mvcl(params=params), {"k.cl": kernel})
    assert codes(configs) == []
    (blob,) = [p for p in configs.layers["L"].specs[0].parameters if isinstance(p, MvclData)]
    assert (blob.arg_name, blob.blob, blob.format) == ("w", "weights", "FYX")
