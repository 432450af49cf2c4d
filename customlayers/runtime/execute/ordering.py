"""Which earlier commands each command of an inference must wait for, when the queue does not
order them (the user's out-of-order queue).

The memory planner reuses buffers (planner.py), so data flow alone is not enough: a command that
overwrites a buffer must also wait for the earlier readers of that buffer (write after read) and
for its earlier writer (write after write), besides the writers of what it reads (read after
write). Pure data: memory is any hashable name of a buffer, commands are listed in program order.
"""
from __future__ import annotations

from typing import Hashable, Sequence


def command_dependencies(accesses: Sequence[tuple[frozenset, frozenset]]) -> list[tuple[int, ...]]:
    """accesses: per command, (memory it reads, memory it writes). Returns per command the
    indices of the earlier commands it must wait for, ascending, none redundant by repetition
    (a command that both wrote and read a buffer is listed once)."""
    last_writer: dict[Hashable, int] = {}
    readers: dict[Hashable, list[int]] = {}       # readers since the last write
    deps: list[tuple[int, ...]] = []
    for i, (reads, writes) in enumerate(accesses):
        wait: set[int] = set()
        for m in reads:
            if m in last_writer:
                wait.add(last_writer[m])
        for m in writes:
            if m in last_writer:
                wait.add(last_writer[m])
            wait.update(readers.get(m, ()))
        wait.discard(i)
        deps.append(tuple(sorted(wait)))
        for m in reads:
            readers.setdefault(m, []).append(i)
        for m in writes:
            last_writer[m] = i
            readers[m] = []
    return deps


def sinks(deps: Sequence[tuple[int, ...]]) -> list[int]:
    """The commands no later command waits for: when they are done, all are."""
    waited = {d for ds in deps for d in ds}
    return [i for i in range(len(deps)) if i not in waited]
