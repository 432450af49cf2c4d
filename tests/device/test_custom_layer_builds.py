"""Custom layers compile with the built-ins: a network prepares its custom layers' programs
(Registry.prepare) while it lays out its layers, builds every program in one parallel batch
(device/parallel_build.py), then checks each custom kernel (Registry.finish). Observed through a
real program cache that records who asks it for what (no OpenCL is mocked)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from customlayers.errors import KernelBuildError
from customlayers.graph.graph import Graph, Node, Port
from customlayers.runtime.device.cache import ProgramCache

KERNEL = """__kernel void {name}(__global const INPUT0_TYPE* x, __global OUTPUT0_TYPE* y) {{
    const int i = get_global_id(0);
    y[i] = {expr};
}}
"""


def layer(name: str, entry: str) -> str:
    return f"""<CustomLayer name="{name}" type="SimpleGPU" version="1">
  <Kernel entry="{entry}">
    <Source filename="{entry}.cl"/>
  </Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0" format="BFYX"/>
    <Tensor arg-index="1" type="output" port-index="0" format="BFYX"/>
  </Buffers>
  <WorkSizes global="B*F*Y*X,1,1"/>
</CustomLayer>
"""


def two_layer_config(second_expr: str = "x[i] + 1.0f",
                     second_kernel: str = KERNEL) -> tuple[str, dict[str, str]]:
    xml = ("<CustomLayers>" + layer("Twice", "twice") + layer("PlusOne", "plus_one")
           + "</CustomLayers>")
    return xml, {"twice.cl": KERNEL.format(name="twice", expr="2.0f * x[i]"),
                 "plus_one.cl": second_kernel.format(name="plus_one", expr=second_expr)}


def chain(shape=(1, 2, 3, 4)) -> Graph:
    """x -> Twice -> PlusOne -> y"""
    g = Graph("chain")
    g.add_node(Node("x", "x", "Parameter", outputs=[Port(shape, "f32")]))
    g.add_node(Node("twice", "twice", "Twice", {}, [Port(shape, "f32")],
                    [Port(shape, "f32")]))
    g.add_node(Node("plus_one", "plus_one", "PlusOne", {}, [Port(shape, "f32")],
                    [Port(shape, "f32", ("y",))]))
    g.add_node(Node("y/sink", "y/sink", "Result", inputs=[Port(shape, "f32")]))
    g.connect("x", 0, "twice", 0)
    g.connect("twice", 0, "plus_one", 0)
    g.connect("plus_one", 0, "y/sink", 0)
    return g


class RecordingCache(ProgramCache):
    """A program cache (in memory only) that notes each request: (label, thread name)."""

    def __init__(self):
        super().__init__(enabled=False)
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def build_with_warnings(self, context, device, source, options="", *, line_map=(),
                            label=""):
        with self._lock:
            self.requests.append((label, threading.current_thread().name))
        return super().build_with_warnings(context, device, source, options,
                                           line_map=line_map, label=label)


@pytest.fixture
def make_network(test_device):
    from customlayers.runtime.compile.network import Network
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.layers.registry import Registry

    def make(second_expr: str = "x[i] + 1.0f", second_kernel: str = KERNEL):
        cache = RecordingCache()
        registry = Registry(Engine(test_device, cache=cache))
        xml, sources = two_layer_config(second_expr, second_kernel)
        registry.load_string(xml, sources, name="layers.xml")
        return Network(chain(), registry, registry.engine, tuning="off"), cache
    return make


def test_two_custom_layers_build_in_the_networks_parallel_batch(make_network):
    import os
    from customlayers.runtime.device.parallel_build import MAX_THREADS
    network, cache = make_network()
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(network.infer({"x": x})["y"], 2 * x + 1, rtol=1e-6)
    custom = [r for r in cache.requests if r[0] in ("Twice", "PlusOne")]
    # each program asked for once, by the batch: none built one by one while the layers were
    # laid out (that would ask twice: once to bind, once more in the batch)
    assert sorted(label for label, _ in custom) == ["PlusOne", "Twice"]
    if min(MAX_THREADS, os.cpu_count() or 1) > 1:     # the batch builds on its own threads
        assert all(thread.startswith("cl-build") for _, thread in custom), custom
    assert cache.misses == 2


def test_a_custom_layers_build_error_in_a_network_names_the_users_file_and_line(make_network):
    with pytest.raises(KernelBuildError) as info:
        make_network(second_expr="x[i] + undeclared_name")
    e = info.value
    assert e.code == "CL080" and e.layer == "PlusOne"
    assert "layers.xml" in str(e.location)
    assert "plus_one.cl:3" in str(e), str(e)


def test_a_custom_kernel_is_checked_once_built_in_the_batch(make_network):
    """Registry.finish runs on the program the batch built: a kernel whose output parameter
    is const (it reads what it should write) is named as Registry.bind names it."""
    from customlayers.errors import BindingError
    const_output = ("__kernel void {name}(__global const INPUT0_TYPE* x, "
                    "__global const OUTPUT0_TYPE* y) {{ }}\n")
    with pytest.raises(BindingError, match="cannot write through a const pointer") as info:
        make_network(second_kernel=const_output)
    assert info.value.code == "CL084" and info.value.layer == "PlusOne"


MVN = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples" / "layers" / \
    "mvn_two_stage" / "mvn_two_stage.xml"
BROKEN_MVCL = """<CustomLayer name="Broken" type="MVCL" version="1">
    <Kernel entry="broken"><Source filename="broken.cl"/></Kernel>
    <Parameters>
        <Tensor arg-name="src" type="input" port-index="0" format="BFYX"/>
        <Tensor arg-name="dst" type="output" port-index="0" format="BFYX"/>
    </Parameters>
    <WorkSizes dim="input,0" global="B*F*Y*X,1,1"/>
