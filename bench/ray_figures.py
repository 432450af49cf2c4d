"""bench/ray_scaling.py's figures of one pass, from the batches the actors stamped: the steady
rows/s (while every actor works), the end-to-end rows/s, and where the actors' time went."""
from __future__ import annotations

import numpy as np


def figures(parts: list, rows: int, seconds: float) -> dict:
    col = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    steady, lo, hi = steady_rate(col["t0"], col["t1"], col["pid"])
    pids = np.unique(col["pid"])
    return {"steady": steady, "total": rows / seconds, "shares": time_shares(col, lo, hi),
            "init_s": [float(col["init_s"][col["pid"] == p][0]) for p in pids],
            "devices": sorted({str(d) for d in col["device"]}), "actors": len(pids)}


def steady_rate(t0: np.ndarray, t1: np.ndarray, pids: np.ndarray) -> tuple:
    """(rows/s, window start, window end): rows per second while every actor was working,
    from the last actor's first batch to the first actor's last batch (actors start at
    different times; counting from the first start would charge one actor's start-up to the
    pool). Each batch counts for the part of its duration inside that window."""
    actors = np.unique(pids)
    lo = max(t0[pids == a].min() for a in actors)
    hi = min(t1[pids == a].max() for a in actors)
    if hi <= lo:            # the actors never overlapped: the whole span
        lo, hi = t0.min(), t1.max()
        return len(t0) / (hi - lo), lo, hi
    inside = np.clip(np.minimum(t1, hi) - np.maximum(t0, lo), 0, None)
    return float((inside / np.maximum(t1 - t0, 1e-9)).sum() / (hi - lo)), lo, hi


def time_shares(col: dict, lo: float, hi: float) -> dict:
    """Shares of the steady window, averaged over the actors: in requests (`device`), in the
    host's cutting and joining (`host`), and between batches, waiting for Ray (`ray`)."""
    def clipped(a, b):
        return np.clip(np.minimum(b, hi) - np.maximum(a, lo), 0, None)
    # one entry per batch (its rows share their stamps)
    _, first = np.unique(np.stack([col["pid"], col["t0"]]), axis=1, return_index=True)
    t0, cut, run, t1 = (col[k][first] for k in ("t0", "t_cut", "t_run", "t1"))
    span = (hi - lo) * len(np.unique(col["pid"]))
    device = clipped(cut, run).sum() / span
    host = (clipped(t0, cut).sum() + clipped(run, t1).sum()) / span
    return {"device": device, "host": host, "ray": max(0.0, 1 - device - host)}
