"""The MVCL examples through config/ and jit/ alone (the runtime's adapter runs them in
test_examples*.py): config/ loads them, jit/mvcl_program.py generates every stage, and this
test builds the programs on the test device and runs the stages by hand with pyopencl (layout
conversion, internal buffers, local memory, scalars), against each example's numpy reference."""
from __future__ import annotations

import numpy as np
import pyopencl as cl
import pytest

from customlayers.cli.model_commands.demo import case_arrays, find_examples
from customlayers.config import load_configs
from customlayers.jit.mvcl_program import (BlobArg, BufferArg, InputTensorArg, LocalMemoryArg,
                                           OutputTensorArg, ScalarArg, generate_mvcl_stages)
from customlayers.jit.tensor import TensorDesc
from customlayers.runtime.device.build import compile_source

EXAMPLES = find_examples(kinds=("MVCL",))
# memory order of each 4-D layout as axes of a B,F,Y,X array
ORDER = {"BFYX": (0, 1, 2, 3), "BYXF": (0, 2, 3, 1), "YXFB": (2, 3, 1, 0),
         "FYXB": (1, 2, 3, 0), "ANY": (0, 1, 2, 3)}


def _layer(example):
    configs = load_configs([example.config])
    assert not configs.diagnostics.errors, [d.render() for d in configs.diagnostics]
    (layer,) = configs.layers.values()
    return layer


def run_stages(cl_env, programs, inputs, output_shapes):
    """Build and run every stage; the outputs as B,F,Y,X arrays."""
    ctx, queue, dev = cl_env
    mf = cl.mem_flags
    outputs = {}
    buffers = {}
    for program in programs:
        kernel = getattr(compile_source(ctx, ctx.devices[0], program.text, program.options)[0],
                         program.entry)
        assert kernel.num_args == len(program.args)
        values = []
        for arg in program.args:
            if isinstance(arg, InputTensorArg):
                dense = np.ascontiguousarray(inputs[arg.port].transpose(ORDER[arg.layout]))
                values.append(cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=dense))
            elif isinstance(arg, OutputTensorArg):
                shape = output_shapes[arg.port]
                if arg.port not in outputs:
                    outputs[arg.port] = (arg.layout, cl.Buffer(ctx, mf.READ_WRITE,
                                                               4 * int(np.prod(shape))))
                values.append(outputs[arg.port][1])
            elif isinstance(arg, BufferArg):
                if arg.port not in buffers:
                    assert arg.writes, "an input_buffer before its output_buffer"
                    buffers[arg.port] = cl.Buffer(ctx, mf.READ_WRITE, arg.nbytes)
                values.append(buffers[arg.port])
            elif isinstance(arg, LocalMemoryArg):
                values.append(cl.LocalMemory(arg.nbytes))
            elif isinstance(arg, ScalarArg):
                values.append(arg.value)
            else:
                assert isinstance(arg, BlobArg)
                pytest.fail("no example binds a blob")
        kernel(queue, program.global_size, program.local_size, *values)
    result = []
    for port in sorted(outputs):
        layout, buf = outputs[port]
        order = ORDER[layout]
        shape = output_shapes[port]
        dense = np.empty([shape[i] for i in order], np.float32)
        cl.enqueue_copy(queue, dense, buf)
        result.append(dense.transpose(np.argsort(order)))
    queue.finish()
    return result


def test_the_four_mvcl_examples_are_there():
    assert {e.name for e in EXAMPLES} == {"reorg_nhwc", "grn_local", "mvn_two_stage",
                                          "activation_where"}
    for ex in EXAMPLES:
        assert ex.kind == "MVCL"
        assert (ex.folder / "README.md").is_file() and list(ex.folder.glob("*.cl"))


def test_mvcl_examples_are_among_the_runnable_examples():
    # the runtime's MVCL adapter runs them: test_examples*.py and the demo take them too
    names = {e.name for e in find_examples()}
    assert "reorg" in names and names >= {e.name for e in EXAMPLES}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.name)
def test_every_kernel_of_every_example_builds(cl_env, example):
    ctx = cl_env[0]
    layer = _layer(example)
    for spec in layer.specs:
        text = "\n".join(s.text for s in spec.sources)
        program = compile_source(ctx, ctx.devices[0], text, "-cl-kernel-arg-info")[0]
        kernel = getattr(program, spec.entry)
        # the scanner read the same parameter list as the compiler
        assert kernel.num_args == len(spec.kernel_parameters)
        for i, param in enumerate(spec.kernel_parameters):
            assert kernel.get_arg_info(i, cl.kernel_arg_info.NAME) == param.name


def _cases():
    for ex in EXAMPLES:
        for i, _ in enumerate(ex.reference.CASES):
            yield pytest.param(ex, i, id=f"{ex.name}-case{i}")


@pytest.mark.parametrize("example,case_index", list(_cases()))
def test_generated_stages_match_the_reference(cl_env, example, case_index):
    case = example.reference.CASES[case_index]
    inputs, data = case_arrays(case, seed=case_index + 7)
    params = dict(case["params"])
    expected = example.reference.reference(inputs, params, data)
    layer = _layer(example)
    programs = generate_mvcl_stages(layer.select(params), params,
                                    [TensorDesc(a.shape) for a in inputs],
                                    [TensorDesc(e.shape) for e in expected])
    got = run_stages(cl_env, programs, inputs, [e.shape for e in expected])
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
