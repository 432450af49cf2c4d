"""`customlayers devices`: the OpenCL platforms and devices, as a table."""
from __future__ import annotations

import argparse
import json

from ..runtime.device.device import describe_device, device_index_names, list_devices, select_device

COLUMNS = [("id (-d)", None), ("device", "name"), ("platform", "platform"), ("type", "type"),
           ("OpenCL", "opencl_version"), ("driver", "driver"), ("fp16", "fp16"),
           ("fp64", "fp64"), ("max WG", "max_work_group_size"), ("CUs", "compute_units"),
           ("global MiB", "global_mem_mib"), ("max alloc MiB", "max_alloc_mib")]


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("devices", help="list OpenCL platforms and devices",
                              description="List every OpenCL device with the name -d takes "
                                          "for it (GPU.0, GPU.1, CPU.0: numbered per type, as "
                                          "OpenVINO does); '*' marks the one chosen by default.")
    p.add_argument("--format", choices=("text", "json"), default="text")
    return p


def _cell(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def run(args) -> int:
    devices = list_devices()
    if not devices:
        select_device()          # raises DeviceError with the install hint
    default = select_device()
    rows = [describe_device(d) for d in devices]
    names = device_index_names(devices)
    if args.format == "json":
        for row, dev, name in zip(rows, devices, names):
            row["id"] = name
            row["default"] = dev == default
        print(json.dumps(rows, indent=2))
        return 0
    table = [[h for h, _ in COLUMNS]]
    for name, row, dev in zip(names, rows, devices):
        mark = "*" if dev == default else " "
        table.append([f"{name}{mark}"] + [_cell(row[key]) for _, key in COLUMNS[1:]])
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0
