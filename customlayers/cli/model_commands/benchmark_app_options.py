"""OpenVINO benchmark_app's options in `run` and `benchmark`.

Users come with benchmark_app command lines. Where we have the same thing, the same option
(one dash, the same meaning) is taken by the command itself (model_args.py, benchmark.py).
Every other benchmark_app option is registered here too, so that it is never misread as
something else: given, it stops the command with a usage error that says what to use instead
(exit 2).
"""
from __future__ import annotations

import argparse

# option -> (how many values it takes, what to do instead). The values count only matters for
# the order of argparse's errors; the first of these options given stops the parse.
NOT_HERE: dict[str, tuple[str | None, str]] = {
    "-nstreams": (None, "one in-order OpenCL queue runs a device's work here; to keep several "
                        "inferences in flight use -nireq N (benchmark)"),
    "-nthreads": (None, "the OpenCL driver owns its threads; there is no equivalent"),
    "-pin": (None, "the OpenCL driver owns its threads; there is no equivalent"),
    "-infer_precision": (None, "layers run in the element types of their tensors (the model's); "
                               "there is no precision hint"),
    "-ip": (None, "inputs are taken in the model's element types; arrays given with -i are "
                  "converted to them"),
    "-op": (None, "outputs come in the model's element types"),
    "-iop": (None, "inputs and outputs are in the model's element types; arrays given with -i "
                   "are converted to them"),
    "-layout": (None, "tensors keep the model's layout; a CustomLayer <Tensor format=...> asks "
                      "for another one for its kernel"),
    "-iscale": (None, "inputs are used as given: scale them in the .npy you give with -i"),
    "-imean": (None, "inputs are used as given: subtract the mean in the .npy you give with -i"),
    "-mean_values": (None, "inputs are used as given: subtract the mean in the .npy you give "
                           "with -i"),
    "-scale_values": (None, "inputs are used as given: scale them in the .npy you give with -i"),
    "-load_config": (None, "the device is chosen with -d; other settings are the CUSTOMLAYERS_* "
                           "environment variables (docs/settings.md)"),
    "-dump_config": (None, "the device is chosen with -d; other settings are the CUSTOMLAYERS_* "
                           "environment variables (docs/settings.md)"),
    "-lfile": ("?", "models are read with -m (OpenVINO IR .xml or .onnx)"),
    "-extensions": (None, "custom layers come as CustomLayer configs: -c CONFIG (repeatable), "
                          "CPU layers as Python modules: -l layers.py"),
    "-report_type": (None, "the summary is printed on stdout; -pc adds each layer's device "
                           "time, and -pc --report FILE.json writes that table as JSON"),
    "-report_folder": (None, "the summary is printed on stdout; -pc --report FILE.json writes "
                             "the per-layer table as JSON, -pc --trace FILE.json a Chrome "
                             "trace"),
    "-json_stats": ("?", "no report files are written: the summary is printed on stdout, and -pc "
                         "adds each layer's device time (averaged over the runs)"),
    "-exec_graph_path": (None, "no execution graph is written; -pc lists the layers as they "
                               "run, with their implementation and kernel"),
    "-pcseq": ("?", "a run has one shape per input: run once per -data_shape"),
    "-max_irate": (None, "requests are started as soon as one is free; there is no rate limit"),
}

# benchmark_app options that only make sense when a model runs many times
BENCHMARK_ONLY = ("-niter", "-nireq", "-t", "-hint", "-api", "-progress", "-inference_only",
                  "-latency_percentile")


PCSORT = ("sort", "simple_sort", "no_sort")


def str2bool(text: str) -> bool:
    """benchmark_app's boolean values: true/false, yes/no, 1/0 (any case)."""
    low = text.lower()
    if low in ("true", "yes", "y", "1", "on"):
        return True
    if low in ("false", "no", "n", "0", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, found {text!r}")


class _Refuse(argparse.Action):
    """An option we do not have: a usage error that says what to use instead."""

    def __init__(self, option_strings, dest, advice: str = "", **kwargs):
        self.advice = advice
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string}: {self.advice}")


def add_profile_options(parser: argparse.ArgumentParser) -> None:
    """-pc [true|false] and -pcsort, as benchmark_app spells them."""
    parser.add_argument("-pc", "--perf-counts", nargs="?", const=True, default=False,
                        type=str2bool, metavar="true|false",
                        help="print per-layer device times (from OpenCL profiling events)")
    parser.add_argument("-pcsort", choices=PCSORT, default=None,
                        help="print the per-layer times (as -pc): 'sort' and 'simple_sort' "
                             "longest first (simple_sort: only layers that ran, and all of ours "
                             "do), 'no_sort' in execution order")
    parser.add_argument("--trace", metavar="FILE.json", default=None,
                        help="with -pc: write a Chrome trace (Perfetto, chrome://tracing) of "
                             "every kernel on the device's timeline, named by the model's nodes")
    parser.add_argument("--report", metavar="FILE.json", default=None,
                        help="with -pc: write the per-layer table as JSON")


def perf_counts_wanted(args) -> bool:
    """-pc, or -pcsort (which implies it, as in benchmark_app). --trace and --report need
    -pc."""
    from .. import UsageError
    from ..user_files.output import check_output_path
    wanted = bool(args.perf_counts or args.pcsort)
    for option, value in (("--trace", args.trace), ("--report", args.report)):
        if value is not None and not wanted:
            raise UsageError(f"{option} {value}: the times come from profiling events; add -pc")
        if value is not None:      # before anything runs, as -o is
            check_output_path(value, (".json",), option)
    return wanted


def by_time(args) -> bool:
    """Whether the per-layer table is sorted by time (-pcsort no_sort: in execution order)."""
    return args.pcsort != "no_sort"


def write_profiles(args, rows, runs: int, recorder, device_name: str) -> None:
    """--trace and --report, each written atomically; a line on stderr names each file."""
    import sys
    from pathlib import Path
    from ...runtime.observe import trace
    for path in (args.trace, args.report):     # a missing folder is created, as for -o
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    if args.trace:
        recorder.write(args.trace)
        print(f"trace of {recorder.runs} run(s) written to {args.trace}", file=sys.stderr)
    if args.report:
        trace.write_json(args.report, trace.report(rows, runs, device_name))
        print(f"per-layer report written to {args.report}", file=sys.stderr)


def add_refused_options(parser: argparse.ArgumentParser, command: str) -> None:
    """Register benchmark_app's options that `command` does not have, each answering with
    what to use instead. In `run`, the benchmarking options point to `benchmark`."""
    for option, (nargs, advice) in NOT_HERE.items():
        parser.add_argument(option, action=_Refuse, nargs=nargs,
                            advice=f"benchmark_app's option has no equivalent here: {advice}",
                            dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                            help=argparse.SUPPRESS)
    if command == "run":
        for option in BENCHMARK_ONLY:
            nargs = "?" if option in ("-progress", "-inference_only") else None
            parser.add_argument(
                option, action=_Refuse, nargs=nargs, dest=argparse.SUPPRESS,
                default=argparse.SUPPRESS, help=argparse.SUPPRESS,
                advice=f"`run` runs the model once; to measure, use `customlayers benchmark` "
                       f"with the same options and {option}")
