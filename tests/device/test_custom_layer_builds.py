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
