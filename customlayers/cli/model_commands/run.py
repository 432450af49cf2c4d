"""`customlayers run -m model.xml [-c config.xml ...] [-l layers.py] [-i input.npy] [-o out.npz]
[-pc] [--check-with reference.py]`; a model with state (ReadValue/Assign) runs its -i files as
a sequence on one request (`--stream -i seq.npy`: the file's first axis), sequence_inputs.py."""
from __future__ import annotations

import os
import sys

import numpy as np

from ...terminal import one_line
from .benchmark_app_options import add_profile_options, by_time, perf_counts_wanted, write_profiles
from ..common import (add_kernel_check_options, check_bounds_note, report_kernel_problems,
                     warn_if_not_finite)
from .model_args import add_model_options, load_network_steps
from .causal_steps import run_steps
from .sequence_inputs import stacked
from .. import UsageError
from ..user_files.output import check_array_count, check_output_path, write_arrays_atomically


def add_parser(sub):
    p = sub.add_parser("run", help="run a model (IR or ONNX) whose layers may be custom layers",
                       description="Run a whole model once on an OpenCL device and print or save "
                                   "its outputs.")
    add_model_options(p, "run")
    p.add_argument("-o", "--output", help="write the outputs to this .npz (or .npy: one output); "
                                          "of a sequence, each output's steps stacked on a "
                                          "new first axis")
    p.add_argument("--stream", action="store_true",
                   help="a model with state (OpenVINO ReadValue/Assign): each -i file's first "
                        "axis is the steps, run in order on one request (without --stream, "
                        "such a model takes one file per step: -i a.npy -i b.npy ...); a "
                        "whole-window causal model (a TCN): its input [N, C, T] is walked one "
                        "time step at a time (Network.streaming), -o stacks every step's "
                        "outputs on a new first axis")
    add_profile_options(p)
    add_kernel_check_options(p)
    p.add_argument("--check-with", action="extend", nargs="+", default=[],
                   metavar="REFERENCE.py",
                   help="run each custom layer's Python reference (@cpu_layer of its type) on "
                        "the inputs the kernel got, compare, and report the first layer whose "
                        "outputs differ (exit 1)")
    from ..layer_commands.check import add_tolerance_options
    add_tolerance_options(p, " of --check-with")
    return p


def run(args) -> int:
    from ...runtime.observe import profile
    perf_counts = perf_counts_wanted(args)
    if args.output is not None:
        check_output_path(args.output)
    report, resolver = reference_checks(args)
    engine, net, steps = load_network_steps(args, profiling=perf_counts, resolver=resolver)
    arrays = steps[0]
    if args.output:
        # the graph's Results, not net.output_names: that builds the default plan, which a
        # model with shape inputs cannot have before it sees their values
        check_array_count(args.output, len(net.graph.results), "the model")
    print(f"device: {engine.device.name.strip()} ({engine.device.platform.name.strip()})",
          file=sys.stderr)
    if args.check_bounds or args.sanitize:
        from ...runtime.checks.network_checks import check_custom_layers
        problems = check_custom_layers(net, arrays, bounds=args.check_bounds,
                                       sanitize=args.sanitize)
        check_bounds_note(args)
        if report_kernel_problems(problems):    # no output is written from such a model
            return 1
    if _stateful(net):                   # a sequence on one request, its state carried
        req, outputs = run_sequence(net, steps)
    elif args.stream:                    # a causal model, one time step at a time
        if perf_counts:
            raise UsageError("--stream runs one step kernel per step: -pc profiles the "
                             "whole-window model's layers; run without --stream for them")
        outputs = run_steps(net, arrays, summarize)
        req = None
    else:
        req = net.infer_async(arrays)    # the plan for these shapes (and shape-input values)
        outputs = req.wait()
        warn_if_not_finite(outputs, "the model's", arrays)
        for name, arr in outputs.items():
            print(summarize(name, arr))
    if args.output:
        write_arrays_atomically(args.output, outputs)
        print(f"outputs written to {args.output}", file=sys.stderr)
    if perf_counts:
        from ...runtime.observe.trace import TraceRecorder
        rows = profile.collect(req)
        print()
        print(profile.format_table(rows, by_time=by_time(args)))
        recorder = TraceRecorder(engine.device.name.strip())
        recorder.add(req)
        write_profiles(args, rows, 1, recorder, engine.device.name.strip())
    if report is not None:
        return print_checks(report, args.check_with)
    return 0