</CustomLayer>
"""
BROKEN_MVCL_CL = """__kernel void broken(__global const float* src, __global float* dst)
{
    const int i = get_global_id(0);
    dst[i] = src[i] * not_declared;
}
"""


def _mvcl_network(test_device, load, layer_type, x, attrs):
    from customlayers.runtime.compile.network import Network
    from customlayers.runtime.compile.one_layer import one_layer_graph
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.layers.registry import Registry
    cache = RecordingCache()
    registry = Registry(Engine(test_device, cache=cache))
    load(registry)
    graph = one_layer_graph(layer_type, [x], {}, [x.shape], attrs)
    return Network(graph, registry, registry.engine, tuning="off"), cache


def test_an_mvcl_layers_stages_build_in_the_networks_parallel_batch(test_device):
    import os
    from customlayers.runtime.device.parallel_build import MAX_THREADS
    x = np.random.default_rng(1).standard_normal((2, 4, 3, 7)).astype(np.float32)
    network, cache = _mvcl_network(test_device, lambda r: r.load(MVN), "MVN", x,
                                   {"normalize_variance": "1", "eps": "1e-9"})
    got = network.infer({"input0": x})["output0"]
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean(axis=(2, 3), keepdims=True)) / np.sqrt(
        x64.var(axis=(2, 3), keepdims=True) + 1e-9)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    stages = [r for r in cache.requests if r[0].startswith("MVN/stage")]
    # each stage's program asked for once, by the batch (compiled one by one while the layer
    # was laid out, each would be asked for twice)
    assert sorted(label for label, _ in stages) == ["MVN/stage0", "MVN/stage1"]
    if min(MAX_THREADS, os.cpu_count() or 1) > 1:
        assert all(thread.startswith("cl-build") for _, thread in stages), stages


def test_an_mvcl_build_error_in_a_network_names_the_users_file_and_line(test_device):
    x = np.ones((1, 2, 3, 4), np.float32)
    with pytest.raises(KernelBuildError) as info:
        _mvcl_network(test_device, lambda r: r.load_string(BROKEN_MVCL,
                                                           {"broken.cl": BROKEN_MVCL_CL},
                                                           name="broken.xml"),
                      "Broken", x, {})
    e = info.value
    assert e.code == "CL080" and e.layer == "Broken"
    assert "broken.cl:4" in str(e), str(e)
