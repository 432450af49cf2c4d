"""`layers -c CONFIG...`: what the configs register, layer by layer: where it is defined, its
entry and sources, which kernel argument is bound to what, its defines, options, work sizes."""
from __future__ import annotations

import argparse
import sys

from ...config.simplegpu.spec import LayerSpec
from ...terminal import one_line


def add_config_options(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("-c", "--config", action="extend", nargs="+", required=required,
                        default=[],
                        metavar="CONFIG",
                        help="CustomLayer config file(s): -c a.xml b.xml, or -c repeated (a "
                             "later definition of a layer wins)")
    parser.add_argument("--allow-external-sources", action="store_true",
                        help="let Source@filename point outside the config's directory")


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("layers", help="list the custom layers that configs register",
                              description=__doc__)
    add_config_options(p)
    return p


def describe_layer(spec: LayerSpec) -> list[str]:
    """Text lines describing one layer."""
    loc = spec.location
    lines = [f"{spec.name}  ({loc.file}:{loc.line})",
             f"  entry       {spec.entry}",
             f"  sources     {', '.join(s.filename for s in spec.sources)}"]
    args: dict[int, str] = {}
    for t in spec.tensors:
        args[t.arg_index] = (f"{t.kind} {t.port_index} ({t.format}"
                             + (f", shape {t.shape}" if t.shape else "") + ")")
    for k, d in enumerate(spec.data_in_arg_order):
        args[d.arg_index] = f"data '{d.name}' (INPUT{spec.num_input_ports + k}, 1-D)"
    lines += _column("  arguments   ", [f"{i}: {args[i]}" for i in sorted(args)])
    if spec.defines:
        defs = []
        for d in spec.defines:
            text = d.name
            if d.param:
                text += f" = attribute '{d.param}'"
            if d.default is not None:
                text += f" (default {d.default})" if d.param else f" = {d.default}"
            if d.type:
                text += f" [{d.type}]"
            defs.append(text)
        lines += _column("  defines     ", defs)
    if spec.options:
        lines.append(f"  options     {spec.options}")
    ws = spec.work_sizes
    glob = ",".join(ws.global_) if ws.global_ else "B*F*Y*X of output 0 (default)"
    local = ",".join(ws.local) if ws.local and any(t.strip() for t in ws.local) else \
        "driver's choice"
    dim = ws.dim[0] if ws.dim[0] == "output" else f"input,{ws.dim[1]}"
    lines.append(f"  work sizes  global={glob}  local={local}  dim={dim}")
    return lines


def _column(title: str, items: list[str]) -> list[str]:
    """`items` one a line, the first after `title`, the others under it."""
    return [(title if k == 0 else " " * len(title)) + item for k, item in enumerate(items)]


def describe_mvcl_layer(layer) -> list[str]:
    """Text lines describing an MVCL layer: each variant (its Where), each stage's bindings."""
    from ...config.mvcl.spec import (MvclData, MvclLocalData, MvclScalar, render_where)
    loc = layer.location
    lines = [f"{layer.name}  ({loc.file}:{loc.line})  MVCL"]
    for variant in layer.variants:
        lines.append(f"  variant     {render_where(variant.where)}")
        for spec in variant.stages:
            files = ", ".join(s.filename for s in spec.sources)
            lines.append(f"  stage {spec.stage}     entry {spec.entry} ({files})")
            for k, p in spec.arguments:
                if isinstance(p, MvclScalar):
                    what = f"{p.type} from {p.source}" + \
                        (f" (port-index {p.port_index})" if p.port_index is not None else "")
                elif isinstance(p, MvclLocalData):
                    what = f"local memory, {p.size} bytes over {p.dim[0]},{p.dim[1]}"
                elif isinstance(p, MvclData):
                    what = f"data '{p.blob}' ({p.format})"
                elif p.dim is not None:
                    what = f"{p.kind} {p.port_index}, {p.size} bytes over {p.dim[0]},{p.dim[1]}"
                else:
                    what = f"{p.kind} {p.port_index} ({p.format})"
                lines.append(f"              {k.position}: {k.name} = {what}")
            ws = spec.work_sizes
            local = ",".join(ws.local) if ws.local else "driver's choice"
            lines.append(f"              work sizes global={','.join(ws.global_)}  "
                         f"local={local}  dim={ws.dim[0]},{ws.dim[1]}")
    return lines


def run(args) -> int:
    from ...config.loader import load_configs
    from .config_files import refuse_models_as_configs
    from .dialects import cli_of
    refuse_models_as_configs(args.config)
    # listing reads the configs only: no registry, no device
    configs = load_configs(args.config, allow_external_sources=args.allow_external_sources)
    configs.diagnostics.raise_if_errors()
    for d in configs.diagnostics.sorted():
        print(d.render(), file=sys.stderr)
    # each line one line: names, formulas and file names are the configs' text (terminal.py)
    blocks = ["\n".join(map(one_line, cli_of(spec).describe(spec)))
              for spec in (configs.layers[t] for t in sorted(configs.layers))]
    print("\n\n".join(blocks) if blocks else "no custom layers")
    return 0