def _stateful(net) -> bool:
    from ...graph.variables import variables_of
    return bool(variables_of(net.graph))


def run_sequence(net, steps):
    """The steps in order on one request (its state carried: a RequestStream, as
    Network.streaming gives a stateful model, made here directly so that a compiled package,
    which has no graph to stream from, runs too); each step's outputs printed. Returns the
    request and every output's steps stacked (what -o writes)."""
    from ...runtime.streaming.request_stream import RequestStream
    stream = RequestStream(net)
    outputs = []
    for t, step in enumerate(steps):
        outputs.append(stream.step(step))
        warn_if_not_finite(outputs[-1], f"step {t}'s", step)
        for name, arr in outputs[-1].items():
            print(f"step {t}: {summarize(name, arr)}")
    req = stream.request
    print(f"{len(steps)} step(s) on one request, its state carried "
          f"({', '.join(s.name for s in req.query_state()) or 'no state'})", file=sys.stderr)
    return req, stacked(outputs)


def reference_checks(args):
    """(the report, a resolver factory) for --check-with; (None, None) without it."""
    if not args.check_with:
        return None, None
    from ...runtime.layers.python_loader import load_python_layers
    from ...runtime.checks.reference_check import CheckingResolver, CheckReport
    for path in args.check_with:
        if not path.endswith(".py") and not os.path.lexists(path):
            # `--check-with onnxruntime`: a runtime's name, where a reference file goes
            raise UsageError(f"--check-with {path}: no such file; --check-with takes the Python "
                             f"references (REFERENCE.py, @cpu_layer classes) of custom layers, "
                             f"not a runtime: to compare the model with ONNX Runtime, run it "
                             f"there on the -i files and compare with -o's outputs")
    references = {d.type: d for path in args.check_with for d in load_python_layers(path)}
    report = CheckReport(rtol=args.rtol, atol=args.atol)
    return report, lambda registry, say: CheckingResolver(registry, references, report, say)


def print_checks(report, paths) -> int:
    """One line per checked layer, in the order they ran, then the first that differs."""
    print()
    print(f"check with {', '.join(paths)} (rtol {report.rtol:g}, atol {report.atol:g}):")
    names = {id(c): (one_line(c.name), one_line(c.type)) for c in report.checks}
    width = max([len(name) for name, _ in names.values()] + [5])
    for c in report.checks:
        r = c.result
        name, layer_type = names[id(c)]
        status = "ok" if r.ok else f"DIFFERS{f' ({r.problem})' if r.problem else ''}"
        print(f"  {name:<{width}}  {layer_type:<16}  max abs {r.max_abs:.3e}  max rel "
              f"{r.max_rel:.3e}  worst at {r.where():<20}  {status}")
    for layer_type in report.unchecked:
        print(f"  not checked: layers of type {layer_type} (no Python layer of that type)")
    first = report.first_difference()
    if first is None:
        print(f"{len(report.checks)} custom layer(s) checked: every output matches "
              f"its reference" if report.checks else "no custom layer was checked")
        return 0
    r = first.result
    detail = r.problem or (f"max abs error {r.max_abs:.3e}, max rel error {r.max_rel:.3e}, "
                           f"worst at {r.where()} of output {r.output}")
    print(f"first layer whose outputs differ: {first.where}: {detail}")
    return 1


def summarize(name: str, arr: np.ndarray) -> str:
    flat = arr.reshape(-1)
    if flat.size == 0:                  # a batch of 0: no values to sum up
        return f"{one_line(name)}: shape {list(arr.shape)} {arr.dtype}  (no elements)"
    text = (f"{one_line(name)}: shape {list(arr.shape)} {arr.dtype}  min {flat.min():.6g}  "
            f"max {flat.max():.6g}  mean {flat.mean():.6g}")
    if arr.ndim == 2 and arr.shape[0] == 1 and arr.shape[1] > 1:
        top = np.argsort(-flat)[:5]
        text += "  top-5 " + ", ".join(f"{i}:{flat[i]:.4f}" for i in top)
    return text
