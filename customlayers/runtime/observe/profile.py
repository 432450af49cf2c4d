"""Per-layer device times from OpenCL profiling events (benchmark_app's -pc)."""
from __future__ import annotations

from dataclasses import dataclass

from ...terminal import one_line
from ..compile.concat_in_place import runs_in_place


@dataclass
class LayerTime:
    name: str
    type: str
    impl: str        # custom | built-in | reorder
    entry: str
    ns: int          # summed over the layer's launches (and over runs)
    launches: int


def collect(request) -> list[LayerTime]:
    """Times of the request's last run, one row per layer, in execution order. A Concat that
    ran in place is a row too, with no launch and no time (concat_in_place.py): the layer is
    still there, its work done by the layers before it."""
    timed: dict[int, list] = {}
    for step, event in request.events:
        timed.setdefault(id(step), []).append(event)
    rows: dict[str, LayerTime] = {}
    for step in _steps(request):
        events = timed.get(id(step))
        if events is None and not runs_in_place(step):
            continue
        row = rows.get(step.name)
        if row is None:
            row = rows[step.name] = LayerTime(step.name, step.type, step.impl, step.entry, 0, 0)
        for event in events or ():
            row.ns += event.profile.end - event.profile.start
            row.launches += 1
    return list(rows.values())


def _steps(request) -> list:
    """The steps in execution order: the plan's (the events' own, where there is no plan)."""
    plan = getattr(request, "plan", None)
    if plan is not None:
        return plan.steps
    return list({id(step): step for step, _ in request.events}.values())


def merge(runs: list[list[LayerTime]]) -> list[LayerTime]:
    """Sum several runs' rows by layer."""
    total: dict[str, LayerTime] = {}
    for rows in runs:
        for r in rows:
            t = total.get(r.name)
            if t is None:
                total[r.name] = LayerTime(r.name, r.type, r.impl, r.entry, r.ns, r.launches)
            else:
                t.ns += r.ns
                t.launches += r.launches
    return list(total.values())


def format_table(rows: list[LayerTime], runs: int = 1, limit: int | None = None,
                 by_time: bool = True) -> str:
    """A table: layer, type, implementation, entry, time per run, share; sorted by time,
    longest first, or with `by_time=False` in the rows' order (collect's: execution order)."""
    if by_time:
        rows = sorted(rows, key=lambda r: -r.ns)
    total = sum(r.ns for r in rows) or 1
    # names, types and kernel names are the model's and the user's: one line each, escaped
    shown = [LayerTime(one_line(r.name), one_line(r.type), r.impl, one_line(r.entry), r.ns,
                       r.launches) for r in (rows if limit is None else rows[:limit])]
    w_name = max([len("layer")] + [len(r.name) for r in shown])
    w_name = min(w_name, 48)
    w_type = max([len("type")] + [len(r.type) for r in shown])
    w_entry = min(max([len("kernel")] + [len(r.entry) for r in shown]), 32)
    head = (f"{'layer':<{w_name}}  {'type':<{w_type}}  {'impl':<8}  {'kernel':<{w_entry}}  "
            f"{'time (us)':>10}  {'share':>6}")
    lines = [head, "-" * len(head)]
    for r in shown:
        name = r.name if len(r.name) <= w_name else "..." + r.name[-(w_name - 3):]
        entry = r.entry if len(r.entry) <= w_entry else r.entry[:w_entry - 3] + "..."
        lines.append(f"{name:<{w_name}}  {r.type:<{w_type}}  {r.impl:<8}  {entry:<{w_entry}}  "
                     f"{r.ns / runs / 1e3:>10.1f}  {r.ns / total:>6.1%}")
    if limit is not None and len(rows) > limit:
        rest = sum(r.ns for r in rows[limit:])
        lines.append(f"... {len(rows) - limit} more layers: {rest / runs / 1e3:.1f} us "
                     f"({rest / total:.1%})")
    lines.append(f"total device time per run: {total / runs / 1e3:.1f} us over {len(rows)} layers")
    return "\n".join(lines)
